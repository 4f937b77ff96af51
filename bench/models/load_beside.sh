#!/bin/bash
# Several models in one server: the time to load a model cold (its rewrite cache empty) and warm (cached, the
# page cache holding its files) beside a model that is serving, and that model's decode rate while the other
# loads. The packaged jar serves a models file: `bench` (generated, pinned) decodes one stream in a loop
# (greedy, 64 tokens per request) while POST /models/load loads `big` (SIZE, default qwen3-0.6b: Qwen3-0.6B's
# shape, random weights, at PRECISION, default model = fp32) next to it; then /models/unload and load again.
#
#   [SIZE=qwen3-0.6b] [PRECISION=model|int8|int4] bench/models/load_beside.sh
#
# Needs the packaged jar (./mvnw -DskipTests package) and target/cp.args (see docs/benchmarks.md, "Start
# time and memory at real size"). Report: target/load-beside.md; server log: target/load-beside-server.log.
set -euo pipefail
cd "$(dirname "$0")/../.."
SIZE=${SIZE:-qwen3-0.6b}
PRECISION=${PRECISION:-model}
PORT=${PORT:-18089}
BIG=target/bench-models/$SIZE-gqa-20261122
CACHE=target/load-beside-cache
[ -f "$BIG/model.onnx" ] || java -Xmx8g @target/cp.args dev.ortserve.modelgen.ModelGenerator "$SIZE" "$BIG" --gqa
rm -rf "$CACHE"; mkdir -p "$CACHE"
cat > target/load-beside-models.yaml <<YAML
models:
  - id: bench
    path: generated:bench
    pinned: true
  - id: big
    path: $PWD/$BIG
    weight_precision: $PRECISION
    keep_alive: -1
YAML
ORTSERVE_MODELS_FILE=target/load-beside-models.yaml ORTSERVE_ADMIN_KEY=bench ORTSERVE_MODEL_CACHE_DIR=$PWD/$CACHE \
  QUARKUS_HTTP_PORT=$PORT java -Xmx2g -XX:MaxDirectMemorySize=8g -jar target/quarkus-app/quarkus-run.jar > target/load-beside-server.log 2>&1 &
SERVER=$!
trap 'kill $SERVER 2>/dev/null || true' EXIT
for i in $(seq 1 300); do curl -sf "localhost:$PORT/q/health/ready" > /dev/null && break; sleep 1; done
URL="localhost:$PORT"
now() { date +%s.%N; }
# one greedy request of 64 tokens to the bench model; prints "end_time tokens"
one() {
  curl -sf "$URL/v1/completions" -H 'content-type: application/json' \
    -d '{"model":"bench","prompt":"Once upon a time","max_tokens":64,"temperature":0,"ignore_eos":true}' > /dev/null
  echo "$(now) 64"
}
# decode rate of bench over DURATION seconds of back-to-back requests (tok/s, whole requests)
rate_for() {
  local until=$(echo "$(now) + $1" | bc) start=$(now) tokens=0 end
  while (( $(echo "$(now) < $until" | bc) )); do read -r end n < <(one); tokens=$((tokens + n)); done
  echo "scale=1; $tokens / ($end - $start)" | bc
}
# loads (or unloads) big while bench decodes in a loop; prints "seconds tok/s"
during() {
  local op=$1 flag=target/load-beside.running
  touch "$flag"
  ( local start=$(now) tokens=0 end=$(now)
    while [ -f "$flag" ]; do read -r end n < <(one); tokens=$((tokens + n)); done
    echo "scale=1; $tokens / ($end - $start)" | bc > target/load-beside.rate ) &
  local loop=$!
  sleep 2
  local t0=$(now)
  curl -sf "$URL/models/$op" -H 'authorization: Bearer bench' -H 'content-type: application/json' -d '{"model":"big"}' > /dev/null
  local t1=$(now)
  rm -f "$flag"; wait $loop
  echo "$(echo "scale=1; ($t1 - $t0) / 1" | bc) $(cat target/load-beside.rate)"
}
rate_for 3 > /dev/null   # warm up
alone=$(rate_for 20)
read -r cold cold_rate < <(during load)
read -r _ _ < <(during unload)
read -r warm warm_rate < <(during load)
big_rss=$(grep VmRSS /proc/$SERVER/status | awk '{print $2}')
{
  echo "$SIZE at $PRECISION loaded beside the bench model serving one stream; $(nproc) processors; $(date -u +%F)"
  echo
  echo "| | load time (s) | bench decode tok/s during it (alone: $alone) |"
  echo "|---|---|---|"
  echo "| cold (rewrite cache empty) | $cold | $cold_rate |"
  echo "| warm (rewrite cached, files in page cache) | $warm | $warm_rate |"
  echo
  echo "RSS with both loaded: $((big_rss / 1024)) MiB"
  grep -E "Serving model 'big'|Memory budget of" target/load-beside-server.log | sed 's/^/    /'
} > target/load-beside.md
cat target/load-beside.md
