// The block-quantized matrix product for AVX-512 VNNI on 256-bit registers (AVX512_VNNI + AVX512VL; qmatmul_simd.inc):
// `vpdpbusd` multiplies unsigned by signed bytes and adds each four adjacent products into a 32-bit lane in one
// instruction, where AVX2 needs three (vpmaddubsw, vpaddw, vpmaddwd). A step of a few rows is bound by reading the
// weights; from four rows on, by these instructions, which is where onnxruntime's own VNNI kernel led the AVX2 one
// (0.77x at 4 rows, 0.54x at 16 on a Zen 4 host, docs/benchmarks.md). Compiled with -mavx2 -mfma -mavx512vnni
// -mavx512vl (build.sh); called only where the CPU has them (matmul_nbits.cc checks at load).
#include <immintrin.h>

namespace {

inline __m256i pair_dot(__m256i u0, __m256i s0, __m256i u1, __m256i s1) {
  return _mm256_dpbusd_epi32(_mm256_dpbusd_epi32(_mm256_setzero_si256(), u0, s0), u1, s1);
}

inline __m256i one_dot(__m256i u, __m256i s) {
  return _mm256_dpbusd_epi32(_mm256_setzero_si256(), u, s);
}

}  // namespace

#define QMAT_ENTRY qmat_vnni
#include "qmatmul_simd.inc"
