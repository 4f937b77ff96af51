"""How far int8 / int4 weights move the logits of the model export_qwen3_transformers.py builds, in transformers itself:
symmetric blocks of 32 along K as ortserve's BlockQuantizedWeights (weights only, the embedding left fp32, the head
quantized). Run as the export script is (same venv and tokenizer, under flock /tmp/bigmem.lock; about 1 minute).
"""
import os
import sys

import torch

sys.argv = ["x", "/tmp/npm/qwen3/package/models", "/tmp/unused"]  # the export script's arguments (only its build() is used)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import export_qwen3_transformers as ex  # noqa: E402
model = ex.build()
model.lm_head.weight = torch.nn.Parameter(model.model.embed_tokens.weight.detach().clone())  # untie: the head quantized, the embedding not
ids = torch.tensor([[785, 6722, 315, 9625, 374, 264, 3460, 3283, 448, 1657, 1251, 13]])
with torch.no_grad():
    ref = model(ids).logits[0, -1].clone()
    orig = {n: p.detach().clone() for n, p in model.named_parameters() if p.dim() == 2 and "embed" not in n}
    for bits in (8, 4):
        for n, p in model.named_parameters():
            if n not in orig: continue
            w = orig[n]  # [out, in]: blocks along in
            o, k = w.shape
            b = w.reshape(o, k // 32, 32)
            m = b.gather(2, b.abs().argmax(2, keepdim=True))
            scale = m / -(2 ** (bits - 1))
            scale[scale == 0] = 1
            q = torch.clamp(torch.round(b / scale), -(2 ** (bits - 1)), 2 ** (bits - 1) - 1)
            p.copy_((q * scale).reshape(o, k))
        out = model(ids).logits[0, -1]
        print(f"int{bits} weights only: logit cosine {torch.nn.functional.cosine_similarity(ref, out, dim=0).item():.4f}, same argmax {bool(ref.argmax() == out.argmax())}", flush=True)
