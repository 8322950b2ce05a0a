// with_kv_reader(view, fn): builds the device/kv_load.cuh-style reader for a KV layer view and
// calls fn(reader) — one instantiation of the caller per reader type. The attention kernels
// (attention.cu, and any kernel reading K/V through readers) dispatch on the format here only.
//
// Readers: DenseKvReader<float | bf16 | f16>; AffineKvReader<4 | 8, 32 | 64>;
// TurboKvReader<8, 3> (the default k8v3) and TurboKvReader<0, 0> (every other kXvY, widths read
// at run time). Quantized planes must start 8-byte aligned (the N = 8 reads use 8-byte loads).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cstdint>

#include "backends/cuda/device/common.cuh"
#include "backends/cuda/device/kv_affine.cuh"
#include "backends/cuda/device/kv_load.cuh"
#include "backends/cuda/device/kv_turbo.cuh"
#include "backends/cuda/quantized_kv.h"
#include "kv/turbo_codec.h"

namespace ringlm::cuda::device {

inline void check_quantized_planes_aligned(const ops::KvLayerView& kv) {
  const auto aligned = [](const Tensor& t, uintptr_t a) {
    return reinterpret_cast<uintptr_t>(t.data) % a == 0;
  };
  RINGLM_CHECK(aligned(kv.k, 8) && aligned(kv.v, 8),
               "CUDA quantized KV: the code planes must start "
               "8-byte aligned (k at ",
               kv.k.data, ", v at ", kv.v.data, ")");
}

template <typename Fn>
void with_kv_reader(const ops::KvLayerView& kv, Fn&& fn) {
  const int D = kv.head_dim();
  if (kv.dense()) {
    dispatch_float(kv.k.dtype, [&]<typename C>(C*) {
      fn(DenseKvReader<C>{kv.k.ptr<const C>(), kv.v.ptr<const C>(), D});
    });
    return;
  }
  check_quantized_planes_aligned(kv);
  if (kv.turbo()) {
    kv::validate_turbo(kv.bits, kv.value_bits, D);
    const auto make = [&]<int kKey, int kValue>() {
      TurboKvReader<kKey, kValue> r{};
      r.k = kv.k.ptr<const uint8_t>();
      r.v = kv.v.ptr<const uint8_t>();
      r.k_scales = static_cast<const __half*>(kv.k_scales.data);
      r.k_zeros = static_cast<const __half*>(kv.k_biases.data);
      r.v_scales = static_cast<const __half*>(kv.v_scales.data);
      r.centroids = turbo_centroids_on_device(kv.value_bits);
      if (kv.value_bits <= 3) {
        const std::vector<float>& c = kv::lloyd_max_centroids(kv.value_bits);
        std::copy(c.begin(), c.end(), r.codebook);
      }
      r.head_dim = D;
      r.key_bits = kv.bits;
      r.value_bits = kv.value_bits;
      return r;
    };
    if (kv.bits == 8 && kv.value_bits == 3) {
      fn(make.template operator()<8, 3>());
    } else {
      fn(make.template operator()<0, 0>());
    }
    return;
  }
  const auto affine = [&]<int kBits, int kGroup>() {
    fn(AffineKvReader<kBits, kGroup>{kv.k.ptr<const uint32_t>(), kv.v.ptr<const uint32_t>(),
                                     static_cast<const __nv_bfloat16*>(kv.k_scales.data),
                                     static_cast<const __nv_bfloat16*>(kv.k_biases.data),
                                     static_cast<const __nv_bfloat16*>(kv.v_scales.data),
                                     static_cast<const __nv_bfloat16*>(kv.v_biases.data), D});
  };
  const int b = kv.bits, g = kv.group_size;
  if (b == 4 && g == 32) return affine.template operator()<4, 32>();
  if (b == 4 && g == 64) return affine.template operator()<4, 64>();
  if (b == 8 && g == 32) return affine.template operator()<8, 32>();
  if (b == 8 && g == 64) return affine.template operator()<8, 64>();
  RINGLM_USER_CHECK(false, "affine KV on CUDA: bits ", b, " with group_size ", g,
                    " (supported: 4 or 8 bits, groups of 32 or 64)");
}

}  // namespace ringlm::cuda::device
