// A block-quantized matrix product of a step's few rows (decode, speculative verification): y[r, n] = sum_k x[r, k] w[k, n]
// with w in com.microsoft.MatMulNBits' layout (blocks of 32 along K per output column, 4-bit values two to a byte, low
// nibble first, or 8-bit; the op's default zero point 2^(bits-1); one float scale per block) and x quantized per block
// of 32 to int8 (scale = the block's largest magnitude / 127, as llama.cpp's Q8_0 and onnxruntime's int8-activation
// path quantize it), so each block is an integer dot product and two scales. Shared by the per-instruction-set
// translation units (qmatmul_vnni.cc and qmatmul_avx2.cc over qmatmul_simd.inc, and the portable one in matmul_nbits.cc).
#pragma once

#include <cstddef>
#include <cstdint>

namespace ortserve {

constexpr int kQBlock = 32;

// the block (of a group of 8) in each 32-bit lane of the octet layout: what two rounds of in-lane unpacking of the
// weights' words give (qmatmul_simd.inc)
constexpr int kOctetLanes[8] = {0, 2, 4, 6, 1, 3, 5, 7};

// a step's rows quantized: per row and block, 32 int8 values and their scale; corr = zero point x scale x sum of the
// values, the term the weights' zero point contributes. For 4-bit weights the values are in the order of the bytes'
// nibbles (low: even positions, high: odd ones), two blocks a time: blocks 2p and 2p+1 are the 64 bytes
// [evens of 2p, evens of 2p+1, odds of 2p, odds of 2p+1]; an odd last block alone is [its evens, its odds].
// The VNNI kernel takes whole groups of 8 blocks in the octet layout instead (the blocks after them in pairs as above):
// the group's 256 bytes are, for each 4-byte word j of a block's 16 weight bytes (j = 0..3), 32 bytes of that word's
// low-nibble values (positions 8j, 8j+2, 8j+4, 8j+6) of the 8 blocks, then 32 of its high-nibble values (8j+1, ..., 8j+7),
// each 32 in the lane order kOctetLanes, so that each 32-bit lane of the kernel's sums holds one block.
// 8-bit weights in octets: the group's 256 bytes are two halves of 128 (blocks 0-3 of the group, then 4-7), each four
// registers j of 32 bytes whose lanes 0-3 hold word j (positions 4j..4j+3) of blocks 0-3 and lanes 4-7 word j + 4 of
// the same blocks: what one round of in-lane unpacking of the blocks' words gives; each block's sum is two lanes (put
// together by the kernel).
struct QuantizedRows {
  const int8_t* q;     // [rows][blocks][32]
  const float* scale;  // [rows][blocks]
  const float* corr;   // [rows][blocks]
  const float* spread; // [rows][blocks / 2][8]: 4-bit, each pair's scales as the AVX2 kernel multiplies them (4 x the
                       // first, 4 x the second), a pair b at b x 4; in the octet layout a group's 8 scales in lane
                       // order at its first block b; 8-bit: [rows][blocks][8], each block's scale 8 times
  const int32_t* zero; // [rows][blocks]: the octet layout's blocks: 4-bit, -8 x the sum of the block's values, in lane
                       // order; 8-bit, -128 x it, in block order: the zero point's term, added to the VNNI kernel's
                       // integer sums (corr is not read for these blocks)
};

struct QMatArgs {
  const uint8_t* w;       // [N][blocks][32 * bits / 8]
  const float* scales;    // [N][blocks]
  int bits;               // 4 or 8
  int blocks;
  int rows;
  QuantizedRows x;
  float* y;               // [rows][n_total]
  int64_t n_total;
  int64_t n_from, n_to;   // this task's output columns
};

using QMatFn = void (*)(const QMatArgs&);

// a row of K floats to QuantizedRows' layout: its q ([blocks][32], in the nibbles' order for 4-bit), scale, corr and
// spread entries. Every quantizer gives the same bytes and floats: scale = amax / 127 in float, each value x * (1 /
// scale) rounded to nearest even and held to -127..127, the blocks' values past K zero.
struct QuantizeArgs {
  const float* x;
  int64_t k;
  int blocks;
  int bits;
  int8_t* q;
  float* scale;
  float* corr;
  float* spread;
  int32_t* zero;
  bool octets;  // 4-bit: the whole groups of 8 blocks in the octet layout (the VNNI kernel's), else pairs
};

using QuantizeFn = void (*)(const QuantizeArgs&);

// where position j of block b (of `blocks`) of a row's 4-bit-ordered values is, from the row's start
inline int nibble_order(int b, int j, int blocks) {
  if (b == blocks - 1 && blocks % 2 == 1) return b * kQBlock + (j % 2 == 0 ? j / 2 : 16 + j / 2);
  return (b - b % 2) * kQBlock + (j % 2 == 0 ? 0 : 32) + (b % 2) * 16 + j / 2;
}

void quantize_portable(const QuantizeArgs& a);
void quantize_avx2(const QuantizeArgs& a);  // needs AVX2 (qquant_avx2.cc)

void qmat_portable(const QMatArgs& a);
void qmat_avx2(const QMatArgs& a);  // needs AVX2 and FMA
void qmat_vnni(const QMatArgs& a);  // needs AVX2, FMA, AVX512_VNNI and AVX512VL

}  // namespace ortserve
