// KV reader (device/kv_load.cuh's interface) for TurboQuant views (ops::KvLayerView with
// value_bits > 0, kv/turbo_codec.h): key codes U8[rows, head_dim·key_bits/8] (8-bit codes are
// int8) with F16 scale s and zero point z per 32 dims, k̂ = (q + z)·s; value codes
// U8[rows, head_dim·value_bits/8] with an F16 scale per 32 dims, read as the *rotated*
// reconstruction centroid[q]·s (kRotatedValues: the caller un-rotates each output row once).
// Decoding is the CPU codec's, operation for operation.
//
// kKeyBits / kValueBits > 0 fix the widths at compile time (the default k8v3 gets its own
// instantiation); 0 reads them from key_bits / value_bits. Value codebooks of up to 8 entries
// (kValueBits 2 or 3) are selected from registers, wider ones read from the device table
// (L1-resident: 32 B – 1 KiB).
#pragma once

#include <cuda_fp16.h>

#include <cstdint>

#include "backends/cuda/device/quant_common.cuh"

namespace ringlm::cuda::device {

template <int kKeyBits, int kValueBits>
struct TurboKvReader {
  static constexpr bool kRotatedValues = true;
  static constexpr bool kRegisterCodebook = kValueBits == 2 || kValueBits == 3;
  const uint8_t* k;        // U8[rows, head_dim·key_bits/8], row = slot · kv_heads + kv_head
  const uint8_t* v;        // U8[rows, head_dim·value_bits/8]
  const __half* k_scales;  // F16[rows, head_dim/32]
  const __half* k_zeros;   // F16[rows, head_dim/32]
  const __half* v_scales;  // F16[rows, head_dim/32]
  const float* centroids;  // F32[2^value_bits] on the device
  float codebook[8];       // kRegisterCodebook: the centroids themselves
  int head_dim, key_bits, value_bits;

  template <int N>
  __device__ __forceinline__ void key(int64_t row, int d0, float (&x)[N]) const {
    const int bits = kKeyBits > 0 ? kKeyBits : key_bits;
    const int64_t g = row * (head_dim / 32) + (d0 >> 5);
    const float s = __half2float(k_scales[g]), z = __half2float(k_zeros[g]);
    uint32_t c[N];
    unpack_codes<N, kKeyBits>(k + row * (head_dim * bits / 8), d0, bits, c);
#pragma unroll
    for (int i = 0; i < N; ++i) {
      // 8-bit codes are int8: q = c − 256 for c >= 128.
      const float q =
          bits == 8 ? static_cast<float>(static_cast<int8_t>(c[i])) : code_to_float(c[i]);
      x[i] = __fmul_rn(__fadd_rn(q, z), s);
    }
  }

  template <int N>
  __device__ __forceinline__ void value(int64_t row, int d0, float (&x)[N]) const {
    const int bits = kValueBits > 0 ? kValueBits : value_bits;
    const float s = __half2float(v_scales[row * (head_dim / 32) + (d0 >> 5)]);
    uint32_t c[N];
    unpack_codes<N, kValueBits>(v + row * (head_dim * bits / 8), d0, bits, c);
#pragma unroll
    for (int i = 0; i < N; ++i) x[i] = __fmul_rn(centroid(c[i]), s);
  }

 private:
  __device__ __forceinline__ float centroid(uint32_t c) const {
    if constexpr (kRegisterCodebook) {
      // A select tree over the 2^kValueBits entries (compile-time indices: registers).
      float t[8];
#pragma unroll
      for (int i = 0; i < 8; ++i) t[i] = codebook[i];
#pragma unroll
      for (int level = 0; level < kValueBits; ++level) {
        const bool bit = ((c >> level) & 1u) != 0;
#pragma unroll
        for (int i = 0; i < (1 << (kValueBits - level - 1)); ++i)
          t[i] = bit ? t[2 * i + 1] : t[2 * i];
      }
      return t[0];
    } else {
      return __ldg(centroids + c);
    }
  }
};

}  // namespace ringlm::cuda::device
