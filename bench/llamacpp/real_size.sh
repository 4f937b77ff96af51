#!/usr/bin/env bash
# ortserve and llama.cpp at real size on the same weights, in one run: start (ready time, peak RSS),
# decode tok/s at 1 and 4 streams after a short and a long prompt, and time to first token, for
# fp32 / int8 / int4 against F32 / Q8_0 / Q4_0.
#
#   [SIZE=qwen3-0.6b] [THREADS=$(nproc)] [PAIRS="model int8 int4"] [START=1] flock /tmp/bigmem.lock bench/llamacpp/real_size.sh LLAMA_CPP_BIN_DIR [PYTHON]
#
# LLAMA_CPP_BIN_DIR: a llama.cpp build's bin/ with llama-batched-bench, llama-quantize and llama-server:
#   cmake -B build -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=ON -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF
#   cmake --build build -j --target llama-batched-bench llama-quantize llama-server
# PYTHON: an interpreter with numpy, onnx and gguf (pip), default python3.
# SIZE: a ModelGenerator size; SIZE=bench is the quick smoke test (a minute or two of measuring).
# PAIRS: which of ortserve's precisions (model = fp32, int8, int4) to run against F32 / Q8_0 / Q4_0.
# START=0: decode only (no StartBench, no llama-server starts).
# ortserve decodes with drafting off (-Dbench.speculative=false), as llama-batched-bench does: the kernels and the
# engine are compared, not prompt lookup on random text.
#
# 1. The size's GroupQueryAttention variant (ModelGenerator --gqa, the model LongContextDecodeBenchmark
#    serves) in target/bench-models, written as GGUF F32 from the same weights by onnx_to_gguf.py,
#    quantized to Q8_0 and Q4_0 by llama-quantize (its defaults).
# 2. For each pair: ortserve's StartBench (ready s and peak RSS of a cold start, empty rewrite cache,
#    then a warm one, each a fresh JVM); llama-server started twice (seconds from exec until /health
#    answers 200, VmHWM then); LongContextDecodeBenchmark on the engine (KV in place, one round,
#    OUTPUT tokens per stream, ignoring EOS) and llama-batched-bench (-npp SHORT,LONG -ntg OUTPUT
#    -npl 1,4), both with THREADS threads.
# Report: target/real-size-side-by-side.md (logs and raw results in target/llamacpp/real-size).
set -euo pipefail
BIN=$(cd "$1" && pwd)
PY=${2:-python3}
cd "$(dirname "$0")/../.."
SIZE=${SIZE:-qwen3-0.6b}
T=${THREADS:-$(nproc)}
SHORT=35 LONG=1600 OUTPUT=32
export PAIRS=${PAIRS:-model int8 int4}
export START=${START:-1}
OUT=target/llamacpp/real-size
mkdir -p "$OUT" target/bench-models
rm -f target/long-context-decode.tsv "$OUT"/*.tsv "$OUT"/batched.jsonl "$OUT"/start-*.md
started=$(date +%s)
load_start=$(cut -d' ' -f1-3 /proc/loadavg)

./mvnw -q -B test-compile dependency:build-classpath -Dmdep.outputFile=target/cp.txt
echo "-cp target/classes:target/test-classes:$(cat target/cp.txt)" > target/cp.args
dir=target/bench-models/$SIZE-gqa-20261122   # ModelGenerator.DEFAULT_SEED, as ensureGroupQueryAttention names it
[ -f "$dir/model.onnx" ] || java -Xmx8g @target/cp.args dev.ortserve.modelgen.ModelGenerator "$SIZE" "$dir" --gqa
[ -f "$OUT/$SIZE-F32.gguf" ] || "$PY" bench/llamacpp/onnx_to_gguf.py "$dir" "$OUT/$SIZE-F32.gguf"
for q in Q8_0 Q4_0; do
  [ -f "$OUT/$SIZE-$q.gguf" ] || "$BIN/llama-quantize" "$OUT/$SIZE-F32.gguf" "$OUT/$SIZE-$q.gguf" "$q" > "$OUT/quantize-$q.log" 2>&1
done

# llama-server: seconds from exec until /health answers 200, and VmHWM (kB) then
server_start() {
  local port=$((18000 + RANDOM % 1000)) t0 pid
  t0=$(date +%s.%N)
  "$BIN/llama-server" -m "$1" -t "$T" -c 8192 --host 127.0.0.1 --port "$port" > "$OUT/server-$2.log" 2>&1 &
  pid=$!
  until curl -sf "http://127.0.0.1:$port/health" > /dev/null; do
    kill -0 "$pid" 2> /dev/null || { echo "llama-server failed, see $OUT/server-$2.log" >&2; exit 1; }
    sleep 0.05
  done
  echo "$(awk -v a="$(date +%s.%N)" -v b="$t0" 'BEGIN { printf "%.2f", a - b }') $(awk '/VmHWM/ {print $2}' "/proc/$pid/status")"
  kill "$pid"
  wait "$pid" || true
}

for p in $PAIRS; do
  case $p in model) q=F32 ;; int8) q=Q8_0 ;; int4) q=Q4_0 ;; *) echo "PAIRS: model, int8 or int4, not $p" >&2; exit 2 ;; esac
  gguf="$OUT/$SIZE-$q.gguf"
  echo "== $p / $q"
  if [ "$START" != 0 ]; then
    java -Xmx8g @target/cp.args dev.ortserve.bench.StartBench "$dir" "$p" target/bench-rewrite-cache 1 | tee "$OUT/start-$p.md"
    echo "$p $(server_start "$gguf" "$q-1") $(server_start "$gguf" "$q-2")" | tee -a "$OUT/server.tsv"
  fi
  ./mvnw -q -B -Pbench test -Dtest=LongContextDecodeBenchmark#run -Dbench.size="$SIZE" -Dbench.precision="$p" -Dbench.kv=inplace -Dbench.speculative=false \
    -Dbench.rounds=1 -Dbench.output=$OUTPUT -Dbench.prompts=$SHORT,$LONG -Dbench.streams=1,4 > "$OUT/decode-$p.log" 2>&1 \
    || { tail -40 "$OUT/decode-$p.log"; exit 1; }
  "$BIN/llama-batched-bench" -m "$gguf" -c 8192 -b 2048 -ub 512 -npp $SHORT,$LONG -ntg $OUTPUT -npl 1,4 -t "$T" -tb "$T" \
    --output-format jsonl 2> "$OUT/batched-$q.log" | grep '^{' | sed "s/^{/{\"precision\":\"$p\",/" >> "$OUT/batched.jsonl"
done
cp target/long-context-decode.tsv "$OUT/decode.tsv"

llama_version=$("$BIN/llama-server" --version 2>&1 | grep -m1 version || true)
"$PY" - "$OUT" "$SIZE" "$T" "$OUTPUT" "$llama_version" "$(( ($(date +%s) - started) / 60 ))" "$load_start" "$(cut -d' ' -f1-3 /proc/loadavg)" > target/real-size-side-by-side.md <<'EOF'
import json, os, platform, re, subprocess, sys
out, size, threads, output, llama, minutes, load_start, load_end = sys.argv[1:]
label = {"model": "fp32 / F32", "int8": "int8 / Q8_0", "int4": "int4 / Q4_0"}
cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), platform.machine())
mem = int(next(l.split()[1] for l in open("/proc/meminfo") if l.startswith("MemTotal"))) / 2**20
commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
print(f"{size} (GroupQueryAttention variant for ortserve; the same weights as GGUF for llama.cpp), {threads} threads each, "
      f"{os.cpu_count()} processors ({cpu}), {mem:.0f} GiB; ortserve {commit}, llama.cpp {llama}; one round, {minutes} min in all; "
      f"load average (1, 5, 15 min) {load_start} at the start, {load_end} at the end.\n")
print("Command: `SIZE=%s PAIRS='%s' START=%s bench/llamacpp/real_size.sh LLAMA_CPP_BIN_DIR PYTHON` (under `flock /tmp/bigmem.lock` at real size)\n"
      % (size, os.environ.get("PAIRS", ""), os.environ.get("START", "1")))
servers = {l.split()[0]: l.split()[1:] for l in open(f"{out}/server.tsv")} if os.path.exists(f"{out}/server.tsv") else {}
if servers:
    print("| precision | ortserve ready s cold / warm | ortserve peak RSS GB cold / warm | llama-server ready s 1st / 2nd | llama-server peak RSS GB 1st / 2nd |")
    print("|---|---|---|---|---|")
for p in [p for p in label if p in servers]:
    rows = [l.split("|") for l in open(f"{out}/start-{p}.md") if re.match(r"\| \w+ \| (cold|warm) \|", l)]
    cold, warm = rows[0], rows[1]
    s = servers[p]
    print(f"| {label[p]} | {cold[3].strip()} / {warm[3].strip()} | {cold[4].strip()} / {warm[4].strip()} "
          f"| {float(s[0]):.1f} / {float(s[2]):.1f} | {int(s[1]) / 1e6:.2f} / {int(s[3]) / 1e6:.2f} |")
ours = {}
for l in open(f"{out}/decode.tsv"):
    prec, prompt, streams, decode, stream, ttft = l.split("\t")
    ours[("model" if prec == "fp32" else prec, int(prompt), int(streams))] = (float(decode), float(ttft))
theirs = {}
for l in open(f"{out}/batched.jsonl"):
    r = json.loads(l)
    theirs[(r["precision"], r["pp"], r["pl"])] = (r["speed_tg"], r["t_pp"])
print(f"\n| precision | prompt tokens | streams | ortserve decode tok/s | llama.cpp decode tok/s | ortserve / llama.cpp "
      f"| ortserve TTFT s | llama.cpp prompt s |")
print("|---|---|---|---|---|---|---|---|")
for (p, prompt, streams), (decode, ttft) in ours.items():
    tg, pp = theirs[(p, prompt, streams)]
    print(f"| {label[p]} | {prompt} | {streams} | {decode:.1f} | {tg:.1f} | {decode / tg:.2f}x | {ttft:.2f} | {pp:.2f} |")
print(f"\nDecode: ortserve's tokens of the decode steps that held every stream over those steps' time "
      f"(LongContextDecodeBenchmark, KV in place, drafting off, {output} tokens per stream); llama.cpp's S_TG of llama-batched-bench "
      f"({output} tokens per sequence after its prompt). TTFT: ortserve's median over the streams submitted together; "
      f"llama.cpp's T_PP, the time to process every stream's prompt (its 4-stream value is the last stream's).")
EOF
cat target/real-size-side-by-side.md
