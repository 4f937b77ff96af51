#!/usr/bin/env bash
# The serving benchmark split into processes (docs/benchmarks.md): the plain ONNX Runtime loop and then
# the server pinned to SERVER_CPUS, the streaming load generator pinned to CLIENT_CPUS.
# ROOT holds jre/ (a Java 17 runtime) and app/ (target/quarkus-app, plus bench-classes/ with the
# compiled dev.ortserve.bench classes); the bench model is generated into ROOT/models.
# usage: split-serving.sh ROOT SERVER_CPUS THREADS CLIENT_CPUS STREAMS PROMPT OUTPUT
set -uo pipefail
ROOT=$1; SERVER_CPUS=$2; THREADS=$3; CLIENT_CPUS=$4; STREAMS=$5; PROMPT=$6; OUTPUT=$7
JAVA=$ROOT/jre/bin/java
CP="$ROOT/app/app/*:$ROOT/app/lib/main/*:$ROOT/app/lib/boot/*:$ROOT/app/bench-classes"
MODEL=$($JAVA -cp "$CP" dev.ortserve.bench.SplitServingBenchmark generate $ROOT/models | tail -1)
echo "model: $MODEL; server cpus $SERVER_CPUS (intra-op threads $THREADS), clients cpus $CLIENT_CPUS; streams $STREAMS, prompt $PROMPT, output $OUTPUT"
echo "## plain ORT loop (pinned to the server's cpus)"
taskset -c $SERVER_CPUS $JAVA -cp "$CP" dev.ortserve.bench.SplitServingBenchmark plain $MODEL $THREADS $STREAMS $PROMPT $OUTPUT 2>&1 | grep -E '^\||Exception|Caused'
ORTSERVE_MODEL_PATH=$MODEL ORTSERVE_MODEL_NAME=bench ORTSERVE_INTRA_OP_THREADS=$THREADS ORTSERVE_ENGINE_MAX_SEQUENCES=$(( STREAMS > 16 ? STREAMS : 16 )) \
  QUARKUS_HTTP_PORT=18080 taskset -c $SERVER_CPUS $JAVA ${SERVER_JAVA_OPTS:-} -jar $ROOT/app/quarkus-run.jar > $ROOT/server.log 2>&1 &
SERVER=$!
for i in $(seq 1 240); do curl -sf http://127.0.0.1:18080/v1/models >/dev/null 2>&1 && break; sleep 0.5; done
echo "## HTTP streaming (server pinned as above; clients on $CLIENT_CPUS)"
taskset -c $CLIENT_CPUS $JAVA -cp "$CP" dev.ortserve.bench.SplitServingBenchmark http http://127.0.0.1:18080/ bench 32000 $STREAMS $PROMPT $OUTPUT 2>&1 | grep -E '^\||Exception|Caused'
kill $SERVER; wait $SERVER || true
