// CPU K/V scatter: token t's K and V rows go to slot slots[t] of the paged cache, converted from
// f32 to the cache dtype (round to nearest even, as torch's .to()).
#include <cstddef>
#include <cstdint>

#include "backends/cpu/cpu_ops.h"
#include "core/thread_pool.h"

namespace ringlm::cpu {

namespace {
void store_row(const float* src, size_t n, DType dtype, void* dst) {
  switch (dtype) {
    case DType::F32: {
      auto* d = static_cast<float*>(dst);
      for (size_t i = 0; i < n; ++i) d[i] = src[i];
      return;
    }
    case DType::BF16: {
      auto* d = static_cast<bf16_t*>(dst);
      for (size_t i = 0; i < n; ++i) d[i] = f32_to_bf16(src[i]);
      return;
    }
    case DType::F16: {
      auto* d = static_cast<f16_t*>(dst);
      for (size_t i = 0; i < n; ++i) d[i] = f32_to_f16(src[i]);
      return;
    }
    default:
      RINGLM_FAIL("kv_write: unsupported cache dtype ", dtype_name(dtype));
  }
}
}  // namespace

void kv_write(const Tensor& k, const Tensor& v, const Tensor& slots, ops::KvLayerView& kv) {
  const auto T = k.shape[0];
  const size_t row = static_cast<size_t>(k.shape[1] * k.shape[2]);  // kv_heads * head_dim
  const size_t elem = dtype_size(kv.k.dtype);
  ThreadPool::global().parallel_for(T, 16, [&](int64_t b, int64_t e) {
    for (int64_t t = b; t < e; ++t) {
      const auto slot = static_cast<size_t>(slots.ptr<const int32_t>()[t]);
      store_row(k.row<float>(t), row, kv.k.dtype,
                static_cast<char*>(kv.k.data) + slot * row * elem);
      store_row(v.row<float>(t), row, kv.v.dtype,
                static_cast<char*>(kv.v.data) + slot * row * elem);
    }
  });
}

}  // namespace ringlm::cpu
