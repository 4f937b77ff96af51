// The decode kernel for AVX-512 (F): 16 floats a register; float16 widened by vcvtph2ps. Compiled with -mavx512f
// -mfma -mf16c (build.sh); called only where the CPU has them (ortserve_ops.cc checks at load).
#include <immintrin.h>

#include "attend.h"

namespace {

using V = __m512;
constexpr int W = 16;
inline V zero() { return _mm512_setzero_ps(); }
inline V load_float(const float* p) { return _mm512_loadu_ps(p); }
inline V load_half(const uint16_t* p) { return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))); }
inline V fmadd(V a, V b, V c) { return _mm512_fmadd_ps(a, b, c); }
inline V broadcast(float x) { return _mm512_set1_ps(x); }
inline float hsum(V x) { return _mm512_reduce_add_ps(x); }
inline void store_float(float* p, V x) { _mm512_storeu_ps(p, x); }

#include "attend_simd.inc"

}  // namespace

void ortserve::attend_avx512(const AttendArgs& a) {
  if (a.half) attend_all<true>(a);
  else attend_all<false>(a);
}
