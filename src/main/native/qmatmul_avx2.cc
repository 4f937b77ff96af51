// The block-quantized matrix product for AVX2 with FMA (qmatmul.h): per block, the 32 weights widened to bytes once for
// up to four rows, `vpmaddubsw` (unsigned x signed bytes, adjacent pairs summed to 16 bits: no saturation at these
// ranges) and `vpmaddwd` to 32-bit sums, scaled into float accumulators. Compiled with -mavx2 -mfma (build.sh); called
// only where the CPU has them (matmul_nbits.cc checks at load).
#include <immintrin.h>

#include "qmatmul.h"

namespace {

inline float hsum(__m256 x) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(x), _mm256_extractf128_ps(x, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// R rows of one output column over all blocks
template <int R, int BITS>
inline void column(const ortserve::QMatArgs& a, int64_t n, int r0) {
  const int blocks = a.blocks;
  const uint8_t* w = a.w + static_cast<size_t>(n) * blocks * (ortserve::kQBlock * BITS / 8);
  const float* ws = a.scales + static_cast<size_t>(n) * blocks;
  const __m256i ones = _mm256_set1_epi16(1);
  const __m256i low = _mm256_set1_epi8(0x0f);
  const __m256i flip = _mm256_set1_epi8(static_cast<char>(0x80));
  __m256 acc[R];
  for (int r = 0; r < R; r++) acc[r] = _mm256_setzero_ps();
  const int8_t* xq[R];
  const float* xs[R];
  const float* x8[R];  // the rows' scales spread over a register's lanes (qmatmul.h)
  const size_t spread_row = static_cast<size_t>(BITS == 4 ? blocks / 2 : blocks) * 8;
  for (int r = 0; r < R; r++) {
    xq[r] = a.x.q + static_cast<size_t>(r0 + r) * blocks * ortserve::kQBlock;
    xs[r] = a.x.scale + static_cast<size_t>(r0 + r) * blocks;
    x8[r] = a.x.spread + static_cast<size_t>(r0 + r) * spread_row;
  }
  int b = 0;
  if constexpr (BITS == 4) {
    // two blocks a time: their 32 bytes hold block b's and b+1's low nibbles (even positions) and high nibbles (odd
    // positions), and x holds the pair as [evens of b, evens of b+1] [odds of b, odds of b+1] (qmatmul.h)
    const __m256i spread = _mm256_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1);
    for (; b + 2 <= blocks; b += 2) {
      __m256i packed = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w + b * 16));
      __m256i lo = _mm256_and_si256(packed, low), hi = _mm256_and_si256(_mm256_srli_epi16(packed, 4), low);
      // the pair's weight scales, 4 lanes each, once for all rows
      __m256 sw = _mm256_permutevar8x32_ps(_mm256_castps128_ps256(_mm_castpd_ps(_mm_load_sd(reinterpret_cast<const double*>(ws + b)))), spread);
      for (int r = 0; r < R; r++) {
        const int8_t* xb = xq[r] + b * ortserve::kQBlock;
        __m256i pairs = _mm256_add_epi16(_mm256_maddubs_epi16(lo, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xb))),
                                         _mm256_maddubs_epi16(hi, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xb + 32))));
        __m256 dot = _mm256_cvtepi32_ps(_mm256_madd_epi16(pairs, ones));
        acc[r] = _mm256_fmadd_ps(dot, _mm256_mul_ps(sw, _mm256_loadu_ps(x8[r] + b * 4)), acc[r]);
      }
    }
  }
  for (; b < blocks; b++) {
    __m256i wu, wabs{};
    if constexpr (BITS == 4) {
      // a last block alone: 16 bytes, low nibbles its even positions, high nibbles its odd ones (x in that order)
      __m128i packed = _mm_loadu_si128(reinterpret_cast<const __m128i*>(w + b * 16));
      __m256i both = _mm256_set_m128i(_mm_srli_epi16(packed, 4), packed);
      wu = _mm256_and_si256(both, low);  // 0..15, the zero point (8) subtracted through corr
    } else {
      // 0..255 with zero point 128: as signed bytes (w - 128), their magnitudes the unsigned operand, the signs moved
      // onto x (llama.cpp's Q8_0 trick: vpmaddubsw takes one unsigned operand)
      wu = _mm256_xor_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(w + b * 32)), flip);
      wabs = _mm256_abs_epi8(wu);
    }
    const __m256 sw = _mm256_set1_ps(ws[b]);
    for (int r = 0; r < R; r++) {
      __m256i xv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xq[r] + b * ortserve::kQBlock));
      __m256i pairs = BITS == 4 ? _mm256_maddubs_epi16(wu, xv) : _mm256_maddubs_epi16(wabs, _mm256_sign_epi8(xv, wu));
      __m256 dot = _mm256_cvtepi32_ps(_mm256_madd_epi16(pairs, ones));
      acc[r] = _mm256_fmadd_ps(dot, BITS == 4 ? _mm256_set1_ps(ws[b] * xs[r][b]) : _mm256_mul_ps(sw, _mm256_loadu_ps(x8[r] + b * 8)), acc[r]);
    }
  }
  for (int r = 0; r < R; r++) {
    float sum = hsum(acc[r]);
    if constexpr (BITS == 4) {
      // minus the zero point's term: sum_b sw[b] x corr[r][b]
      const float* c = a.x.corr + static_cast<size_t>(r0 + r) * blocks;
      __m256 z = _mm256_setzero_ps();
      int b = 0;
      for (; b + 8 <= blocks; b += 8) z = _mm256_fmadd_ps(_mm256_loadu_ps(ws + b), _mm256_loadu_ps(c + b), z);
      float zs = hsum(z);
      for (; b < blocks; b++) zs += ws[b] * c[b];
      sum -= zs;
    }
    a.y[static_cast<size_t>(r0 + r) * a.n_total + n] = sum;
  }
}

template <int BITS>
void all(const ortserve::QMatArgs& a) {
  // row tiles outside, the task's columns inside: a tile's x (4 x K bytes) stays in L1 across the columns, and the
  // task's weights (16 columns) stay in L2 across the tiles
  int r = 0;
  for (; r + 4 <= a.rows; r += 4) {
    for (int64_t n = a.n_from; n < a.n_to; n++) column<4, BITS>(a, n, r);
  }
  for (int64_t n = a.n_from; n < a.n_to; n++) {
    switch (a.rows - r) {
      case 3: column<3, BITS>(a, n, r); break;
      case 2: column<2, BITS>(a, n, r); break;
      case 1: column<1, BITS>(a, n, r); break;
      default: break;
    }
  }
}

}  // namespace

void ortserve::qmat_avx2(const QMatArgs& a) {
  if (a.bits == 4) all<4>(a);
  else all<8>(a);
}
