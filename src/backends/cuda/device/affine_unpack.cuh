// Unpacking MLX affine codes (kv/affine_codec.h) on the device. The CUDA kernels for quantized
// weights work in chunks of 32 consecutive codes of a row: BITS 32-bit words, starting on a word
// boundary (rows and groups hold multiples of 32 codes), wholly inside one quantization group.
#pragma once

#include <cstdint>

#include "backends/cuda/device/common.cuh"

namespace ringlm::cuda::device {

constexpr int kCodesPerChunk = 32;

// The BITS words of the chunk at p, with the widest loads p's alignment allows: a row of K codes
// is K·BITS/32 words, a multiple of BITS, so with a 16-byte-aligned base 4- and 8-bit chunks are
// 16-byte aligned and 2- and 6-bit chunks 8-byte aligned. `kAligned` false: scalar loads only.
// Streamed (evict-first): weights are read once per call.
template <int BITS, bool kAligned>
__device__ __forceinline__ void load_chunk_words(const uint32_t* p, uint32_t (&w)[BITS]) {
  if constexpr (kAligned && BITS % 4 == 0) {
#pragma unroll
    for (int i = 0; i < BITS / 4; ++i) {
      const uint4 v = __ldcs(reinterpret_cast<const uint4*>(p) + i);
      w[4 * i] = v.x, w[4 * i + 1] = v.y, w[4 * i + 2] = v.z, w[4 * i + 3] = v.w;
    }
  } else if constexpr (kAligned && BITS % 2 == 0) {
#pragma unroll
    for (int i = 0; i < BITS / 2; ++i) {
      const uint2 v = __ldcs(reinterpret_cast<const uint2*>(p) + i);
      w[2 * i] = v.x, w[2 * i + 1] = v.y;
    }
  } else {
#pragma unroll
    for (int i = 0; i < BITS; ++i) w[i] = __ldcs(p + i);
  }
}

// Code I of the chunk as an exact float. 2^23 + q is built by bit operations (the code ORed into
// the mantissa of 2^23) and 2^23 subtracted: exact, and cheaper than an integer conversion.
template <int BITS, int I>
__device__ __forceinline__ float chunk_code(const uint32_t (&w)[BITS]) {
  constexpr int kBit = I * BITS, kWord = kBit >> 5, kShift = kBit & 31;
  constexpr uint32_t kMask = (1u << BITS) - 1u;
  uint32_t bits;
  if constexpr (BITS == 8) {
    // Byte kShift/8 of the word under the exponent byte 0x4B of 2^23 (one byte permute).
    bits = __byte_perm(w[kWord], 0x4B000000u, 0x7440u | (kShift >> 3));
  } else if constexpr (kShift + BITS <= 32) {
    bits = ((w[kWord] >> kShift) & kMask) | 0x4B000000u;
  } else {  // straddles two words (3-, 5- and 6-bit codes)
    bits = (__funnelshift_r(w[kWord], w[kWord + 1], kShift) & kMask) | 0x4B000000u;
  }
  return __uint_as_float(bits) - 8388608.0f;
}

// q[j] = code FIRST + j of the chunk, j < N.
template <int BITS, int FIRST, int N, int J = 0>
__device__ __forceinline__ void chunk_codes(const uint32_t (&w)[BITS], float (&q)[N]) {
  if constexpr (J < N) {
    q[J] = chunk_code<BITS, FIRST + J>(w);
    chunk_codes<BITS, FIRST, N, J + 1>(w, q);
  }
}

// MLX's dequantization, rounded as written: scale·q, then + bias (never fused into an FMA).
__device__ __forceinline__ float dequant(float scale, float q, float bias) {
  return __fadd_rn(__fmul_rn(scale, q), bias);
}

// Calls fn.template operator()<BITS>() for bits ∈ {2, 3, 4, 5, 6, 8} (the caller validated it).
template <typename Fn>
void dispatch_bits(int bits, Fn&& fn) {
  switch (bits) {
    case 2:
      return fn.template operator()<2>();
    case 3:
      return fn.template operator()<3>();
    case 4:
      return fn.template operator()<4>();
    case 5:
      return fn.template operator()<5>();
    case 6:
      return fn.template operator()<6>();
    case 8:
      return fn.template operator()<8>();
    default:
      RINGLM_FAIL("affine codes: unsupported bits ", bits);
  }
}

}  // namespace ringlm::cuda::device
