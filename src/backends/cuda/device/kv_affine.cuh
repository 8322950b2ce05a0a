// KV reader (device/kv_load.cuh's interface) for MLX-affine views (ops::KvLayerView, bits 4 or 8):
// codes U32[rows, head_dim·kBits/32] packed LSB-first, BF16 scale and bias per group of kGroup
// dims. A dim dequantizes as in kv::affine_dequantize and the CPU kernel: scale·code rounded to
// f32, then + bias (no FMA).
#pragma once

#include <cuda_bf16.h>

#include <cstdint>

#include "backends/cuda/device/quant_common.cuh"

namespace ringlm::cuda::device {

template <int kBits, int kGroup>
struct AffineKvReader {
  static_assert(kBits == 4 || kBits == 8, "affine KV on CUDA: 4- or 8-bit codes");
  static_assert(kGroup == 32 || kGroup == 64, "affine KV on CUDA: groups of 32 or 64");
  static constexpr bool kRotatedValues = false;
  static constexpr int kCodeBits = kBits, kGroupSize = kGroup;
  const uint32_t* k;  // U32[rows, head_dim·kBits/32], row = slot · kv_heads + kv_head
  const uint32_t* v;
  const __nv_bfloat16* k_scales;  // BF16[rows, head_dim/kGroup]
  const __nv_bfloat16* k_biases;
  const __nv_bfloat16* v_scales;
  const __nv_bfloat16* v_biases;
  int head_dim;

  template <int N>
  __device__ __forceinline__ void key(int64_t row, int d0, float (&x)[N]) const {
    read<N>(k, k_scales, k_biases, row, d0, x);
  }
  template <int N>
  __device__ __forceinline__ void value(int64_t row, int d0, float (&x)[N]) const {
    read<N>(v, v_scales, v_biases, row, d0, x);
  }

 private:
  // N dims from d0 share one group (d0 % N == 0, kGroup % 8 == 0). 4-/8-bit codes never straddle
  // words: N = 8 is one word of int4 codes or two of int8 codes (one 8-byte load).
  template <int N>
  __device__ __forceinline__ void read(const uint32_t* codes, const __nv_bfloat16* scales,
                                       const __nv_bfloat16* biases, int64_t row, int d0,
                                       float (&x)[N]) const {
    constexpr uint32_t kMask = (1u << kBits) - 1u;
    const int64_t g = row * (head_dim / kGroup) + d0 / kGroup;
    const float sc = __bfloat162float(scales[g]), bi = __bfloat162float(biases[g]);
    const uint32_t* w = codes + row * (head_dim * kBits / 32);
    uint32_t c[N];
    if constexpr (N * kBits == 64) {
      const uint2 u = *reinterpret_cast<const uint2*>(w + d0 * kBits / 32);
#pragma unroll
      for (int i = 0; i < N; ++i) c[i] = ((i < 4 ? u.x : u.y) >> ((i % 4) * kBits)) & kMask;
    } else {
      // N·kBits <= 32 bits inside one word.
      const uint32_t word = w[d0 * kBits / 32] >> ((d0 * kBits) & 31);
#pragma unroll
      for (int i = 0; i < N; ++i) c[i] = (word >> (i * kBits)) & kMask;
    }
#pragma unroll
    for (int i = 0; i < N; ++i) x[i] = __fadd_rn(__fmul_rn(sc, code_to_float(c[i])), bi);
  }
};

template <typename Kv>
constexpr bool is_affine_reader() {
  return requires {
    Kv::kCodeBits;
  };
}

}  // namespace ringlm::cuda::device
