#!/usr/bin/env bash
# llama.cpp's server beside bench/memory/under_load.sh: the same weights (a GGUF that onnx_to_gguf.py wrote from the
# generated model, F32, or its Q4_0 by llama-quantize), the same KV bytes (1 GiB: -c is the positions 1 GiB holds at the
# cache type, split into as many slots of >= 1,632 positions as fit, since llama.cpp's slots are fixed at start while
# ortserve admits by free KV), N concurrent streamed /completion requests of 1,600 random token ids each decoding 32
# (ignore_eos, no prompt cache); a request beyond the slots waits in llama-server's queue. Reports ready RSS, peak RSS
# (VmHWM), failed requests, seconds, time to first token (from the submission of all; mean, max) and each stream's decode
# rate (first token to last, averaged), the columns of MemoryUnderLoadBench.
#
#   [EXTRA="--cache-ram 0"] bench/llamacpp/memory_under_load.sh LLAMA_CPP_BIN_DIR MODEL.gguf CACHE_TYPE(f32|f16) STREAMS [PYTHON=python3] [THREADS=nproc]
# EXTRA: more llama-server arguments (--cache-ram 0 turns off its host-memory prompt cache, 8 GiB by default).
set -euo pipefail
BIN=$1 GGUF=$2 TYPE=$3 N=$4 PY=${5:-python3} T=${6:-$(nproc)}
per_token=$((28 * 2 * 8 * 128))   # qwen3-0.6b: layers x (K, V) x KV heads x head dim
case "$TYPE" in f32) per_token=$((per_token * 4)) ;; f16) per_token=$((per_token * 2)) ;; *) echo "f32 or f16" >&2; exit 2 ;; esac
ctx=$(( (1 << 30) / per_token ))
np=$(( ctx / 1632 )); [ "$np" -gt "$N" ] && np=$N
port=$((19000 + RANDOM % 1000))
log=$(mktemp)
"$BIN/llama-server" -m "$GGUF" -t "$T" -c "$ctx" -np "$np" -ctk "$TYPE" -ctv "$TYPE" --host 127.0.0.1 --port "$port" ${EXTRA:-} > "$log" 2>&1 &
pid=$!
trap 'kill $pid 2> /dev/null || true' EXIT
until curl -sf "http://127.0.0.1:$port/health" > /dev/null; do
  kill -0 "$pid" 2> /dev/null || { cat "$log" >&2; exit 1; }
  sleep 0.1
done
# warm-up, as MemoryUnderLoadBench's
curl -sf "http://127.0.0.1:$port/completion" -d '{"prompt":[100,101,102,103,104,105,106,107,108,109,110,111,112,113,114,115],"n_predict":4,"ignore_eos":true,"cache_prompt":false}' > /dev/null
ready=$(awk '/VmRSS/ {print int($2 / 1024)}' "/proc/$pid/status")
result=$("$PY" - "$port" "$N" <<'PY'
import json, random, sys, threading, time, urllib.request
port, n = int(sys.argv[1]), int(sys.argv[2])
rnd = random.Random(n * 31 + 1600)
first, last, tokens, failed = [0.0] * n, [0.0] * n, [0] * n, [0]
def one(k, ids):
    body = json.dumps({"prompt": ids, "n_predict": 32, "ignore_eos": True, "cache_prompt": False, "temperature": 0, "stream": True}).encode()
    try:
        req = urllib.request.Request(f"http://127.0.0.1:{port}/completion", body, {"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=1800) as r:
            for line in r:
                if not line.startswith(b"data: "):
                    continue
                d = json.loads(line[6:])
                if d.get("content") or d.get("tokens"):
                    now = time.time()
                    first[k] = first[k] or now
                    last[k] = now
                    tokens[k] += 1
    except Exception as e:
        failed[0] += 1
        print("failed:", e, file=sys.stderr)
prompts = [[100 + rnd.randrange(151936 - 200) for _ in range(1600)] for _ in range(n)]
start = time.time()
threads = [threading.Thread(target=one, args=(k, prompts[k])) for k in range(n)]
for t in threads: t.start()
for t in threads: t.join()
seconds = time.time() - start
ttft = [f - start for f in first if f]
rates = [(tokens[k] - 1) / (last[k] - first[k]) for k in range(n) if tokens[k] > 1 and last[k] > first[k]]
print(f"{failed[0]} {seconds:.1f} {sum(ttft) / max(1, len(ttft)):.2f} {max(ttft, default=0):.2f} {sum(rates) / max(1, len(rates)):.2f}")
PY
)
peak=$(awk '/VmHWM/ {print int($2 / 1024)}' "/proc/$pid/status")
extra=${EXTRA:-}; echo "llama.cpp $(basename "$GGUF" .gguf) $TYPE -c${ctx}_-np$np${extra:+_${extra// /_}} $N 1600 $ready $peak $result"
