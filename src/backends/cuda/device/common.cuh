// Device-only helpers shared by the CUDA kernels: dtype conversions, warp/block reductions,
// grid sizing, dtype dispatch and the device-side error record.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "backends/cuda/runtime.h"
#include "core/dtype.h"
#include "core/error.h"

namespace ringlm::cuda::device {

constexpr unsigned kFullMask = 0xffffffffu;

// ---- dtype conversions (exact widening; rounding to nearest even when narrowing) ----
__device__ __forceinline__ float to_f32(float v) {
  return v;
}
__device__ __forceinline__ float to_f32(__nv_bfloat16 v) {
  return __bfloat162float(v);
}
__device__ __forceinline__ float to_f32(__half v) {
  return __half2float(v);
}

template <typename T>
__device__ __forceinline__ T from_f32(float v);
template <>
__device__ __forceinline__ float from_f32<float>(float v) {
  return v;
}
template <>
__device__ __forceinline__ __nv_bfloat16 from_f32<__nv_bfloat16>(float v) {
  return __float2bfloat16_rn(v);
}
template <>
__device__ __forceinline__ __half from_f32<__half>(float v) {
  return __float2half_rn(v);
}

// base[i] = v rounded to `dtype` (F32, BF16 or F16 chosen at run time: a cache's storage).
__device__ __forceinline__ void store_float(void* base, DType dtype, int64_t i, float v) {
  switch (dtype) {
    case DType::BF16:
      static_cast<__nv_bfloat16*>(base)[i] = from_f32<__nv_bfloat16>(v);
      break;
    case DType::F16:
      static_cast<__half*>(base)[i] = from_f32<__half>(v);
      break;
    default:
      static_cast<float*>(base)[i] = v;
  }
}

// A float tensor of a dtype chosen at run time (weights, bias): one switch per element, for
// kernels where the element is not on the hot path.
struct AnyFloat {
  const void* p;
  DType dtype;
  __device__ __forceinline__ float operator[](int64_t i) const {
    switch (dtype) {
      case DType::BF16:
        return to_f32(static_cast<const __nv_bfloat16*>(p)[i]);
      case DType::F16:
        return to_f32(static_cast<const __half*>(p)[i]);
      default:
        return static_cast<const float*>(p)[i];
    }
  }
};

// Calls fn(static_cast<T*>(nullptr)) with T the device type of a float storage dtype.
template <typename Fn>
void dispatch_float(DType dtype, Fn&& fn) {
  switch (dtype) {
    case DType::F32:
      fn(static_cast<float*>(nullptr));
      break;
    case DType::BF16:
      fn(static_cast<__nv_bfloat16*>(nullptr));
      break;
    case DType::F16:
      fn(static_cast<__half*>(nullptr));
      break;
    default:
      RINGLM_FAIL("CUDA backend: not a float dtype: ", dtype_name(dtype));
  }
}

// ---- reductions (fixed order for a fixed block size: a row's bits do not depend on the batch)
// ----
__device__ __forceinline__ float warp_sum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(kFullMask, v, o);
  return v;
}
__device__ __forceinline__ float warp_max(float v) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(kFullMask, v, o));
  return v;
}

// Block-wide sum / max for blockDim.x a multiple of 32; every thread gets the result.
// smem: 33 floats of shared memory; every thread of the block must call.
template <bool kMax>
__device__ __forceinline__ float block_reduce(float v, float* smem) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int warps = static_cast<int>(blockDim.x >> 5);
  v = kMax ? warp_max(v) : warp_sum(v);
  __syncthreads();  // smem may still be read by the caller's previous reduction
  if (lane == 0) smem[warp] = v;
  __syncthreads();
  if (warp == 0) {
    const float identity = kMax ? -INFINITY : 0.0f;
    float t = lane < warps ? smem[lane] : identity;
    t = kMax ? warp_max(t) : warp_sum(t);
    if (lane == 0) smem[32] = t;
  }
  __syncthreads();
  return smem[32];
}
__device__ __forceinline__ float block_sum(float v, float* smem) {
  return block_reduce<false>(v, smem);
}
__device__ __forceinline__ float block_max(float v, float* smem) {
  return block_reduce<true>(v, smem);
}

// ---- launches ----
constexpr int kThreads = 256;
// Blocks for a grid-stride loop over n elements (capped: each thread then loops).
inline unsigned grid_for(int64_t n) {
  const int64_t blocks = (n + kThreads - 1) / kThreads;
  return static_cast<unsigned>(blocks < 1 ? 1 : (blocks > (1 << 20) ? (1 << 20) : blocks));
}
// Threads for a block that walks one row of `n` elements: a multiple of 32 in [32, 256].
inline unsigned row_threads(int64_t n) {
  int64_t t = (n + 31) / 32 * 32;
  return static_cast<unsigned>(t < 32 ? 32 : (t > 256 ? 256 : t));
}

// n 32-bit words from a 4n-byte aligned address (n = 1, 2, 4: one load).
template <int N>
__device__ __forceinline__ void load_words(const void* p, uint32_t (&w)[N]) {
  if constexpr (N == 1) {
    w[0] = *reinterpret_cast<const uint32_t*>(p);
  } else if constexpr (N == 2) {
    const uint2 x = *reinterpret_cast<const uint2*>(p);
    w[0] = x.x;
    w[1] = x.y;
  } else {
    static_assert(N == 4, "load_words: 1, 2 or 4 words");
    const uint4 x = *reinterpret_cast<const uint4*>(p);
    w[0] = x.x;
    w[1] = x.y;
    w[2] = x.z;
    w[3] = x.w;
  }
}

// ---- device-side errors ----
__device__ __forceinline__ void report_error(DeviceErrorRecord* rec, DeviceErrorCode code,
                                             long long index, long long value, long long bound) {
  if (atomicCAS(&rec->code, 0, static_cast<int>(code)) == 0) {
    rec->index = index;
    rec->value = value;
    rec->bound = bound;
  }
}

}  // namespace ringlm::cuda::device
