// One (row, KV head) of a decode step's attention: the group's query heads against the head's keys and values,
// each key and value read once for the whole group. Shared by the per-instruction-set translation units
// (attend_avx512.cc, attend_avx2.cc, and the portable one in ortserve_ops.cc).
#pragma once

#include <cstdint>

namespace ortserve {

struct AttendArgs {
  const float* q;        // [group, dim]: the group's query heads, rotated, as float
  int group;
  int dim;
  const void* keys;      // [positions, dim] of float or float16: the KV head's buffer from position 0
  const void* values;
  bool half;             // float16 keys and values
  int from;              // the first position attended (a window's start)
  int len;               // one past the last
  float scale;
  float softcap;         // 0: none
  float* scores;         // scratch: [group, len]
  float* out;            // [group, dim]: the attention output, normalized
};

using AttendFn = void (*)(const AttendArgs&);

void attend_portable(const AttendArgs& a);
void attend_avx2(const AttendArgs& a);     // needs AVX2, FMA, F16C; dim % 8 == 0
void attend_avx512(const AttendArgs& a);   // needs AVX-512 F; dim % 16 == 0

// e^x for x <= 0 (softmax after the max is subtracted): 2^n e^r, r in [-ln2/2, ln2/2], a degree-6 polynomial;
// branch-free, so the loops around it vectorize. Relative error ~2e-7.
static inline float exp_nonpositive(float x) {
  x = x < -87.0f ? -87.0f : x;
  float n = __builtin_roundf(x * 1.44269504088896341f);
  float r = x - n * 0.693145751953125f - n * 1.428606765330187e-06f;
  float p = 1.0f / 720.0f;
  p = p * r + 1.0f / 120.0f;
  p = p * r + 1.0f / 24.0f;
  p = p * r + 1.0f / 6.0f;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  int32_t bits = (static_cast<int32_t>(n) + 127) << 23;
  float scale = __builtin_bit_cast(float, bits);
  return p * scale;
}

// s[from, len) = softmax(softcap(scale * s)); returns 1 / the sum of the exponentials (the probabilities are left
// unnormalized: the output is divided once instead)
static inline float softmax_row(float* s, int from, int len, float scale, float softcap) {
  if (softcap > 0.0f) {
    for (int j = from; j < len; j++) s[j] = softcap * __builtin_tanhf(s[j] * scale / softcap);
  } else {
    for (int j = from; j < len; j++) s[j] *= scale;
  }
  float max = s[from];
  for (int j = from + 1; j < len; j++) max = s[j] > max ? s[j] : max;
  float sum = 0.0f;
  for (int j = from; j < len; j++) {
    float e = exp_nonpositive(s[j] - max);
    s[j] = e;
    sum += e;
  }
  return 1.0f / sum;
}

}  // namespace ortserve
