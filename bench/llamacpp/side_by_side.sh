#!/usr/bin/env bash
# ortserve's engine and llama.cpp on the same weights, interleaved in one run.
#
#   [MODEL=bench|wide] [ATTENTION=explicit|gqa] [ROUNDS=3] [SPIN=0] bench/llamacpp/side_by_side.sh LLAMA_CPP_BIN_DIR [PYTHON]
#
# LLAMA_CPP_BIN_DIR: a llama.cpp build's bin/ with llama-bench, llama-batched-bench and
# llama-quantize, e.g. from a llama.cpp checkout:
#   cmake -B build -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=ON -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF
#   cmake --build build -j --target llama-bench llama-batched-bench llama-quantize
# PYTHON: an interpreter with numpy, onnx and gguf (pip), default python3.
#
# 1. The generated bench and 128k-vocabulary models (ModelGenerator, the benchmarks' seed) in
#    target/bench-models, written as GGUF F32 by onnx_to_gguf.py (same weights; q/k permuted to
#    llama.cpp's rotary layout), the bench one quantized to Q8_0 and Q4_0 by llama-quantize
#    (llama.cpp's defaults: its Q4_0 file keeps the output matrix at Q6_K).
# 2. LlamaCppSideBySideBenchmark: for fp32 / int8 / int4 against F32 / Q8_0 / Q4_0, ortserve's engine
#    (default rewrites) and llama.cpp alternately, decode at 1 and 16 streams, then 50- and
#    3,500-token prompts on the 128k-vocabulary model; medians of -Dbench.rounds (default 3).
# ATTENTION=gqa: ortserve serves the generator's GroupQueryAttention variant of the model (same weights).
# SPIN=0,200: ortserve once not spinning and once with intra-op threads spinning up to 200 us (ORTSERVE_INTRA_OP_SPIN_MICROS; -1 = onnxruntime's own loop).
# Report: target/llamacpp-side-by-side-MODEL-ATTENTION.md.
set -euo pipefail
BIN=$(cd "$1" && pwd)
PY=${2:-python3}
cd "$(dirname "$0")/../.."
OUT=target/llamacpp
mkdir -p "$OUT" target/bench-models

./mvnw -q -B compile dependency:build-classpath -Dmdep.outputFile=target/classpath.txt -Dmdep.includeScope=runtime
MODEL=${MODEL:-bench}   # or wide: hidden 2048, the matrix shapes of a 1B-class model
for size in "$MODEL" vocab128k; do
  dir=target/bench-models/$size-20261122   # ModelGenerator.DEFAULT_SEED, as the benchmarks' ensure() names it
  [ -f "$dir/model.onnx" ] || java -cp "target/classes:$(cat target/classpath.txt)" dev.ortserve.modelgen.ModelGenerator "$size" "$dir"
  [ -f "$OUT/$size-f32.gguf" ] || "$PY" bench/llamacpp/onnx_to_gguf.py "$dir" "$OUT/$size-f32.gguf"
done
for q in Q8_0 Q4_0; do
  [ -f "$OUT/$MODEL-$q.gguf" ] || "$BIN/llama-quantize" "$OUT/$MODEL-f32.gguf" "$OUT/$MODEL-$q.gguf" "$q" > "$OUT/quantize-$MODEL-$q.log" 2>&1
done

./mvnw -q -B -Pbench test -Dtest=LlamaCppSideBySideBenchmark -Dbench.llamacpp.bin="$BIN" -Dbench.llamacpp.gguf="$OUT" \
  -Dbench.server-threads="$(nproc)" "-Dbench.rounds=${ROUNDS:-3}" "-Dbench.spin=${SPIN:-0}" -Dbench.model="$MODEL" -Dbench.attention="${ATTENTION:-explicit}"
cp target/llamacpp-side-by-side.md "target/llamacpp-side-by-side-$MODEL-${ATTENTION:-explicit}.md"
cat "target/llamacpp-side-by-side-$MODEL-${ATTENTION:-explicit}.md"
