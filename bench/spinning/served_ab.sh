#!/bin/bash
# Intra-op spinning settings served over HTTP, alternated in one run: ServingBenchmark (bench model,
# prompt 64, output 64, 16 streams) once per setting in every round, each in a fresh JVM, then the
# median of each row over the rounds.
#
#   [ROUNDS=4] [PRECISION=model|int8|int4] bench/spinning/served_ab.sh SPIN...
#
# SPIN as EngineOptions.intraOpSpinMicros takes it: 0 = ORTSERVE_INTRA_OP_SPINNING=false; N = spinning
# with ORTSERVE_INTRA_OP_SPIN_MICROS=N; -1 = onnxruntime's own spin loop. Example:
#   PRECISION=int4 bench/spinning/served_ab.sh 0 50 200 -1
# Every run's rows: target/spinning-served-rows.txt; medians: target/spinning-served-report.md.
set -euo pipefail
cd "$(dirname "$0")/../.."
ROUNDS=${ROUNDS:-4}
PRECISION=${PRECISION:-model}
ROWS=target/spinning-served-rows.txt
mkdir -p target
: > "$ROWS"
./mvnw -q -B -Pbench test-compile
for round in $(seq 1 "$ROUNDS"); do
  for spin in "$@"; do
    if [ "$spin" = 0 ]; then props=(-Dortserve.intra-op-spinning=false)
    else props=(-Dortserve.intra-op-spinning=true "-Dortserve.intra-op-spin-micros=$spin"); fi
    ./mvnw -q -B -o -Pbench test -Dtest=ServingBenchmark -Dbench.prompt=64 -Dbench.output=64 -Dbench.concurrency=16 \
      "-Dortserve.engine.weight-precision=$PRECISION" "${props[@]}" > target/spinning-served-last.log 2>&1
    grep -q "spinning" target/spinning-served-last.log || { echo "no startup line in target/spinning-served-last.log" >&2; exit 1; }
    # | path | streams | decode tok/s (from first token) | steady | ...
    grep -E "^\| (plain|engine|HTTP)" target/bench-report.md \
      | awk -F'|' -v s="$spin" -v r="$round" '{gsub(/^ +| +$/, "", $2); gsub(/ /, "", $3); printf "%s\t%s\t%s\t%s\t%s\n", s, r, $2, $3, $4}' >> "$ROWS"
  done
done
{
  echo "bench model, $PRECISION weights, prompt 64, output 64, $(nproc) processors; decode tok/s from first token, median of $ROUNDS rounds (each round: $*)"
  echo
  printf "| path | streams |"; for spin in "$@"; do printf " spin %s |" "$spin"; done; echo
  printf "|---|---|"; for spin in "$@"; do printf -- "---|"; done; echo
  cut -f3,4 "$ROWS" | awk '!seen[$0]++' | while IFS=$'\t' read -r path streams; do
    printf "| %s | %s |" "$path" "$streams"
    for spin in "$@"; do
      awk -F'\t' -v s="$spin" -v p="$path" -v n="$streams" '$1 == s && $3 == p && $4 == n {print $5 + 0}' "$ROWS" | sort -g \
        | awk '{v[NR] = $1} END {m = NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2; printf " %.1f (%d runs) |", m, NR}'
    done
    echo
  done
} > target/spinning-served-report.md
cat target/spinning-served-report.md
