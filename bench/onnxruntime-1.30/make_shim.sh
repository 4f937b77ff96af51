#!/usr/bin/env bash
# onnxruntime 1.30.0's official CPU/CUDA library under the 1.29.0 Java binding, for an A/B in separate JVMs (not part
# of the build: docs/benchmarks.md, "onnxruntime 1.30"). The Maven registry here serves no 1.30 Java artifact and the
# JNI's C sources are on no registry this machine reaches, so instead of a JNI compiled against 1.30:
#   - the official library from npm (onnxruntime-node@1.30.0, bin/napi-v6/linux/x64/libonnxruntime.so.1), checksummed;
#   - ort_shim.c: a libonnxruntime.so (soname libonnxruntime.so.1) exporting the two symbols the 1.29 JNI library
#     links, at the version VERS_1.29.0 it asks for, forwarding to the 1.30 library beside it (the C API is versioned:
#     1.30 serves the 1.29 API);
#   - the 1.29 jar's libonnxruntime4j_jni.so, its compiled-in version string "1.29.0" changed to "1.30.0" (only what
#     OrtEnvironment.getVersion() reports; the benchmarks print it).
# Usage: bench/onnxruntime-1.30/make_shim.sh OUT_DIR; then run a JVM with -Donnxruntime.native.path=OUT_DIR
# (Maven: -DargLine=-Donnxruntime.native.path=OUT_DIR).
set -euo pipefail
out=${1:?usage: make_shim.sh OUT_DIR}
here=$(cd "$(dirname "$0")" && pwd)
jar=${HOME}/.m2/repository/com/microsoft/onnxruntime/onnxruntime/1.29.0/onnxruntime-1.29.0.jar
mkdir -p "$out"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
curl -fsSL --retry 3 -o "$tmp/ort.tgz" https://registry.npmjs.org/onnxruntime-node/-/onnxruntime-node-1.30.0.tgz
echo "6e3390d6b783e7be946fad629292799da28d0b42f84856e50d2c1b0383291e75  $tmp/ort.tgz" | sha256sum -c --quiet -
tar -xzf "$tmp/ort.tgz" -C "$tmp" package/bin/napi-v6/linux/x64/libonnxruntime.so.1
cp "$tmp/package/bin/napi-v6/linux/x64/libonnxruntime.so.1" "$out/libonnxruntime-1.30.0.so"
gcc -O2 -Wall -shared -fPIC -Wl,-soname,libonnxruntime.so.1 -Wl,--version-script="$here/ort_shim.map" \
  -o "$out/libonnxruntime.so" "$here/ort_shim.c" -ldl -lpthread
unzip -p "$jar" ai/onnxruntime/native/linux-x64/libonnxruntime4j_jni.so > "$tmp/jni.so"
python3 - "$tmp/jni.so" "$out/libonnxruntime4j_jni.so" <<'PY'
import sys
import re
b = bytearray(open(sys.argv[1], 'rb').read())
# the version string alone ("\0" before it), not the symbol version VERS_1.29.0
at = [m.start() + 1 for m in re.finditer(rb'\x001\.29\.0\x00', bytes(b))]
assert len(at) == 1, 'the JNI library should hold one "1.29.0" string: %s' % at
b[at[0]:at[0] + 6] = b'1.30.0'
open(sys.argv[2], 'wb').write(b)
PY
echo "onnxruntime 1.30.0 under the 1.29 Java binding: -Donnxruntime.native.path=$out"
