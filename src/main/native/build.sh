#!/usr/bin/env bash
# Builds ortserve's onnxruntime custom-op library (libortserve_ops.so: dev.ortserve.GroupQueryAttention, see
# ortserve_ops.cc, and dev.ortserve.MatMulNBits, matmul_nbits.cc) into OUT_DIR/native/linux-x86_64/, where the engine finds it on the class path. Run by Maven
# (generate-resources, pom.xml) on every build; does nothing when the library is newer than its sources.
#
# Needs g++ (12 or newer) and onnxruntime's C API headers. The headers are Debian's libonnxruntime-dev (the C API is
# versioned: a library built against 1.21's header runs on onnxruntime 1.21 and later, the engine's 1.29 included),
# fetched once from Debian's archive, checked against its SHA-256 and unpacked into the cache directory; or set
# ORTSERVE_ORT_INCLUDE to a directory that holds onnxruntime_c_api.h. Only Linux on x86-64 is built: elsewhere the
# script says so and the engine serves onnxruntime's own GroupQueryAttention.
set -euo pipefail

out_dir=${1:?usage: build.sh OUT_DIR [CACHE_DIR]}
cache_dir=${2:-${HOME}/.cache/ortserve-native}
src_dir=$(cd "$(dirname "$0")" && pwd)
target="$out_dir/native/linux-x86_64/libortserve_ops.so"

if [ "$(uname -s)" != Linux ] || [ "$(uname -m)" != x86_64 ]; then
  echo "ortserve native: not Linux on x86-64 ($(uname -s) $(uname -m)): the custom-op library is not built"
  exit 0
fi

newest_source=$(ls -t "$src_dir"/*.cc "$src_dir"/*.h "$src_dir"/*.inc "$src_dir"/build.sh | head -1)
if [ -f "$target" ] && [ "$target" -nt "$newest_source" ]; then
  exit 0
fi

if ! command -v g++ >/dev/null 2>&1; then
  echo "ortserve native: g++ is needed to build the custom-op library (Debian: apt-get install g++)" >&2
  exit 1
fi

deb=libonnxruntime-dev_1.21.0+dfsg-1_amd64.deb
sha256=14f7d959d5deacbcf1504830d4189f91fc67382b399ed9ae9d3aa9c4050ced08
include=${ORTSERVE_ORT_INCLUDE:-}
if [ -z "$include" ]; then
  include="$cache_dir/${deb%.deb}/usr/include/onnxruntime"
  if [ ! -f "$include/onnxruntime_c_api.h" ]; then
    mkdir -p "$cache_dir"
    tmp=$(mktemp -d "$cache_dir/fetch.XXXXXX")
    trap 'rm -rf "$tmp"' EXIT
    echo "ortserve native: fetching onnxruntime's C API headers ($deb) from Debian's archive"
    curl -fsSL --retry 3 -o "$tmp/$deb" "https://deb.debian.org/debian/pool/main/o/onnxruntime/$deb"
    echo "$sha256  $tmp/$deb" | sha256sum -c --quiet -
    (cd "$tmp" && ar x "$deb" && mkdir unpacked && tar -xf data.tar.* -C unpacked ./usr/include)
    rm -rf "$cache_dir/${deb%.deb}"
    mv "$tmp/unpacked" "$cache_dir/${deb%.deb}"
    rm -rf "$tmp"
    trap - EXIT
  fi
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# floating point: sums may be reassociated (vectorized), no errno; NaN and infinity keep their meaning
flags=(-O3 -std=c++17 -fPIC -fvisibility=hidden -ffp-contract=fast -fno-math-errno -fassociative-math -fno-signed-zeros
       -fno-trapping-math -Wall -Wextra -Wno-unused-parameter -I"$include")
g++ "${flags[@]}" -c "$src_dir/ortserve_ops.cc" -o "$work/ops.o"
g++ "${flags[@]}" -c "$src_dir/matmul_nbits.cc" -o "$work/matmul.o"
g++ "${flags[@]}" -mavx2 -mfma -mf16c -c "$src_dir/attend_avx2.cc" -o "$work/avx2.o"
g++ "${flags[@]}" -mavx2 -mfma -c "$src_dir/qmatmul_avx2.cc" -o "$work/qavx2.o"
g++ "${flags[@]}" -mavx2 -mfma -c "$src_dir/qquant_avx2.cc" -o "$work/qquant.o"
g++ "${flags[@]}" -mavx2 -mfma -mavx512vnni -mavx512vl -c "$src_dir/qmatmul_vnni.cc" -o "$work/qvnni.o"
g++ "${flags[@]}" -Wno-maybe-uninitialized -mavx512f -mfma -mf16c -c "$src_dir/attend_avx512.cc" -o "$work/avx512.o"
mkdir -p "$(dirname "$target")"
# libstdc++ shared, as onnxruntime has it: linked in statically it would bring glibc 2.36 symbols (arc4random) that the
# runtime image (Ubuntu 22.04, glibc 2.35) lacks; shared, the library needs glibc 2.14 and GLIBCXX 3.4.21
g++ -shared -Wl,--no-undefined -Wl,-z,defs -o "$target.tmp" "$work"/*.o
mv "$target.tmp" "$target"
echo "ortserve native: built $target"
