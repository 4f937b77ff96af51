#!/bin/bash
# Two real-size models under a memory limit that holds one: the second's first request unloads the first (least
# recently used) and loads the second; the resident set is sampled every 50 ms throughout. A first start without a
# limit measures one model loaded (its RSS and its logged memory split); the limit is that plus half a model's
# weights, as SeveralModelsMemoryIT does at 862 MiB.
#
#   [SIZE=qwen3-0.6b] [PRECISION=model|int8|int4] bench/models/swap_under_limit.sh
#
# Needs the packaged jar and target/cp.args (docs/benchmarks.md). Report: target/swap-under-limit.md.
set -euo pipefail
cd "$(dirname "$0")/../.."
SIZE=${SIZE:-qwen3-0.6b}
PRECISION=${PRECISION:-model}
PORT=${PORT:-18090}
ONE=target/bench-models/$SIZE-gqa-20261122
TWO=target/bench-models/$SIZE-gqa-seed2
[ -f "$ONE/model.onnx" ] || java -Xmx8g @target/cp.args dev.ortserve.modelgen.ModelGenerator "$SIZE" "$ONE" --gqa
[ -f "$TWO/model.onnx" ] || java -Xmx8g @target/cp.args dev.ortserve.modelgen.ModelGenerator "$SIZE" "$TWO" 2 --gqa
CACHE=$PWD/target/swap-cache
mkdir -p "$CACHE"
cat > target/swap-models.yaml <<YAML
models:
  - {id: small, path: generated:bench, pinned: true}
  - {id: one, path: $PWD/$ONE, weight_precision: $PRECISION, kv_cache_bytes: 512M}
  - {id: two, path: $PWD/$TWO, weight_precision: $PRECISION, kv_cache_bytes: 512M}
YAML
URL="localhost:$PORT"
start() {  # $1: log name, $2: ORTSERVE_MEMORY_LIMIT or empty
  env ORTSERVE_MODELS_FILE=target/swap-models.yaml ORTSERVE_MODEL_CACHE_DIR=$CACHE ORTSERVE_MODEL_LOAD_WAIT=10m ${2:+ORTSERVE_MEMORY_LIMIT=$2} \
    QUARKUS_HTTP_PORT=$PORT java -Xmx2g -XX:MaxDirectMemorySize=8g -jar target/quarkus-app/quarkus-run.jar > "target/$1.log" 2>&1 &
  SERVER=$!
  for i in $(seq 1 300); do curl -sf "$URL/q/health/ready" > /dev/null && return; sleep 1; done
  echo "no start: target/$1.log" >&2; exit 1
}
ask() {  # one short completion on model $1; prints seconds
  local t0=$(date +%s.%N)
  curl -sf -m 900 "$URL/v1/completions" -H 'content-type: application/json' -d "{\"model\":\"$1\",\"prompt\":\"Hi\",\"max_tokens\":4}" > /dev/null
  echo "scale=1; ($(date +%s.%N) - $t0) / 1" | bc
}
rss() { awk '/VmRSS/ {print $2 * 1024}' /proc/$SERVER/status; }
mib() { echo $(( $1 >> 20 )); }
# 1: measure one loaded (also fills the rewrite cache: the timed loads below are warm)
start swap-probe ""
ask one > /dev/null
sleep 1; RSS_ONE=$(rss)
LINE=$(grep "Memory budget of 'one'" target/swap-probe.log | tail -1)
ask two > /dev/null   # its rewrite cached too: the loads timed below are warm
kill $SERVER; wait $SERVER 2>/dev/null || true
num() { echo "$LINE" | grep -oP "(?<=$1 )[0-9]+(?= MiB)" | head -1; }
HEAP=$(num "heap growth"); WORK=$(num "onnxruntime working"); OVER=$(num "overhead"); OTHERS=$(num "other models' KV and working"); KV=$(num "\\+ KV")
WEIGHTS=$(( $(stat -c %s "$ONE/model.onnx") + $(stat -c %s "$ONE/model.onnx_data" 2>/dev/null || echo 0) ))
LIMIT=$(( RSS_ONE + ((HEAP + WORK + OVER + OTHERS + KV) << 20) + WEIGHTS / 2 ))
# 2: under the limit
start swap-limit "$LIMIT"
PEAK=0
( while kill -0 $SERVER 2>/dev/null; do awk '/VmRSS/ {print $2 * 1024}' /proc/$SERVER/status; sleep 0.05; done ) > target/swap-rss.txt &
SAMPLER=$!
T_ONE=$(ask one); T_SMALL=$(ask small); T_TWO=$(ask two); T_ONE_AGAIN=$(ask one)
kill $SERVER; wait $SERVER 2>/dev/null || true; wait $SAMPLER 2>/dev/null || true
PEAK=$(sort -n target/swap-rss.txt | tail -1)
{
  echo "$SIZE at $PRECISION, two models under ORTSERVE_MEMORY_LIMIT=$(mib $LIMIT) MiB (one model and half another's weights); $(nproc) processors; $(date -u +%F)"
  echo
  echo "| request | seconds |"
  echo "|---|---|"
  echo "| one (loads, warm rewrite cache) | $T_ONE |"
  echo "| small (pinned, serving) | $T_SMALL |"
  echo "| two (unloads one, loads two) | $T_TWO |"
  echo "| one again (unloads two, loads one) | $T_ONE_AGAIN |"
  echo
  echo "peak RSS $(mib $PEAK) MiB of the $(mib $LIMIT) MiB limit; weights $(mib $WEIGHTS) MiB per model"
  grep -E "Unloading model" target/swap-limit.log | sed 's/^/    /'
} > target/swap-under-limit.md
cat target/swap-under-limit.md
