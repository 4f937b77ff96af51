#!/usr/bin/env python3
"""Writes one of ortserve's generated decoders (ModelGenerator: bench, vocab128k, ...) as a llama.cpp
GGUF file with the same weights, so the two engines can be measured side by side on one machine.

    python onnx_to_gguf.py MODEL_DIR OUT.gguf

MODEL_DIR holds model.onnx, config.json and tokenizer.json as ModelGenerator writes them
(LLaMA-style: RMSNorm, grouped-query attention with rotate-half rotary, SwiGLU, projections
stored [in, out] as initializers named l<N>.<q|k|v|o|gate|up|down>.weight; either attention variant,
explicit or GroupQueryAttention, as both hold the same initializers). A head_dim other than
hidden / heads (qwen3-0.6b: 128 with hidden 1024 and 16 heads) is written as the key and value
lengths; a tied head (no lm_head.weight) is written without output.weight, so llama.cpp reads
token_embd as the output matrix. Weights in external data (model.onnx_data) are memory-mapped,
not loaded whole.
The GGUF is architecture "llama" in F32 (quantize it with llama.cpp's llama-quantize). The q and
k projections are permuted from the rotate-half layout to llama.cpp's interleaved rotary, as
llama.cpp's own convert_hf_to_gguf.py does for Hugging Face Llama checkpoints, so both engines
compute the same function on the same numbers.

Needs numpy, onnx and gguf (pip). Not used by the test suite.
"""
import json
import sys
from pathlib import Path

import gguf
import numpy as np
import onnx
from onnx import numpy_helper


def permute(w: np.ndarray, heads: int) -> np.ndarray:
    # w: [out, in] with out = heads * head_dim, rotate-half halves -> interleaved pairs
    out = w.shape[0]
    return w.reshape(heads, 2, out // heads // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def tensor(t: onnx.TensorProto, model_dir: Path) -> np.ndarray:
    if t.data_location != onnx.TensorProto.EXTERNAL:
        return numpy_helper.to_array(t)
    info = {e.key: e.value for e in t.external_data}
    assert t.data_type == onnx.TensorProto.FLOAT, t.name
    return np.memmap(model_dir / info["location"], dtype=np.float32, mode="r", offset=int(info.get("offset", 0)),
                     shape=tuple(t.dims))


def main(model_dir: Path, out: Path) -> None:
    config = json.loads((model_dir / "config.json").read_text())
    tok = json.loads((model_dir / "tokenizer.json").read_text())
    model = onnx.load(str(model_dir / "model.onnx"), load_external_data=False)
    weights = {t.name: tensor(t, model_dir) for t in model.graph.initializer}

    hidden = config["hidden_size"]
    layers = config["num_hidden_layers"]
    heads = config["num_attention_heads"]
    kv_heads = config["num_key_value_heads"]
    vocab = config["vocab_size"]
    head_dim = config.get("head_dim", hidden // heads)

    w = gguf.GGUFWriter(str(out), "llama")
    w.add_name(model_dir.name)
    w.add_context_length(config["max_position_embeddings"])
    w.add_embedding_length(hidden)
    w.add_block_count(layers)
    w.add_feed_forward_length(config["intermediate_size"])
    w.add_head_count(heads)
    w.add_head_count_kv(kv_heads)
    w.add_rope_dimension_count(head_dim)
    if head_dim != hidden // heads:
        w.add_key_length(head_dim)
        w.add_value_length(head_dim)
    w.add_rope_freq_base(float(config.get("rope_theta", 10000.0)))
    w.add_layer_norm_rms_eps(float(config.get("rms_norm_eps", 1e-6)))
    w.add_file_type(gguf.LlamaFileType.ALL_F32)
    w.add_vocab_size(vocab)

    # tokenizer: byte-level BPE with the GPT-2 byte alphabet, as in tokenizer.json
    tokens = [""] * vocab
    types = [gguf.TokenType.NORMAL] * vocab
    for piece, i in tok["model"]["vocab"].items():
        tokens[i] = piece
    for added in tok.get("added_tokens", []):
        tokens[added["id"]] = added["content"]
        types[added["id"]] = gguf.TokenType.CONTROL if added.get("special") else gguf.TokenType.USER_DEFINED
    for i, t in enumerate(tokens):
        if not t:
            tokens[i] = f"[PAD{i}]"
            types[i] = gguf.TokenType.UNUSED
    merges = [m if isinstance(m, str) else " ".join(m) for m in tok["model"]["merges"]]
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("default")
    w.add_token_list(tokens)
    w.add_token_types(types)
    w.add_token_merges(merges)
    bos = config.get("bos_token_id")
    eos = config.get("eos_token_id")
    if bos is not None:
        w.add_bos_token_id(bos)
    if eos is not None:
        w.add_eos_token_id(eos[0] if isinstance(eos, list) else eos)
    w.add_add_bos_token(False)

    def put(name: str, array: np.ndarray) -> None:
        w.add_tensor(name, np.ascontiguousarray(array, dtype=np.float32))

    put("token_embd.weight", weights["embed_tokens"])                  # [vocab, hidden]
    put("output_norm.weight", weights["final_norm.weight"])
    if "lm_head.weight" in weights:                                     # absent when tied: llama.cpp reads token_embd
        put("output.weight", weights["lm_head.weight"].T)               # [hidden, vocab] -> [vocab, hidden]
    for l in range(layers):
        p = f"l{l}."
        b = f"blk.{l}."
        put(b + "attn_norm.weight", weights[p + "in_norm.weight"])
        put(b + "attn_q.weight", permute(weights[p + "q.weight"].T, heads))
        put(b + "attn_k.weight", permute(weights[p + "k.weight"].T, kv_heads))
        put(b + "attn_v.weight", weights[p + "v.weight"].T)
        put(b + "attn_output.weight", weights[p + "o.weight"].T)
        put(b + "ffn_norm.weight", weights[p + "post_norm.weight"])
        put(b + "ffn_gate.weight", weights[p + "gate.weight"].T)
        put(b + "ffn_up.weight", weights[p + "up.weight"].T)
        put(b + "ffn_down.weight", weights[p + "down.weight"].T)

    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    print(f"wrote {out} ({layers} layers, hidden {hidden}, vocab {vocab})")


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit("usage: onnx_to_gguf.py MODEL_DIR OUT.gguf")
    main(Path(sys.argv[1]), Path(sys.argv[2]))
