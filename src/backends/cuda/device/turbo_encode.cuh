// The TurboQuant encode of one (token, kv head) K/V row by one warp: the bytes of
// kv::turbo_key_quantize and kv::turbo_value_quantize (kv/turbo_codec.h) for finite inputs, by
// the rules kv_write_quantized.cu's header lists (one IEEE operation for one, the codec's
// butterflies and summation order, std::upper_bound's cell). Lane l holds dims l, l + 32, ...
// Used by kv_write (kv_write_quantized.cu) and by prepare_attention's fused write
// (attention_inputs.cu).
#pragma once

#include <cuda_fp16.h>

#include <cstdint>

#include "backends/cuda/device/common.cuh"
#include "backends/cuda/device/quant_common.cuh"
#include "backends/cuda/quantized_kv.h"
#include "core/error.h"
#include "kv/turbo_codec.h"

namespace ringlm::cuda::device {

struct TurboPlanes {
  uint8_t* k;           // U8[rows, head_dim·key_bits/8]
  uint8_t* v;           // U8[rows, head_dim·value_bits/8]
  __half* k_scales;     // F16[rows, head_dim/32]
  __half* k_zeros;      // F16[rows, head_dim/32]
  __half* v_scales;     // F16[rows, head_dim/32]
  const float* bounds;  // F32[2^value_bits − 1], ascending
  const float* signs;   // F32[head_dim]
  int key_bits, value_bits;
};

constexpr int kMaxTurboBounds = 255;  // 2^8 − 1 Lloyd-Max boundaries

__device__ __forceinline__ float to_f16_and_back(float x) {
  return __half2float(__float2half_rn(x));
}

// One 32-dim group of keys (this lane's value x, dim 32·g + lane). kBits > 0 fixes key_bits at
// compile time (the default k8v3): the packing loop unrolls and the groups' chains interleave.
template <int kBits>
__device__ __forceinline__ void turbo_key_group(float x, int g, int head_dim, int64_t row,
                                                const TurboPlanes& out) {
  const int lane = static_cast<int>(threadIdx.x) & 31;
  const int bits = kBits > 0 ? kBits : out.key_bits;
  const bool is_signed = bits == 8;
  const float qmax = is_signed ? 127.0f : static_cast<float>((1 << bits) - 1);
  const float qmin = is_signed ? -127.0f : 0.0f;
  // std::minmax_element: the first minimum and the last maximum.
  const float mn = warp_extreme<false, false>(x, lane);
  const float mx = warp_extreme<true, true>(x, lane);
  float s = __fdiv_rn(__fsub_rn(mx, mn), is_signed ? 254.0f : qmax);
  if (!(s > 0)) s = mx != 0 ? __fdiv_rn(fabsf(mx), qmax) : 1.0f;
  const float floor_s =
      __fdiv_rn(is_signed ? __fdiv_rn(fabsf(__fadd_rn(mx, mn)), 2.0f) : fabsf(mn), 2000.0f);
  s = s < floor_s ? floor_s : s;  // std::max(s, floor_s)
  s = to_f16_and_back(s);
  if (!(s > 0)) s = 6.0e-8f;
  const float z = to_f16_and_back(
      rintf(is_signed ? __fdiv_rn(__fadd_rn(mx, mn), __fmul_rn(2.0f, s)) : __fdiv_rn(mn, s)));
  const float q = fminf(fmaxf(rintf(__fsub_rn(__fdiv_rn(x, s), z)), qmin), qmax);
  const uint32_t code = static_cast<uint32_t>(static_cast<int>(q)) & ((1u << bits) - 1u);
  const int groups = head_dim / 32;
  uint8_t* codes = out.k + row * (head_dim * bits / 8);
  if (bits == 8) {
    codes[32 * g + lane] = static_cast<uint8_t>(code);  // byte d is dim d's code: no packing
  } else {
    // The group's codes are `bits` whole words: 32·bits bits from byte 4·bits·g of the row.
    const uint32_t word = warp_pack_codes(code, bits);
    if (lane < bits) reinterpret_cast<uint32_t*>(codes)[g * bits + lane] = word;
  }
  if (lane == 0) {
    out.k_scales[row * groups + g] = __float2half_rn(s);
    out.k_zeros[row * groups + g] = __float2half_rn(z);
  }
}

// One row of values: the rotation, then per 32-dim group its RMS scale and each dim's Lloyd-Max
// cell — std::upper_bound's (first boundary > u) as a fixed-depth search over `bounds` (2^bits − 1
// entries in shared memory). Every slot's step runs before the next step, so the slots' latency
// chains (the sequential Σ y², the search) overlap.
template <int kSlots, int kBits>
__device__ __forceinline__ void turbo_value_row(const float* src,  // F32[head_dim = 32·kSlots]
                                                int64_t row, const TurboPlanes& out,
                                                const float* bounds) {
  constexpr int kDim = 32 * kSlots;
  const int lane = static_cast<int>(threadIdx.x) & 31;
  const int bits = kBits > 0 ? kBits : out.value_bits;
  float y[kSlots];
#pragma unroll
  for (int c = 0; c < kSlots; ++c) y[c] = __fmul_rn(src[c * 32 + lane], out.signs[c * 32 + lane]);
  warp_fwht<kSlots>(y);
  const float norm = turbo_norm(kDim);
  float s[kSlots], u[kSlots];
#pragma unroll
  for (int c = 0; c < kSlots; ++c) {
    y[c] = __fmul_rn(y[c], norm);
    float sum = 0.0f;  // in dim order, as the codec's loop
#pragma unroll
    for (int j = 0; j < 32; ++j) {
      const float w = __shfl_sync(kFullMask, y[c], j);
      sum = __fadd_rn(sum, __fmul_rn(w, w));
    }
    s[c] = __fsqrt_rn(__fdiv_rn(sum, 32.0f));
    u[c] = __fdiv_rn(y[c], __fadd_rn(s[c], 1e-8f));
  }
  // The number of boundaries b with !(u < b): upper_bound's index, the bounds being ascending.
  uint32_t cell[kSlots];
#pragma unroll
  for (int c = 0; c < kSlots; ++c) cell[c] = 0;
#pragma unroll
  for (int step = 1 << (bits - 1); step > 0; step >>= 1) {
#pragma unroll
    for (int c = 0; c < kSlots; ++c)
      if (!(u[c] < bounds[cell[c] + step - 1])) cell[c] += step;
  }
  uint8_t* codes = out.v + row * (kDim * bits / 8);
#pragma unroll
  for (int c = 0; c < kSlots; ++c) {
    if (bits == 8) {
      codes[32 * c + lane] = static_cast<uint8_t>(cell[c]);
    } else {
      const uint32_t word = warp_pack_codes(cell[c], bits);
      if (lane < bits) reinterpret_cast<uint32_t*>(codes)[c * bits + lane] = word;
    }
    if (lane == 0) out.v_scales[row * kSlots + c] = __float2half_rn(s[c]);
  }
}

// The block copies the value boundaries into `bounds` (shared, kMaxTurboBounds floats); the
// caller syncs the block before any warp reads them.
template <int kValueBits>
__device__ __forceinline__ void load_turbo_bounds(const TurboPlanes& out, float* bounds) {
  const int value_bits = kValueBits > 0 ? kValueBits : out.value_bits;
  for (int i = static_cast<int>(threadIdx.x); i < (1 << value_bits) - 1;
       i += static_cast<int>(blockDim.x))
    bounds[i] = out.bounds[i];
}

// One row: this lane's keys k[g] (dim 32·g + lane), the values from v (F32[32·kSlots]), into
// cache row `row` (slot · kv_heads + kv head). kKeyBits / kValueBits > 0 fix the widths at compile
// time (k8v3, the default); 0 reads the planes'.
template <int kSlots, int kKeyBits, int kValueBits>
__device__ __forceinline__ void turbo_encode_row(const float (&k)[kSlots], const float* v,
                                                 int64_t row, const TurboPlanes& out,
                                                 const float* bounds) {
#pragma unroll
  for (int g = 0; g < kSlots; ++g) turbo_key_group<kKeyBits>(k[g], g, 32 * kSlots, row, out);
  turbo_value_row<kSlots, kValueBits>(v, row, out, bounds);
}

// Host side: the planes of a TurboQuant view (its formats validated, its code planes checked for
// the 4-byte stores).
inline TurboPlanes turbo_planes(const ops::KvLayerView& kv) {
  const int D = static_cast<int>(kv.head_dim());
  kv::validate_turbo(kv.bits, kv.value_bits, D);
  for (const Tensor* t : {&kv.k, &kv.v})
    RINGLM_CHECK(reinterpret_cast<uintptr_t>(t->data) % 4 == 0,
                 "kv_write: CUDA TurboQuant code plane at ", t->data, " is not 4-byte aligned");
  TurboPlanes out{};
  out.k = static_cast<uint8_t*>(kv.k.data);
  out.v = static_cast<uint8_t*>(kv.v.data);
  out.k_scales = static_cast<__half*>(kv.k_scales.data);
  out.k_zeros = static_cast<__half*>(kv.k_biases.data);
  out.v_scales = static_cast<__half*>(kv.v_scales.data);
  out.bounds = turbo_boundaries_on_device(kv.value_bits);
  out.signs = turbo_signs_on_device(D);
  out.key_bits = kv.bits;
  out.value_bits = kv.value_bits;
  return out;
}

// Host side: launch.template operator()<kSlots, kKeyBits, kValueBits>() for the view's head dim
// and widths (k8v3 fixed at compile time, other widths read at run time).
template <typename Launch>
void with_turbo_write(const ops::KvLayerView& kv, const Launch& launch) {
  const bool k8v3 = kv.bits == 8 && kv.value_bits == 3;
  with_turbo_slots(static_cast<int>(kv.head_dim()), [&]<int kSlots>() {
    if (k8v3) {
      launch.template operator()<kSlots, 8, 3>();
    } else {
      launch.template operator()<kSlots, 0, 0>();
    }
  });
}

}  // namespace ringlm::cuda::device
