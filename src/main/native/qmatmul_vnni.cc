// The block-quantized matrix product for AVX-512 VNNI on 256-bit registers (AVX512_VNNI + AVX512VL; qmatmul_simd.inc):
// `vpdpbusd` multiplies unsigned by signed bytes and adds each four adjacent products into a 32-bit lane in one
// instruction, where AVX2 needs three (vpmaddubsw, vpaddw, vpmaddwd). 4-bit weights go eight blocks a time in the octet
// layout (qmatmul.h): the weights' 4-byte words unpacked so that each lane of the sums holds one block, the sums start at
// the zero point's term, and one conversion, one scale product and one multiply-add serve eight blocks where the pair
// layout needs four of each; tiles of up to 8 rows. Against onnxruntime 1.29's own VNNI kernel on a Zen 4 host
// (QuantizedMatMulBench, docs/benchmarks.md) this took 4 rows from 0.80x to 1.1-1.3x and 16 rows from 0.54x to ~0.95x.
// Compiled with -mavx2 -mfma -mavx512vnni -mavx512vl (build.sh); called only where the CPU has them (matmul_nbits.cc
// checks at load).
#include <immintrin.h>

namespace {

inline __m256i pair_dot(__m256i u0, __m256i s0, __m256i u1, __m256i s1) {
  return _mm256_dpbusd_epi32(_mm256_dpbusd_epi32(_mm256_setzero_si256(), u0, s0), u1, s1);
}

inline __m256i one_dot(__m256i u, __m256i s) {
  return _mm256_dpbusd_epi32(_mm256_setzero_si256(), u, s);
}

}  // namespace

#define QMAT_OCTETS
#define QMAT_ENTRY qmat_vnni
#include "qmatmul_simd.inc"
