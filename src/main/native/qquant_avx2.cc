// A step's rows quantized per block of 32 to int8 with AVX2 (qmatmul.h's QuantizeArgs), for the AVX2 and VNNI kernels:
// the same bytes and floats as quantize_portable (the same float operations: amax, amax / 127, 1 / scale, x times it
// rounded to nearest even by the default rounding mode, held to -127..127), eight values per instruction where the plain
// loop took one, with the 4-bit nibble order made by a byte shuffle. Quantizing is not split over threads: before this it
// was a tenth of a 16-row step at the 0.6B shape (docs/benchmarks.md). Compiled with -mavx2 -mfma (build.sh).
#include <immintrin.h>

#include <cstring>

#include "qmatmul.h"

namespace {

inline float hmax(__m256 x) {
  __m128 m = _mm_max_ps(_mm256_castps256_ps128(x), _mm256_extractf128_ps(x, 1));
  m = _mm_max_ps(m, _mm_movehl_ps(m, m));
  m = _mm_max_ss(m, _mm_movehdup_ps(m));
  return _mm_cvtss_f32(m);
}

// the 32 values of a whole block to int8 in order; their sum in *sum, the scale returned
inline float block(const float* x, __m256i* out, int* sum) {
  const __m256 sign = _mm256_set1_ps(-0.0f);
  __m256 v0 = _mm256_loadu_ps(x), v1 = _mm256_loadu_ps(x + 8), v2 = _mm256_loadu_ps(x + 16), v3 = _mm256_loadu_ps(x + 24);
  __m256 m = _mm256_max_ps(_mm256_max_ps(_mm256_andnot_ps(sign, v0), _mm256_andnot_ps(sign, v1)),
                           _mm256_max_ps(_mm256_andnot_ps(sign, v2), _mm256_andnot_ps(sign, v3)));
  const float d = hmax(m) / 127.0f;
  const __m256 id = _mm256_set1_ps(d > 0.0f ? 1.0f / d : 0.0f);
  __m256i i0 = _mm256_cvtps_epi32(_mm256_mul_ps(v0, id)), i1 = _mm256_cvtps_epi32(_mm256_mul_ps(v1, id));
  __m256i i2 = _mm256_cvtps_epi32(_mm256_mul_ps(v2, id)), i3 = _mm256_cvtps_epi32(_mm256_mul_ps(v3, id));
  // saturating packs keep each 128-bit lane's order: [0-3, 8-11, 16-19, 24-27 | 4-7, 12-15, 20-23, 28-31]
  __m256i b = _mm256_packs_epi16(_mm256_packs_epi32(i0, i1), _mm256_packs_epi32(i2, i3));
  b = _mm256_permutevar8x32_epi32(b, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
  b = _mm256_max_epi8(b, _mm256_set1_epi8(-127));
  // the sum of the signed bytes: the unsigned sums of (b + 128) less 32 x 128
  __m256i s = _mm256_sad_epu8(_mm256_xor_si256(b, _mm256_set1_epi8(static_cast<char>(0x80))), _mm256_setzero_si256());
  __m128i s2 = _mm_add_epi64(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));
  *sum = static_cast<int>(_mm_cvtsi128_si64(s2) + _mm_extract_epi64(s2, 1)) - 32 * 128;
  *out = b;
  return d;
}

}  // namespace

void ortserve::quantize_avx2(const QuantizeArgs& a) {
  const int whole = static_cast<int>(a.k / kQBlock);
  const int octets = a.octets ? a.blocks / 8 * 8 : 0;
  // within each 128-bit lane: the even positions, then the odd ones
  const __m256i split = _mm256_setr_epi8(0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15,
                                         0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15);
  for (int b = 0; b < a.blocks; b++) {
    float tail[kQBlock];
    const float* x = a.x + static_cast<int64_t>(b) * kQBlock;
    if (b >= whole) {
      // the last block past K: zeros
      for (int j = 0; j < kQBlock; j++) tail[j] = static_cast<int64_t>(b) * kQBlock + j < a.k ? x[j] : 0.0f;
      x = tail;
    }
    __m256i q;
    int sum = 0;
    const float d = block(x, &q, &sum);
    a.scale[b] = d;
    if (a.bits == 4) {
      a.corr[b] = 8.0f * d * static_cast<float>(sum);
      // [evens 0-15, odds 0-15 | evens 16-31, odds 16-31] -> [evens of the block (16) | odds of the block (16)]
      __m256i eo = _mm256_permute4x64_epi64(_mm256_shuffle_epi8(q, split), 0xd8);
      // a pair (2p, 2p + 1) is [evens of 2p, evens of 2p + 1, odds of 2p, odds of 2p + 1]; an odd last block alone is
      // [its evens, its odds] (qmatmul.h)
      if (b < octets) {
        // the octet layout (qmatmul.h): word j of the evens and of the odds into the block's lane of their 32 bytes
        alignas(32) int32_t words[8];
        _mm256_store_si256(reinterpret_cast<__m256i*>(words), eo);
        int8_t* group = a.q + static_cast<size_t>(b - b % 8) * kQBlock;
        const int lane = b % 2 == 0 ? (b % 8) / 2 : 4 + (b % 8) / 2;
        a.zero[b - b % 8 + lane] = -8 * sum;
        for (int j = 0; j < 4; j++) {
          std::memcpy(group + j * 64 + lane * 4, &words[j], 4);
          std::memcpy(group + j * 64 + 32 + lane * 4, &words[4 + j], 4);
        }
        continue;
      }
      const bool alone = b == a.blocks - 1 && a.blocks % 2 == 1;
      int8_t* at = a.q + static_cast<size_t>(b - b % 2) * kQBlock + (alone ? 0 : (b % 2) * 16);
      _mm_storeu_si128(reinterpret_cast<__m128i*>(at), _mm256_castsi256_si128(eo));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(at + (alone ? 16 : 32)), _mm256_extracti128_si256(eo, 1));
    } else {
      a.corr[b] = 0.0f;
      if (b < octets) {
        // the 8-bit octet layout (qmatmul.h): the block's words 0-3 and 4-7 into its lane of the 4 registers of its half
        alignas(32) int32_t words[8];
        _mm256_store_si256(reinterpret_cast<__m256i*>(words), q);
        const int g = b - b % 8, half = (b % 8) / 4, lane = b % 4;
        int8_t* group = a.q + static_cast<size_t>(g) * kQBlock + half * 128;
        for (int j = 0; j < 4; j++) {
          std::memcpy(group + j * 32 + lane * 4, &words[j], 4);
          std::memcpy(group + j * 32 + (lane + 4) * 4, &words[4 + j], 4);
        }
        a.zero[b] = -128 * sum;
        continue;
      }
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(a.q + static_cast<size_t>(b) * kQBlock), q);
    }
  }
  if (a.bits == 4) {
    for (int b = 0; b < octets; b++) a.spread[b] = a.scale[b - b % 8 + kOctetLanes[b % 8]];
    for (int p = octets / 2; p < a.blocks / 2; p++) {
      _mm256_storeu_ps(a.spread + p * 8, _mm256_set_m128(_mm_set1_ps(a.scale[2 * p + 1]), _mm_set1_ps(a.scale[2 * p])));
    }
  } else {
    for (int b = 0; b < a.blocks; b++) _mm256_storeu_ps(a.spread + b * 8, _mm256_set1_ps(a.scale[b]));
  }
}
