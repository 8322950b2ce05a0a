// The TurboQuant KV codec ("kXvY", docs/kv-cache.md): keys get grouped asymmetric affine codes
// with a zero point, values a fixed-sign Walsh–Hadamard rotation and Lloyd-Max Gaussian codes.
// Groups are kTurboGroup = 32 consecutive elements along head_dim; scales and zero points are
// stored as IEEE f16; arithmetic is f32.
//
// Keys, X ∈ {2, 4, 5, 8} bits, per group (max, min over the group):
//   X = 8 (signed codes): s = (max − min)/254, z = round((max + min)/(2s)), q ∈ [−127, 127]
//   X < 8 (unsigned):     s = (max − min)/(2^X − 1), z = round(min/s),        q ∈ [0, 2^X − 1]
//   s and z are rounded to f16 first; q = clip(round(x/s − z)) against the stored s, z;
//   k̂ = (q + z)·s (addition before multiplication). A constant group (max == min) uses
//   s = |max|/qmax (1 when max == 0). s is at least offset/2000 (offset = |max + min|/2 for X = 8,
//   |min| otherwise) so that |z| <= 2000 stays an exact f16 integer.
// Values, Y ∈ {2, 3, 4, 5, 8} bits, head_dim d a power of two in [32, 512]:
//   y = H(x ⊙ signs_d)/√d (H the Walsh–Hadamard matrix, Sylvester order); per group
//   s = √mean(y²) (f32, stored as f16); q = Lloyd-Max cell of y/(s + 1e-8) for N(0, 1);
//   ŷ = centroid[q]·s_f16;  x̂ = signs_d ⊙ H(ŷ)/√d.
// Codes are a little-endian bit stream in bytes: code i occupies bits [i·b, (i+1)·b) (8-bit keys
// are int8 two's complement bytes).
#pragma once

#include <cstdint>
#include <vector>

#include "core/dtype.h"

namespace ringlm::kv {

constexpr int kTurboGroup = 32;

// Lloyd-Max quantizer of N(0, 1) with 2^bits levels (bits ∈ {2, 3, 4, 5, 8}), computed once on
// first use by iterating the optimality conditions in double precision (boundaries = midpoints of
// neighbouring centroids; centroids = conditional means of their cells) until no value moves by
// more than 1e-12. Centroids ascending (2^bits), boundaries ascending (2^bits − 1).
const std::vector<float>& lloyd_max_centroids(int bits);
const std::vector<float>& lloyd_max_boundaries(int bits);

// The fixed ±1 sign vector of head_dim d (a power of two in [32, 512]): sign i is + when bit 31 of
// the i-th output of a 32-bit xorshift generator (x ^= x<<13; x ^= x>>17; x ^= x<<5) seeded with
// 0x9E3779B9 ^ d is 0, − otherwise. As floats ±1.
const std::vector<float>& turbo_signs(int head_dim);

// Throws ringlm::Error unless the widths and head_dim are supported (key 2/4/5/8, value
// 2/3/4/5/8, head_dim a power of two in [32, 512]).
void validate_turbo(int key_bits, int value_bits, int head_dim);

// In-place unnormalized Walsh–Hadamard transform of n (a power of two) values.
void fwht(float* x, int n);  // F32[n]
// y = H(x ⊙ signs)/√d and its inverse x = signs ⊙ H(y)/√d (x and y may alias).
void turbo_rotate(const float* x, int head_dim, float* y);    // F32[d] -> F32[d]
void turbo_unrotate(const float* y, int head_dim, float* x);  // F32[d] -> F32[d]

// Bytes of one row's codes: head_dim·bits/8.
inline int turbo_code_bytes(int head_dim, int bits) {
  return head_dim * bits / 8;
}

// Code i of a bit stream of `bits`-bit codes (unsigned; no validation, kernels call it per
// element).
inline uint32_t turbo_code(const uint8_t* codes, int i, int bits) {
  const int bit = i * bits, byte = bit >> 3, shift = bit & 7;
  uint32_t w = codes[byte];
  if (shift + bits > 8) w |= static_cast<uint32_t>(codes[byte + 1]) << 8;
  return (w >> shift) & ((1u << bits) - 1u);
}
// Key code as the signed integer q of the formulas (8-bit codes are int8).
inline int turbo_key_code(const uint8_t* codes, int i, int bits) {
  if (bits == 8) return static_cast<int8_t>(codes[i]);
  return static_cast<int>(turbo_code(codes, i, bits));
}

// One row of keys: codes U8[d·bits/8], scales and zeros F16[d/32].
void turbo_key_quantize(const float* x,  // F32[d]
                        int head_dim, int bits,
                        uint8_t* codes,          // U8[d*bits/8]
                        f16_t* scales,           // F16[d/32]
                        f16_t* zeros);           // F16[d/32]
void turbo_key_dequantize(const uint8_t* codes,  // U8[d*bits/8]
                          const f16_t* scales,   // F16[d/32]
                          const f16_t* zeros,    // F16[d/32]
                          int head_dim, int bits,
                          float* out);  // F32[d]

// One row of values: rotates, then codes U8[d·bits/8] and scales F16[d/32].
void turbo_value_quantize(const float* x,  // F32[d]
                          int head_dim, int bits,
                          uint8_t* codes,  // U8[d*bits/8]
                          f16_t* scales);  // F16[d/32]
// The rotated reconstruction ŷ (attention accumulates these and un-rotates once per query head).
void turbo_value_dequantize_rotated(const uint8_t* codes,  // U8[d*bits/8]
                                    const f16_t* scales,   // F16[d/32]
                                    int head_dim, int bits,
                                    float* out);  // F32[d]
// x̂ = unrotate(ŷ).
void turbo_value_dequantize(const uint8_t* codes,  // U8[d*bits/8]
                            const f16_t* scales,   // F16[d/32]
                            int head_dim, int bits,
                            float* out);  // F32[d]

}  // namespace ringlm::kv
