// The MLX "affine" quantization codec (mx.quantize(mode="affine")): per group of `group_size`
// consecutive values, `bits`-bit codes q with x ≈ scale·q + bias. Used by quantized KV storage and
// by MLX-quantized checkpoints' weights, so it must reproduce MLX's float32 algorithm bit for bit:
//
//   n = 2^bits - 1;  s = max((max - min)/n, 1e-7)
//   if |min| > |max|: edge = min, s = +s   else: edge = max, s = -s
//   q0 = round(edge/s);  if q0 != 0: s = edge/q0, bias = edge   else: bias = 0
//   q = clip(round((x - bias)/s), 0, n)
//
// (scales are negative when |max| >= |min|; 0 dequantizes to ~0). Codes are packed LSB-first as
// one little-endian bit stream: code i occupies bits [i·bits, (i+1)·bits) of the stream, viewed
// as uint32 words. For 2/4/8 bits this is "element k of a word at bits [k·b, (k+1)·b)"; for 3/5
// bits it is MLX's 8 values per 3-/5-byte little-endian chunk and for 6 bits 4 values per 3 bytes
// (3-, 5- and 6-bit codes may straddle two words). n·bits/32 words hold n codes.
#pragma once

#include <cstdint>

namespace ringlm::kv {

struct AffineFormat {
  int bits = 4;         // 2, 3, 4, 5, 6 or 8
  int group_size = 64;  // 32, 64 or 128
};

// Throws ringlm::Error naming the bad field unless bits ∈ {2,3,4,5,6,8} and
// group_size ∈ {32,64,128}.
void validate_affine_format(const AffineFormat& format);

// Checks n (values along the quantized axis) is >= 0 and a multiple of group_size; then
// n/group_size groups and n·bits/32 packed words (exact, since group_size is a multiple of 32).
int64_t affine_groups(int64_t n, const AffineFormat& format);
int64_t affine_packed_words(int64_t n, const AffineFormat& format);

// How round() resolves ties: MLX's CPU backend uses rint (half to even), its Metal and CUDA
// kernels use round (half away from zero).
enum class RoundingMode { HalfToEven, HalfAwayFromZero };

// Where the group maximum starts: MLX's CPU backend takes the true maximum; its Metal and CUDA
// kernels start the running max at 0, i.e. use max(0, max x) (matters only for all-negative
// groups). The minimum is the true minimum on every backend.
enum class MaxInit { TrueMax, Zero };

// Quantizes x (n values, n a multiple of group_size) group by group. Outputs:
//   packed  U32[n·bits/32]   codes, LSB-first bit stream
//   scales  F32[n/group_size]
//   biases  F32[n/group_size]
// All float arithmetic is float32 in the reference's order; NaN codes clip to 0 (as MLX's
// fmax/fmin clip does), so non-finite input gives garbage groups but no UB.
// `packed` is fully overwritten (no need to zero it first).
void affine_quantize(const float* x,  // F32[n]
                     int64_t n, const AffineFormat& format,
                     uint32_t* packed,  // U32[n*bits/32]
                     float* scales,     // F32[n/group_size]
                     float* biases,     // F32[n/group_size]
                     RoundingMode mode = RoundingMode::HalfToEven,
                     MaxInit max_init = MaxInit::TrueMax);

// out[i] = scales[g]·q_i + biases[g] with g = i/group_size.
void affine_dequantize(const uint32_t* packed,  // U32[n*bits/32]
                       const float* scales,     // F32[n/group_size]
                       const float* biases,     // F32[n/group_size]
                       int64_t n, const AffineFormat& format,
                       float* out);  // F32[n]

// Code `index` of a packed stream of `bits`-bit codes (no validation: kernels call it per element;
// reads the word after the code's first word only when the code straddles it).
inline uint32_t affine_code(const uint32_t* packed, int64_t index, int bits) {
  const int64_t bit = index * bits;
  const int64_t word = bit >> 5;
  const int shift = static_cast<int>(bit & 31);
  const uint32_t mask = (1u << bits) - 1u;  // bits <= 8
  uint32_t v = packed[word] >> shift;
  if (shift + bits > 32) v |= packed[word + 1] << (32 - shift);
  return v & mask;
}

}  // namespace ringlm::kv
