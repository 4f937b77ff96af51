#!/usr/bin/env bash
# llama.cpp's server on the same weights and request as SpeculativeDecodingBench's one-stream table: plain decode,
# its n-gram drafting (--spec-type ngram-simple, ngram-map-k, ngram-cache) and a draft model (-md, the Q4_0 GGUF of
# the same weights drafting for the F32 one), greedy, EOS ignored, the request's token ids as the prompt.
#
#   bench/llamacpp/speculative.sh LLAMA_CPP_BIN_DIR F32_GGUF Q4_0_GGUF [REQUEST_JSON]
#
# REQUEST_JSON: what SpeculativeDecodingBench wrote (target/speculative-request.json: "prompt" token ids, "output"
# ortserve's greedy ids). Run the bench first, on the same model (-Dbench.size=qwen3-0.6b; the GGUF files by
# bench/llamacpp/onnx_to_gguf.py and llama-quantize, as real_size.sh makes them). Threads: THREADS (default nproc),
# rounds: ROUNDS (default 2, the best kept). Prints one table row per configuration: decode tok/s (llama.cpp's own
# timings.predicted_per_second), drafted and accepted tokens where the server reports them.
set -euo pipefail
BIN=$(cd "$1" && pwd)
F32=$2 Q4=$3 REQ=${4:-target/speculative-request.json}
T=${THREADS:-$(nproc)} ROUNDS=${ROUNDS:-2}
OUT=target/llamacpp/spec
mkdir -p "$OUT"
n=$(python3 -c "import json,sys; print(len(json.load(open(sys.argv[1]))['output']))" "$REQ")
body=$(python3 -c "import json,sys; r=json.load(open(sys.argv[1])); print(json.dumps({'prompt': r['prompt'], 'n_predict': len(r['output']), 'temperature': 0, 'ignore_eos': True, 'cache_prompt': False, 'return_tokens': True}))" "$REQ")

run() { # name, server args...
  local name=$1; shift
  local port=$((18000 + RANDOM % 1000))
  "$BIN/llama-server" -m "$F32" -t "$T" -c 4096 -np 1 --host 127.0.0.1 --port "$port" "$@" > "$OUT/server-$name.log" 2>&1 &
  local pid=$!
  until curl -sf "http://127.0.0.1:$port/health" > /dev/null; do
    kill -0 "$pid" 2> /dev/null || { echo "llama-server failed, see $OUT/server-$name.log" >&2; return 1; }
    sleep 0.2
  done
  local best=0 line=""
  for _ in $(seq "$ROUNDS"); do
    curl -s "http://127.0.0.1:$port/completion" -H 'Content-Type: application/json' -d "$body" > "$OUT/response-$name.json"
    line=$(python3 - "$OUT/response-$name.json" "$REQ" <<'PY'
import json, sys
r = json.load(open(sys.argv[1])); req = json.load(open(sys.argv[2]))
t = r.get("timings", {})
ids = r.get("tokens") or []
same = sum(1 for a, b in zip(ids, req["output"]) if a == b) if ids else -1
print(f'{t.get("predicted_per_second", 0):.2f} {t.get("draft_n", "-")} {t.get("draft_n_accepted", "-")} {t.get("predicted_n", 0)} {same}')
PY
)
    rate=${line%% *}
    if awk -v a="$rate" -v b="$best" 'BEGIN { exit !(a > b) }'; then best=$rate; keep=$line; fi
  done
  kill "$pid"; wait "$pid" 2> /dev/null || true
  set -- $keep
  echo "| llama.cpp $name | $1 | $2 | $3 | $4 tokens, $5 equal to ortserve's greedy ids |"
}

echo "| llama.cpp F32, $n tokens, $T threads | decode tok/s | drafted | accepted | output |"
echo "|---|---:|---:|---:|---|"
run plain
run ngram-simple --spec-type ngram-simple
run ngram-map-k --spec-type ngram-map-k
run ngram-cache --spec-type ngram-cache
# a draft model drafts only with --spec-type draft-simple (-md alone loads it and drafts nothing: its responses say
# "speculative.types": "none"); llama.cpp's default draft length is 3, ortserve's 8
run draft-Q4_0 -md "$Q4" --spec-type draft-simple -ngld 0 -td "$T"
run draft-Q4_0-n8 -md "$Q4" --spec-type draft-simple --spec-draft-n-max 8 -ngld 0 -td "$T"
