#!/usr/bin/env bash
# Memory under load (issue 32), one run, one table: MemoryUnderLoadBench (the engine, KV in place, prefix cache on,
# 1 GiB of KV) on the generator's Qwen3-0.6B GroupQueryAttention shape (random weights), N concurrent prompts of 1,600
# random tokens each decoding 32, one JVM per row; every row started as the images start the server
# (MALLOC_MMAP_THRESHOLD_=65536, docs/deployment.md).
#
#   bench/memory/under_load.sh [MODEL_DIR=/tmp/bench/qwen3-gqa] > target/memory-under-load.tsv
#
# Columns: precision kv_dtype jvm streams prompt ready_rss_mb peak_rss_mb peak_heap_mb peak_direct_mb failed seconds
# kv_budget_mb ttft_mean_s ttft_max_s decode_tok_s_per_stream
set -euo pipefail
cd "$(dirname "$0")/../.."
DIR=${1:-/tmp/bench/qwen3-gqa}
[ -f target/cp.args ] || { ./mvnw -q -B test-compile dependency:build-classpath -Dmdep.outputFile=target/cp.txt
  echo "-cp target/classes:target/test-classes:$(cat target/cp.txt)" > target/cp.args; }
[ -f "$DIR/model.onnx" ] || java -Xmx8g @target/cp.args dev.ortserve.modelgen.ModelGenerator qwen3-0.6b "$DIR" --gqa >&2
row() { # precision kv_dtype jvm streams
  local jvm=$3; [ "$jvm" = default ] && jvm=
  echo -n "$1 $2 ${3// /_} "
  MALLOC_MMAP_THRESHOLD_=65536 java $jvm @target/cp.args dev.ortserve.bench.MemoryUnderLoadBench "$DIR" "$1" 1073741824 "$4" 1600 32 "$2" 2>&1 \
    | grep '^MEMBENCH' | cut -d' ' -f2-
}
for s in 1 4 16; do row model model default $s; done
row model model -Xmx1g 16
for s in 4 16; do row model auto default $s; done
for s in 1 4 16; do row int4 model default $s; done
