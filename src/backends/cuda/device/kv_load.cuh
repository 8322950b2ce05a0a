// KV readers: how the attention kernels read one (slot, kv head) row of a paged KV layer, so one
// kernel body serves every KV format. Every reader has
//   template <int N> __device__ void key(int64_t row, int d0, float (&x)[N]) const;
//   template <int N> __device__ void value(int64_t row, int d0, float (&x)[N]) const;
// row = slot · kv_heads + kv_head; x receives dims d0 .. d0 + N − 1 (all < head_dim) as f32.
// N = 1 reads any dim; N = 4 and 8 need d0 % N == 0 and head_dim % N == 0 (then dense rows are
// read with 8- and 16-byte loads). key() is the key as the CPU kernel dequantizes it; value() is
// the value in the format's accumulation domain. A format whose values are stored transformed
// (TurboQuant: rotated) has kRotatedValues = true and the caller un-rotates each output row.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "backends/cuda/device/common.cuh"

namespace ringlm::cuda::device {

// 8 consecutive 16-bit floats from one 16-byte load.
template <typename T>
__device__ __forceinline__ void load8_16bit(const T* p, float (&x)[8]) {
  const uint4 raw = *reinterpret_cast<const uint4*>(p);
  const T* h = reinterpret_cast<const T*>(&raw);
#pragma unroll
  for (int i = 0; i < 8; ++i) x[i] = to_f32(h[i]);
}

// Dense readers name their element type; quantized ones do not.
template <typename Kv>
constexpr bool dense_reader() {
  return requires {
    typename Kv::Element;
  };
}

// Readers the tensor-core attention kernels (prefill and decode) take: 16-bit dense K/V (copied
// as stored) and the quantized formats (decoded to 16-bit tiles). f32 K/V keep the CUDA-core
// kernels (no rounding of stored values).
template <typename Kv>
constexpr bool tensor_core_reader() {
  if constexpr (dense_reader<Kv>()) {
    return sizeof(typename Kv::Element) == 2;
  } else {
    return true;
  }
}

// Whether a reader has the raw 8-dim path (kRaw8, raw_key8, raw_value8, unpack8).
template <typename Kv>
constexpr bool has_raw8() {
  if constexpr (requires { Kv::kRaw8; }) {
    return Kv::kRaw8;
  } else {
    return false;
  }
}

// Dense F32 / BF16 / F16 rows: k, v [num_blocks, block_tokens, kv_heads, head_dim].
template <typename T>
struct DenseKvReader {
  using Element = T;
  static constexpr bool kRotatedValues = false;
  const T* k;
  const T* v;
  int head_dim;

  template <int N>
  __device__ __forceinline__ void key(int64_t row, int d0, float (&x)[N]) const {
    read<N>(k + row * head_dim + d0, x);
  }
  template <int N>
  __device__ __forceinline__ void value(int64_t row, int d0, float (&x)[N]) const {
    read<N>(v + row * head_dim + d0, x);
  }

  // Raw path for kernels that load ahead (16-bit formats): the 16 bytes of dims [d0, d0 + 8)
  // stay packed in 4 registers until unpack8.
  static constexpr bool kRaw8 = sizeof(T) == 2;
  __device__ __forceinline__ uint4 raw_key8(int64_t row, int d0) const {
    return *reinterpret_cast<const uint4*>(k + row * head_dim + d0);
  }
  __device__ __forceinline__ uint4 raw_value8(int64_t row, int d0) const {
    return *reinterpret_cast<const uint4*>(v + row * head_dim + d0);
  }
  __device__ __forceinline__ static void unpack8(const uint4& raw, float (&x)[8]) {
    const T* h = reinterpret_cast<const T*>(&raw);
#pragma unroll
    for (int i = 0; i < 8; ++i) x[i] = to_f32(h[i]);
  }

 private:
  template <int N>
  __device__ __forceinline__ static void read(const T* p, float (&x)[N]) {
    if constexpr (N == 8 && sizeof(T) == 2) {
      load8_16bit(p, x);
    } else if constexpr (N % 4 == 0 && sizeof(T) == 4) {
#pragma unroll
      for (int i = 0; i < N; i += 4) {
        const float4 f = *reinterpret_cast<const float4*>(p + i);
        x[i] = f.x;
        x[i + 1] = f.y;
        x[i + 2] = f.z;
        x[i + 3] = f.w;
      }
    } else {
#pragma unroll
      for (int i = 0; i < N; ++i) x[i] = to_f32(p[i]);
    }
  }
};

}  // namespace ringlm::cuda::device
