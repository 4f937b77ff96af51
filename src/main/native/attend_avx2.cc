// The decode kernel for AVX2 with FMA and F16C: 8 floats a register. Compiled with -mavx2 -mfma -mf16c (build.sh);
// called only where the CPU has them (ortserve_ops.cc checks at load).
#include <immintrin.h>

#include "attend.h"

namespace {

using V = __m256;
constexpr int W = 8;
inline V zero() { return _mm256_setzero_ps(); }
inline V load_float(const float* p) { return _mm256_loadu_ps(p); }
inline V load_half(const uint16_t* p) { return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))); }
inline V fmadd(V a, V b, V c) { return _mm256_fmadd_ps(a, b, c); }
inline V broadcast(float x) { return _mm256_set1_ps(x); }
inline float hsum(V x) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(x), _mm256_extractf128_ps(x, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}
inline void store_float(float* p, V x) { _mm256_storeu_ps(p, x); }

#include "attend_simd.inc"

}  // namespace

void ortserve::attend_avx2(const AttendArgs& a) {
  if (a.half) attend_all<true>(a);
  else attend_all<false>(a);
}
