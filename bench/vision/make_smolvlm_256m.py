"""SmolVLM-256M-Instruct at its real size with seeded random weights, in the onnx-community three-graph layout
(issue 50's bench model): transformers' Idefics3ForConditionalGeneration with HuggingFaceTB/SmolVLM-256M-Instruct's
shapes, exported fp32 exactly as the test fixture is (src/test/resources/fixtures/smolvlm-tiny/scripts/
make_smolvlm_tiny.py: its vision wrapper, its Idefics3VisionEmbeddings patch, its embed wrapper, the same
DynamicCache decoder wrapper; torch.onnx.export dynamo=False, opset 17, eager attention), plus the processor files.

    flock /tmp/bigmem.lock /tmp/hf/bin/python bench/vision/make_smolvlm_256m.py [OUT]

OUT defaults to target/bench-models/smolvlm-256m-random (under the repository root). /tmp/hf: transformers 5.18,
torch 2.13 (cpu), onnx, onnxruntime, Pillow; no torchvision (the PIL Idefics3 image processor is the one used).
Memory: about 4 GB at the peak. Time: about 6 minutes on 2 cores: 1.5 to export, 4 for the checks (the 13-frame vision
encoder takes over a minute in onnxruntime and in torch each).

Writes into OUT:
  config.json, generation_config.json            model.config / model.generation_config .save_pretrained
  processor_config.json, chat_template.jinja,
  tokenizer.json, tokenizer_config.json          processor.save_pretrained (transformers 5.18 layout)
  preprocessor_config.json                       image_processor.save_pretrained (the flat file Hub repos carry)
  onnx/vision_encoder.onnx       (~375 MB)       pixel_values f32 [batch, num_images, 3, 512, 512],
                                                 pixel_attention_mask bool [batch, num_images, 512, 512]
                                                 -> image_features f32 [num_real_frames, 64, 576]
  onnx/embed_tokens.onnx         (~114 MB)       input_ids i64 [batch, seq] -> inputs_embeds f32 [batch, seq, 576]
  onnx/decoder_model_merged.onnx (~540 MB)       inputs_embeds, attention_mask i64, position_ids i64,
                                                 past_key_values.{0..29}.{key,value} f32 [batch, 3, past, 64]
                                                 -> logits, present.{0..29}.{key,value}
  export_report.json                             parameter counts, file sizes, token counts, the checks' numbers
                                                 and onnxruntime timings (2 intra-op threads) for one 200x120 image:
                                                 vision encoder on its 13 frames, decoder prefill of the 875-token
                                                 prompt (twice) and of 1,024 tokens, 7 decode steps
All three graphs are under 2 GB, so the weights are inline (no external data).

Checks (after the export, unless --no-check): one 200x120 image (fixtures/images/b_grad_200x120.png: 4 x 3 tiles +
the global frame = 13 frames of 512 x 512) through the processor; onnxruntime's image features against
transformers' get_image_features, and the prefill's last logits against transformers' forward on the same
inputs_embeds; then 8 greedy steps with onnxruntime.

Model (HuggingFaceTB/SmolVLM-256M-Instruct config.json, as remembered; the repository is not reachable here):
  text: Llama (SmolLM2-135M shapes) hidden 576, intermediate 1536, 30 layers, 9 heads, 3 KV heads, head_dim 64,
        vocab 49280, max_position_embeddings 8192, rope_theta 100000, rms_norm_eps 1e-5, untied lm_head
        (tie_word_embeddings false: with the untied head the parameter count is 256.5 M, the name's 256M;
        tied would be 228 M).
  vision: SigLIP base/16 at 512: hidden 768, intermediate 3072, 12 layers, 12 heads, image 512, patch 16,
        layer_norm_eps 1e-6 and gelu_pytorch_tanh (Idefics3VisionConfig's defaults; the real config does not set
        them, as far as I know).
  connector: pixel shuffle scale_factor 4 -> 1024 patches / 16 = 64 tokens per frame, Linear(12288, 576, no bias).
  image_token_id 49190.
Processor: the real preprocessor_config (size longest_edge 2048, max_image_size longest_edge 512, resample 1 =
LANCZOS, splitting on, mean / std 0.5, rescale 1/255) and processor_config image_seq_len 64; the real chat template.
Tokenizer: a stand-in (the real one is not available offline). Same construction as the fixture's: SmolLM2's 17
special tokens at 0..16, the 256 byte symbols, BPE merges learned from the fixture's small corpus; then seeded
synthetic merges of lowercase pieces ("Ġth" + "ing" ...) until the base vocabulary has SmolLM2's 49152 entries, so
tokenizer.json has a realistic size (49152 vocab entries, ~48.9k merges). SmolVLM's added tokens at the real ids:
<global-img> 49152, <row_1_col_1> 49153 .. <row_6_col_6> 49188, <fake_token_around_image> 49189, <image> 49190,
<end_of_utterance> 49279. UNSURE: what the real tokenizer holds at 49191..49278 (filled here with
<|reserved_special_token_0|> .. _87, added special tokens), and whether <end_of_utterance> is exactly 49279 (the
real generation_config's eos_token_id, as remembered). config.image_token_id equals the tokenizer's <image> id and
generation_config.eos_token_id its <end_of_utterance> id (asserted), which is what the server relies on.

Weights: seeded (SEED) normal draws, scaled so that the 30-layer model is not degenerate: matrices
N(0, GAIN^2 / fan_in), embeddings N(0, 1), vision position embeddings N(0, 0.5^2), norm weights 1 + N(0, 0.1^2),
biases N(0, 0.02^2). Random weights: for load, memory and speed measurements, not for text.
"""
import gc
import importlib.util
import json
import os
import random
import re
import sys
import time

import numpy as np
import torch
from PIL import Image

import transformers
from transformers import (AutoProcessor, GenerationConfig, Idefics3Config, Idefics3ForConditionalGeneration,
                          Idefics3Processor, Idefics3VisionConfig, LlamaConfig, PreTrainedTokenizerFast)
from transformers.cache_utils import DynamicCache
from transformers.models.idefics3.image_processing_pil_idefics3 import Idefics3ImageProcessorPil

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
FIXTURE_SCRIPT = os.path.join(ROOT, "src/test/resources/fixtures/smolvlm-tiny/scripts/make_smolvlm_tiny.py")
IMAGES = os.path.join(ROOT, "src/test/resources/fixtures/images")

_spec = importlib.util.spec_from_file_location("make_smolvlm_tiny", FIXTURE_SCRIPT)
tiny = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(tiny)  # definitions only (its main() is guarded)

SEED = 1234
GAIN = 2.0
# text (SmolLM2-135M shapes)
LAYERS, HIDDEN, HEADS, KV_HEADS, HEAD_DIM, FFN, VOCAB = 30, 576, 9, 3, 64, 1536, 49280
BASE_VOCAB = 49152  # SmolLM2's vocabulary, before SmolVLM's added tokens
# vision (SigLIP base patch 16 at 512)
V_HIDDEN, V_FFN, V_LAYERS, V_HEADS, V_IMAGE, V_PATCH = 768, 3072, 12, 12, 512, 16
SCALE_FACTOR = 4
IMAGE_SEQ_LEN = (V_IMAGE // V_PATCH) ** 2 // SCALE_FACTOR ** 2  # 64
N_RESERVED = 88  # 49191..49278
SMOLVLM_ADDED = (["<global-img>"] + [f"<row_{i}_col_{j}>" for i in range(1, 7) for j in range(1, 7)]
                 + ["<fake_token_around_image>", "<image>"]
                 + [f"<|reserved_special_token_{k}|>" for k in range(N_RESERVED)] + ["<end_of_utterance>"])
EXPECTED_IDS = {"<|endoftext|>": 0, "<|im_start|>": 1, "<|im_end|>": 2, "<global-img>": 49152,
                "<row_1_col_1>": 49153, "<row_6_col_6>": 49188, "<fake_token_around_image>": 49189,
                "<image>": 49190, "<end_of_utterance>": 49279}


# ------------------------------------------------------------------ tokenizer
def byte_symbols():
    """GPT-2's bytes_to_unicode, in byte order 0..255."""
    printable = set(range(33, 127)) | set(range(161, 173)) | set(range(174, 256))
    out, n = [], 0
    for b in range(256):
        if b in printable:
            out.append(chr(b))
        else:
            out.append(chr(256 + n)); n += 1
    return out


def synthetic_merges(vocab, merges, target, seed):
    """Seeded merges of lowercase pieces (left: optional Ġ + letters, right: letters) until len(vocab) == target.
    Every merge joins two tokens already in the vocabulary into a new one, so the BPE stays well-formed."""
    rng = random.Random(seed)
    left = [t for t in vocab if re.fullmatch("\u0120?[a-z]+", t)]
    right = [t for t in vocab if re.fullmatch("[a-z]+", t)]
    while len(vocab) < target:
        a, b = rng.choice(left), rng.choice(right)
        t = a + b
        if t in vocab or len(t) > 12:
            continue
        merges.append((a, b))
        vocab[t] = len(vocab)
        left.append(t)
        if not t.startswith("\u0120"):
            right.append(t)


def build_tokenizer():
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, processors
    pre = pre_tokenizers.Sequence([pre_tokenizers.Digits(individual_digits=True),
                                   pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)])
    merges = tiny.learn_merges(pre, tiny.CORPUS, tiny.N_MERGES)
    vocab = {}
    for t in tiny.SMOLLM2_SPECIALS + byte_symbols() + [a + b for a, b in merges]:
        if t not in vocab:
            vocab[t] = len(vocab)
    synthetic_merges(vocab, merges, BASE_VOCAB, SEED)
    assert len(vocab) == BASE_VOCAB
    tk = Tokenizer(models.BPE(vocab=vocab, merges=merges, unk_token=None, fuse_unk=False, byte_fallback=False))
    tk.pre_tokenizer = pre
    tk.decoder = decoders.ByteLevel()
    tk.post_processor = processors.ByteLevel(trim_offsets=False)
    tk.add_special_tokens([AddedToken(t, special=True, normalized=False)
                           for t in tiny.SMOLLM2_SPECIALS + SMOLVLM_ADDED])
    tok = PreTrainedTokenizerFast(tokenizer_object=tk, bos_token="<|im_start|>", eos_token="<end_of_utterance>",
                                  pad_token="<|im_end|>", unk_token="<|endoftext|>", model_max_length=8192)
    assert len(tok) == VOCAB, len(tok)
    for t, i in EXPECTED_IDS.items():
        assert tok.convert_tokens_to_ids(t) == i, (t, tok.convert_tokens_to_ids(t), i)
    return tok, len(merges)


# ------------------------------------------------------------------ model
def init_weights(model):
    gen = torch.Generator().manual_seed(SEED)
    with torch.no_grad():
        for name, p in model.named_parameters():
            fan_in = p[0].numel() if p.dim() > 1 else p.numel()
            r = torch.randn(p.shape, generator=gen)
            if "norm" in name and name.endswith("weight"):
                p.copy_(1.0 + 0.1 * r)
            elif name.endswith("bias"):
                p.copy_(0.02 * r)
            elif "embed_tokens" in name:
                p.copy_(r)
            elif "position_embedding" in name:
                p.copy_(0.5 * r)
            else:
                p.copy_(r * (GAIN / fan_in ** 0.5))


def build_model(tok):
    ids = tok.convert_tokens_to_ids
    text = LlamaConfig(vocab_size=VOCAB, hidden_size=HIDDEN, num_hidden_layers=LAYERS, num_attention_heads=HEADS,
                       num_key_value_heads=KV_HEADS, head_dim=HEAD_DIM, intermediate_size=FFN, rms_norm_eps=1e-5,
                       rope_parameters={"rope_type": "default", "rope_theta": 100000.0},
                       max_position_embeddings=8192, tie_word_embeddings=False, bos_token_id=ids("<|im_start|>"),
                       eos_token_id=ids("<|im_end|>"), pad_token_id=ids("<|im_end|>"))
    vision = Idefics3VisionConfig(hidden_size=V_HIDDEN, intermediate_size=V_FFN, num_hidden_layers=V_LAYERS,
                                  num_attention_heads=V_HEADS, image_size=V_IMAGE, patch_size=V_PATCH)
    cfg = Idefics3Config(text_config=text.to_dict(), vision_config=vision.to_dict(), scale_factor=SCALE_FACTOR,
                         image_token_id=ids("<image>"), tie_word_embeddings=False, pad_token_id=ids("<|im_end|>"))
    cfg._attn_implementation = "eager"
    torch.manual_seed(SEED)
    model = Idefics3ForConditionalGeneration(cfg)
    init_weights(model)
    model.eval()
    model.generation_config = GenerationConfig(bos_token_id=ids("<|im_start|>"), eos_token_id=ids("<end_of_utterance>"),
                                               pad_token_id=ids("<|im_end|>"))
    return model


class Decoder(torch.nn.Module):
    """The fixture's decoder wrapper with this model's layer count."""

    def __init__(self, model, layers):
        super().__init__()
        self.m, self.layers = model, layers

    def forward(self, inputs_embeds, attention_mask, position_ids, *past):
        cache = DynamicCache()
        for i in range(self.layers):
            cache.update(past[2 * i], past[2 * i + 1], i)
        out = self.m(inputs_embeds=inputs_embeds, attention_mask=attention_mask, position_ids=position_ids,
                     past_key_values=cache, use_cache=True)
        flat = []
        for layer in out.past_key_values.layers:
            flat += [layer.keys, layer.values]
        return (out.logits, *flat)


def export_all(model, pv, pm, onnxdir):
    """As the fixture's export_all; the vision graph is traced on 2 frames (dynamic in num_images) to keep it quick."""
    from transformers.models.idefics3 import modeling_idefics3 as mi
    os.makedirs(onnxdir, exist_ok=True)
    pv, pm = pv[:, :2], pm[:, :2]
    with torch.no_grad():
        ref = model.model.get_image_features(pv, pixel_attention_mask=pm, return_dict=True).pooler_output
        orig = mi.Idefics3VisionEmbeddings.forward
        mi.Idefics3VisionEmbeddings.forward = tiny._vision_embeddings_forward
        try:
            got = tiny.Vision(model)(pv, pm)
            assert torch.equal(ref, got), float((ref - got).abs().max())
            torch.onnx.export(tiny.Vision(model), (pv, pm), os.path.join(onnxdir, "vision_encoder.onnx"),
                              input_names=["pixel_values", "pixel_attention_mask"], output_names=["image_features"],
                              dynamic_axes={"pixel_values": {0: "batch_size", 1: "num_images"},
                                            "pixel_attention_mask": {0: "batch_size", 1: "num_images"},
                                            "image_features": {0: "num_real_images"}},
                              opset_version=17, dynamo=False)
        finally:
            mi.Idefics3VisionEmbeddings.forward = orig
        torch.onnx.export(tiny.Embed(model), (torch.tensor([[5, 6, 7]]),), os.path.join(onnxdir, "embed_tokens.onnx"),
                          input_names=["input_ids"], output_names=["inputs_embeds"],
                          dynamic_axes={"input_ids": {0: "batch_size", 1: "sequence_length"},
                                        "inputs_embeds": {0: "batch_size", 1: "sequence_length"}},
                          opset_version=17, dynamo=False)
        names_in = ["inputs_embeds", "attention_mask", "position_ids"]
        names_out = ["logits"]
        axes = {"inputs_embeds": {0: "batch_size", 1: "sequence_length"},
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
                past.append(torch.randn(1, KV_HEADS, 3, HEAD_DIM))
        args = (torch.randn(1, 6, HIDDEN), torch.ones(1, 9, dtype=torch.int64), torch.arange(3, 9)[None], *past)
        torch.onnx.export(Decoder(model, LAYERS), args, os.path.join(onnxdir, "decoder_model_merged.onnx"),
                          input_names=names_in, output_names=names_out, dynamic_axes=axes, opset_version=17,
                          dynamo=False, do_constant_folding=True)


# ------------------------------------------------------------------ checks and timings
def check(model, proc, out, report):
    import onnxruntime as ort
    onnxdir = os.path.join(out, "onnx")
    tok = proc.tokenizer
    image_token_id = model.config.image_token_id
    so = ort.SessionOptions()
    so.intra_op_num_threads = 2
    so.inter_op_num_threads = 1
    t = time.perf_counter()
    vis, emb, dec = [ort.InferenceSession(os.path.join(onnxdir, f), so, providers=["CPUExecutionProvider"])
                     for f in ("vision_encoder.onnx", "embed_tokens.onnx", "decoder_model_merged.onnx")]
    report["ort_session_load_s"] = round(time.perf_counter() - t, 2)

    im = Image.open(os.path.join(IMAGES, "b_grad_200x120.png"))
    im.load()
    messages = [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "What is in this image?"}]}]
    prompt = proc.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    inputs = proc(text=[prompt], images=[[im]], return_tensors="pt")
    ids = inputs["input_ids"][0].tolist()
    pv = inputs["pixel_values"].numpy().astype(np.float32)
    pm = inputs["pixel_attention_mask"].numpy().astype(bool)
    report["image"] = {"file": "b_grad_200x120.png", "pixel_values_shape": list(pv.shape),
                       "prompt_tokens": len(ids), "image_tokens": ids.count(image_token_id)}
    assert pv.shape == (1, 13, 3, V_IMAGE, V_IMAGE), pv.shape
    assert ids.count(image_token_id) == 13 * IMAGE_SEQ_LEN

    t = time.perf_counter()  # one run: it is about a minute on 2 cores (a second run measured the same or slower)
    feats = vis.run(None, {"pixel_values": pv, "pixel_attention_mask": pm})[0]
    report["ort_vision_13_frames_s"] = round(time.perf_counter() - t, 2)
    assert feats.shape == (13, IMAGE_SEQ_LEN, HIDDEN), feats.shape
    with torch.no_grad():
        t = time.perf_counter()
        tf = model.model.get_image_features(inputs["pixel_values"], pixel_attention_mask=inputs["pixel_attention_mask"],
                                            return_dict=True).pooler_output.numpy()
        report["torch_vision_13_frames_s"] = round(time.perf_counter() - t, 2)
    report["image_features_std"] = float(feats.std())
    report["onnx_vs_torch_image_features_maxdiff"] = float(np.abs(tf - feats).max())
    assert np.allclose(tf, feats, rtol=1e-3, atol=1e-3 * float(np.abs(tf).max())), report[
        "onnx_vs_torch_image_features_maxdiff"]

    e = emb.run(None, {"input_ids": np.array([ids], np.int64)})[0]
    pos = np.where(np.array(ids) == image_token_id)[0]
    e[0, pos] = feats.reshape(-1, HIDDEN)
    n = len(ids)
    empty = {f"past_key_values.{i}.{kv}": np.zeros((1, KV_HEADS, 0, HEAD_DIM), np.float32)
             for i in range(LAYERS) for kv in ("key", "value")}
    pre_times = []
    for _ in range(2):
        t = time.perf_counter()
        res = dec.run(None, {"inputs_embeds": e, "attention_mask": np.ones((1, n), np.int64),
                             "position_ids": np.arange(n, dtype=np.int64)[None], **empty})
        pre_times.append(round(time.perf_counter() - t, 2))
    report["ort_decoder_prefill_s"] = pre_times
    # the same prefill at 1,024 tokens (the prompt's rows and then its first rows again), for a round figure
    e2 = np.concatenate([e, e[:, :1024 - n]], axis=1)
    t = time.perf_counter()
    dec.run(None, {"inputs_embeds": e2, "attention_mask": np.ones((1, 1024), np.int64),
                   "position_ids": np.arange(1024, dtype=np.int64)[None], **empty})
    report["ort_decoder_prefill_1024_tokens_s"] = round(time.perf_counter() - t, 2)
    with torch.no_grad():
        t = time.perf_counter()
        ref = model(inputs_embeds=torch.from_numpy(e), attention_mask=torch.ones(1, n, dtype=torch.long),
                    use_cache=False).logits[0, -1].numpy()
        report["torch_decoder_prefill_s"] = round(time.perf_counter() - t, 2)
    last = res[0][0, -1]
    report["onnx_vs_torch_prefill_last_logits_maxdiff"] = float(np.abs(ref - last).max())
    report["prefill_last_logits_std"] = float(last.std())
    assert int(ref.argmax()) == int(last.argmax())

    # 8 greedy steps with onnxruntime: the text is noise, but it should not be one token repeated
    past = {k: res[1 + j] for j, k in enumerate(empty)}
    gen, step_times, total = [int(last.argmax())], [], n
    for _ in range(7):
        t = time.perf_counter()
        cur = emb.run(None, {"input_ids": np.array([[gen[-1]]], np.int64)})[0]
        r = dec.run(None, {"inputs_embeds": cur, "attention_mask": np.ones((1, total + 1), np.int64),
                           "position_ids": np.array([[total]], np.int64), **past})
        step_times.append(round(time.perf_counter() - t, 3))
        past = {k: r[1 + j] for j, k in enumerate(empty)}
        gen.append(int(r[0][0, -1].argmax()))
        total += 1
    report["ort_greedy_ids"] = gen
    report["ort_greedy_text"] = tok.decode(gen)
    report["ort_decode_step_s"] = step_times


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    out = os.path.abspath(args[0] if args else os.path.join(ROOT, "target/bench-models/smolvlm-256m-random"))
    os.makedirs(out, exist_ok=True)
    for f in ("config.json", "generation_config.json", "preprocessor_config.json", "processor_config.json",
              "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "chat_template.jinja",
              "chat_template.json", "export_report.json"):
        if os.path.exists(os.path.join(out, f)):
            os.remove(os.path.join(out, f))
    onnxdir = os.path.join(out, "onnx")
    for f in ("vision_encoder.onnx", "embed_tokens.onnx", "decoder_model_merged.onnx"):
        if os.path.exists(os.path.join(onnxdir, f)):
            os.remove(os.path.join(onnxdir, f))
    torch.manual_seed(SEED)
    t0 = time.perf_counter()
    report = {"made_by": "bench/vision/make_smolvlm_256m.py",
              "versions": {"transformers": transformers.__version__, "torch": torch.__version__,
                           "onnxruntime": __import__("onnxruntime").__version__, "pillow": Image.__version__}}

    tok, n_merges = build_tokenizer()
    ip = Idefics3ImageProcessorPil(do_convert_rgb=True, do_image_splitting=True, do_normalize=True, do_pad=True,
                                   do_rescale=True, do_resize=True, image_mean=[0.5, 0.5, 0.5],
                                   image_std=[0.5, 0.5, 0.5], max_image_size={"longest_edge": V_IMAGE}, resample=1,
                                   rescale_factor=1 / 255, size={"longest_edge": 2048})
    proc = Idefics3Processor(image_processor=ip, tokenizer=tok, image_seq_len=IMAGE_SEQ_LEN,
                             chat_template=tiny.CHAT_TEMPLATE)
    proc.save_pretrained(out)
    ip.save_pretrained(out)  # the flat preprocessor_config.json that Hub repositories carry
    model = build_model(proc.tokenizer)
    model.config.save_pretrained(out)
    model.generation_config.save_pretrained(out)

    proc = AutoProcessor.from_pretrained(out)  # everything below uses the processor as loaded back
    assert type(proc.image_processor).__name__ == "Idefics3ImageProcessorPil"
    assert proc.chat_template == tiny.CHAT_TEMPLATE and proc.image_seq_len == IMAGE_SEQ_LEN
    ids = proc.tokenizer.convert_tokens_to_ids
    assert model.config.image_token_id == ids("<image>") == 49190
    assert model.generation_config.eos_token_id == ids("<end_of_utterance>")
    for s in ["What is in this image?", "Hello, world!", "\n\n", "2024", "h\u00e9llo \u2603"]:
        assert proc.tokenizer.decode(proc.tokenizer(s, add_special_tokens=False)["input_ids"]) == s
    params = {"total": sum(p.numel() for p in model.parameters()),
              "vision_model": sum(p.numel() for p in model.model.vision_model.parameters()),
              "connector": sum(p.numel() for p in model.model.connector.parameters()),
              "text_model": sum(p.numel() for p in model.model.text_model.parameters()),
              "lm_head": sum(p.numel() for p in model.lm_head.parameters())}
    report["parameters"] = params
    report["tokenizer"] = {"size": len(proc.tokenizer), "merges": n_merges,
                           "special_ids": {t: ids(t) for t in EXPECTED_IDS}}
    print("parameters", params, "tokenizer", report["tokenizer"], flush=True)

    ex = proc(text=[proc.apply_chat_template([{"role": "user", "content": [{"type": "image"}]}],
                                             add_generation_prompt=True, tokenize=False)],
              images=[[Image.open(os.path.join(IMAGES, "b_grad_200x120.png"))]], return_tensors="pt")
    t = time.perf_counter()
    export_all(model, ex["pixel_values"], ex["pixel_attention_mask"].to(torch.bool), onnxdir)
    report["export_s"] = round(time.perf_counter() - t, 1)
    report["files_bytes"] = {f: os.path.getsize(os.path.join(onnxdir, f)) for f in sorted(os.listdir(onnxdir))}
    report["files_bytes"]["tokenizer.json"] = os.path.getsize(os.path.join(out, "tokenizer.json"))
    report["graphs"] = {f: tiny.signature(os.path.join(onnxdir, f)) for f in sorted(os.listdir(onnxdir))
                        if f.endswith(".onnx")}
    for g in report["graphs"].values():  # the op lists only; the 60 KV inputs and outputs are in the files
        g["inputs"], g["outputs"] = len(g["inputs"]), len(g["outputs"])
    gc.collect()
    print("exported in", report["export_s"], "s:", report["files_bytes"], flush=True)

    if "--no-check" not in sys.argv:
        check(model, proc, out, report)
    report["total_s"] = round(time.perf_counter() - t0, 1)
    with open(os.path.join(out, "export_report.json"), "w") as f:
        json.dump(report, f, indent=1, ensure_ascii=False)
        f.write("\n")
    print(json.dumps({k: v for k, v in report.items() if k != "graphs"}, indent=1, ensure_ascii=False))


if __name__ == "__main__":
    main()
