// The block-quantized matrix product for AVX2 with FMA (qmatmul_simd.inc): `vpmaddubsw` (unsigned x signed bytes,
// adjacent pairs summed to 16 bits: no saturation at these ranges) and `vpmaddwd` to 32-bit sums, scaled into float
// accumulators. Compiled with -mavx2 -mfma (build.sh); called only where the CPU has them (matmul_nbits.cc checks at load).
#include <immintrin.h>

namespace {

inline __m256i pair_dot(__m256i u0, __m256i s0, __m256i u1, __m256i s1) {
  // two products of at most 15 x 127 x 2 each: their 16-bit sum stays below 2^15
  return _mm256_madd_epi16(_mm256_add_epi16(_mm256_maddubs_epi16(u0, s0), _mm256_maddubs_epi16(u1, s1)), _mm256_set1_epi16(1));
}

inline __m256i one_dot(__m256i u, __m256i s) {
  return _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1));
}

}  // namespace

#define QMAT_ENTRY qmat_avx2
#include "qmatmul_simd.inc"
