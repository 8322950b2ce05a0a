// Device helpers shared by the quantized-KV writers and readers: unpacking N codes of a packed
// little-endian bit stream, packing a warp's codes into one, a warp's Walsh–Hadamard transform and
// order-exact group extremes. The arithmetic that must match the CPU codecs bit for bit uses the
// explicitly rounded intrinsics (__fadd_rn, __fmul_rn, ...), which nvcc never fuses into FMAs.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "backends/cuda/device/common.cuh"

namespace ringlm::cuda::device {

// c (< 2^23) as a float, exactly: the magic-number trick (one LOP and one FADD instead of I2F).
__device__ __forceinline__ float code_to_float(uint32_t c) {
  return __fsub_rn(__uint_as_float(0x4B000000u | c), 8388608.0f);
}

// `n` (<= 8) little-endian bytes from p, widened (no alignment needed).
__device__ __forceinline__ uint64_t load_bytes(const uint8_t* p, int n) {
  uint64_t w = 0;
#pragma unroll
  for (int i = 0; i < 8; ++i)
    if (i < n) w |= static_cast<uint64_t>(p[i]) << (8 * i);
  return w;
}

// Codes d0 .. d0 + N − 1 of a row's stream of `bits`-bit codes (bits <= 8), code i at bits
// [i·bits, (i+1)·bits) of the little-endian byte stream. N = 8 needs d0 % 8 == 0 (the 8 codes are
// then exactly `bits` whole bytes; 2-, 4- and 8-bit codes are read with one 2-, 4- or 8-byte load,
// which needs the row start aligned to 8 bytes). kBits > 0 fixes the width at compile time.
template <int N, int kBits>
__device__ __forceinline__ void unpack_codes(const uint8_t* row, int d0, int bits,
                                             uint32_t (&c)[N]) {
  if constexpr (kBits > 0) bits = kBits;
  const uint32_t mask = (1u << bits) - 1u;
  const int bit = d0 * bits;
  const uint8_t* p = row + (bit >> 3);
  uint64_t w;
  if constexpr (N == 8 && kBits == 8) {
    const uint2 u = *reinterpret_cast<const uint2*>(p);
    w = static_cast<uint64_t>(u.x) | static_cast<uint64_t>(u.y) << 32;
  } else if constexpr (N == 8 && kBits == 4) {
    w = *reinterpret_cast<const uint32_t*>(p);
  } else if constexpr (N == 8 && kBits == 2) {
    w = *reinterpret_cast<const uint16_t*>(p);
  } else if constexpr (N == 8) {
    w = load_bytes(p, bits);
  } else {
    const int shift = bit & 7;
    w = load_bytes(p, (shift + N * bits + 7) >> 3) >> shift;
  }
#pragma unroll
  for (int i = 0; i < N; ++i) c[i] = static_cast<uint32_t>(w >> (i * bits)) & mask;
}

// The warp's 32 codes (lane l holds code l, < 2^bits) packed LSB-first into `bits` 32-bit words;
// lane w < bits gets word w (the others 0). Codes may straddle words (3 and 5 bits).
__device__ __forceinline__ uint32_t warp_pack_codes(uint32_t code, int bits) {
  const int lane = static_cast<int>(threadIdx.x) & 31;
  const int bit = lane * bits, first = bit >> 5, shift = bit & 31;
  const bool straddles = shift + bits > 32;
  uint32_t mine = 0;
  for (int w = 0; w < bits; ++w) {
    uint32_t part = 0;
    if (w == first) part = code << shift;
    if (straddles && w == first + 1) part = code >> (32 - shift);
    const uint32_t word = __reduce_or_sync(kFullMask, part);
    if (lane == w) mine = word;
  }
  return mine;
}

// The value of the minimal (kMax: maximal) element of the warp's elements, ties (== compares, so
// −0 == +0) going to the lowest (kLastOnTie: highest) index: the element a sequential scan with
// `<` (std::min, std::minmax_element) keeps, so a signed zero comes out as on the CPU.
// Every lane gets the result. Not for NaN.
template <bool kMax, bool kLastOnTie>
__device__ __forceinline__ float warp_extreme(float v, int index) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    const float ov = __shfl_xor_sync(kFullMask, v, o);
    const int oi = __shfl_xor_sync(kFullMask, index, o);
    bool take = kMax ? ov > v : ov < v;
    if (ov == v) take = kLastOnTie ? oi > index : oi < index;
    if (take) {
      v = ov;
      index = oi;
    }
  }
  return v;
}

// In-place unnormalized Walsh–Hadamard transform of one warp's row of 32·kSlots values (element
// i in lane i % 32, register i / 32): the butterflies of kv::fwht in the same order
// (h = 1, 2, 4, ...: x[j] = a + b, x[j + h] = a − b), so the result is bit for bit the CPU's.
template <int kSlots>
__device__ __forceinline__ void warp_fwht(float (&x)[kSlots]) {
  const int lane = static_cast<int>(threadIdx.x) & 31;
#pragma unroll
  for (int h = 1; h < 32; h <<= 1) {
#pragma unroll
    for (int c = 0; c < kSlots; ++c) {
      const float other = __shfl_xor_sync(kFullMask, x[c], h);
      x[c] = (lane & h) != 0 ? __fsub_rn(other, x[c]) : __fadd_rn(x[c], other);
    }
  }
#pragma unroll
  for (int h = 1; h < kSlots; h <<= 1) {
#pragma unroll
    for (int c = 0; c < kSlots; ++c) {
      if ((c & h) == 0) {
        const float a = x[c], b = x[c + h];
        x[c] = __fadd_rn(a, b);
        x[c + h] = __fsub_rn(a, b);
      }
    }
  }
}

// 1/√d as kv::turbo_rotate computes it (correctly rounded sqrt, then division).
__device__ __forceinline__ float turbo_norm(int head_dim) {
  return __fdiv_rn(1.0f, __fsqrt_rn(static_cast<float>(head_dim)));
}

// The deferred inverse rotation of one warp's TurboQuant row held in registers (element 32c + lane
// in y[c]): row = signs ⊙ H(y)/√d, bit for bit kv::turbo_unrotate (its butterflies, then the
// product (x·norm)·sign).
template <int kSlots>
__device__ __forceinline__ void unrotate(float (&y)[kSlots], const float* signs) {
  const int lane = static_cast<int>(threadIdx.x) & 31;
  warp_fwht<kSlots>(y);
  const float norm = turbo_norm(32 * kSlots);
#pragma unroll
  for (int c = 0; c < kSlots; ++c) y[c] = __fmul_rn(__fmul_rn(y[c], norm), signs[c * 32 + lane]);
}

template <int kSlots>
__device__ __forceinline__ void store_unrotated(float (&y)[kSlots], const float* signs,
                                                float* row) {
  const int lane = static_cast<int>(threadIdx.x) & 31;
  unrotate<kSlots>(y, signs);
#pragma unroll
  for (int c = 0; c < kSlots; ++c) row[c * 32 + lane] = y[c];
}

// Host side: calls launch.template operator()<kSlots>() with kSlots = head_dim / 32, the slots a
// lane holds in a warp's TurboQuant row. head_dim must have passed kv::validate_turbo (32 … 512).
template <typename Launch>
void with_turbo_slots(int head_dim, const Launch& launch) {
  switch (head_dim) {
    case 32:
      launch.template operator()<1>();
      break;
    case 64:
      launch.template operator()<2>();
      break;
    case 128:
      launch.template operator()<4>();
      break;
    case 256:
      launch.template operator()<8>();
      break;
    default:  // 512 (validate_turbo allows no other)
      launch.template operator()<16>();
      break;
  }
}

}  // namespace ringlm::cuda::device
