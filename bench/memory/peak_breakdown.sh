#!/bin/bash
# Where a serving JVM's peak resident set sits (docs/benchmarks.md, "int4 at 16 streams on this host"): samples the
# java process whose command line matches PATTERN every 3 s until it exits and keeps the sample with the largest VmRSS:
# the JVM's own committed memory by category (NMT: start the JVM with -XX:NativeMemoryTracking=summary) and the
# resident KiB per mapping (anonymous under the empty name, files by path) from /proc/PID/smaps.
#
#   bench/memory/peak_breakdown.sh MemoryUnderLoadBench > /tmp/peak.txt &
#   MALLOC_MMAP_THRESHOLD_=65536 java -XX:NativeMemoryTracking=summary @target/cp.args dev.ortserve.bench.MemoryUnderLoadBench \
#       target/bench-models/qwen3-0.6b-gqa-20261122 int4 1073741824 16 1600 32 model
set -u
pattern=${1:?usage: peak_breakdown.sh PATTERN}
best=0 seen= report=
while true; do
  # the java process itself (its command line starts with java), not a wrapper naming it (timeout java ...)
  pid=$(pgrep -f "^[^ ]*java .*$pattern" | head -1)
  if [ -z "$pid" ]; then [ -n "$seen" ] && break; sleep 1; continue; fi
  seen=1
  rss=$(awk '/VmRSS/{print $2}' /proc/"$pid"/status 2>/dev/null) || break
  [ -z "$rss" ] && break
  if [ "$rss" -gt "$best" ]; then
    best=$rss
    report="RSS_KiB $rss at $(date +%T)
$(jcmd "$pid" VM.native_memory summary 2>/dev/null | grep -E '^-|Total:')
resident KiB by mapping (anonymous first line, empty name):
$(awk '/^[0-9a-f]+-[0-9a-f]+ /{name=$6} /^Rss:/{r[name]+=$2} END{for (n in r) print r[n], n}' /proc/"$pid"/smaps 2>/dev/null | sort -rn | head -12)"
  fi
  sleep 3
done
echo "$report"
