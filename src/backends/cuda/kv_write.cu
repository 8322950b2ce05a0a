// kv_write on the GPU: token t's K/V rows go to cache slot slots[t], rounded to the cache dtype
// (nearest even, as ops/reference.cc's f32_to_bf16 / f32_to_f16 for finite values); affine and
// TurboQuant views are quantized by kv_write_quantized.cu. A slot outside the cache skips the
// token and is reported by cuda::synchronize().
#include <cstdint>

#include "backends/cuda/cuda_ops.h"
#include "backends/cuda/device/common.cuh"
#include "backends/cuda/quantized_kv.h"

namespace ringlm::cuda {

namespace {

template <typename T>
__global__ void kv_write_kernel(const float* k, const float* v, const int32_t* slots, int64_t T_,
                                int64_t row, int64_t capacity, T* kc, T* vc,
                                DeviceErrorRecord* errors) {
  const int64_t total = T_ * row;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < total;
       i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t t = i / row, e = i % row;
    const int32_t slot = slots[t];
    if (slot < 0 || slot >= capacity) {
      if (e == 0) device::report_error(errors, DeviceErrorCode::KvSlot, t, slot, capacity);
      continue;
    }
    const int64_t dst = slot * row + e;
    kc[dst] = device::from_f32<T>(k[i]);
    vc[dst] = device::from_f32<T>(v[i]);
  }
}

}  // namespace

void kv_write(const Tensor& k, const Tensor& v, const Tensor& slots, ops::KvLayerView& kv) {
  if (!kv.dense()) return kv_write_quantized(k, v, slots, kv);  // kv_write_quantized.cu
  const int64_t T = k.shape[0], row = k.shape[1] * k.shape[2];
  if (T == 0 || row == 0) return;
  const int64_t capacity = kv.k.shape[0] * kv.k.shape[1];
  Context& ctx = Context::get();
  device::dispatch_float(kv.k.dtype, [&]<typename C>(C*) {
    kv_write_kernel<C><<<device::grid_for(T * row), device::kThreads, 0, ctx.stream()>>>(
        k.ptr<const float>(), v.ptr<const float>(), slots.ptr<const int32_t>(), T, row, capacity,
        kv.k.ptr<C>(), kv.v.ptr<C>(), ctx.errors());
  });
  check_launch("kv_write_kernel");
}

}  // namespace ringlm::cuda
