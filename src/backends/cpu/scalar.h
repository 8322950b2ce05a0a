// Scalar storage-type helpers for the CPU kernels (tails and non-SIMD paths).
#pragma once

#include <cstddef>

#include <hwy/base.h>

#include "core/dtype.h"

namespace ringlm::cpu {

inline float to_f32(float v) {
  return v;
}
inline float to_f32(hwy::bfloat16_t v) {
  return bf16_to_f32(v.bits);
}
inline float to_f32(hwy::float16_t v) {
  return f16_to_f32(v.bits);
}

// Calls fn(static_cast<const T*>(data)) with T the storage type of a float dtype.
template <typename Fn>
void visit_float_storage(DType dtype, const void* data, Fn&& fn) {
  switch (dtype) {
    case DType::F32:
      fn(static_cast<const float*>(data));
      return;
    case DType::BF16:
      fn(static_cast<const hwy::bfloat16_t*>(data));
      return;
    case DType::F16:
      fn(static_cast<const hwy::float16_t*>(data));
      return;
    default:
      break;
  }
  RINGLM_FAIL("not a float storage dtype: ", dtype_name(dtype));
}

// Widens n values of any float dtype into f32.
inline void widen_to_f32(DType dtype, const void* data, size_t n, float* out) {
  visit_float_storage(dtype, data, [&](const auto* p) {
    for (size_t i = 0; i < n; ++i) out[i] = to_f32(p[i]);
  });
}

}  // namespace ringlm::cpu
