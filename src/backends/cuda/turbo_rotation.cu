// The deferred inverse rotation of TurboQuant attention outputs on the GPU: x = signs ⊙ H(x)/√d
// per row, one warp per row, bit for bit kv::turbo_unrotate (same butterfly network and stage
// order, the product (x·norm)·sign as the codec).
#include <cstdint>

#include "backends/cuda/cuda_ops.h"
#include "backends/cuda/device/attention_common.cuh"
#include "backends/cuda/device/common.cuh"
#include "backends/cuda/device/quant_common.cuh"
#include "backends/cuda/quantized_kv.h"
#include "kv/turbo_codec.h"

namespace ringlm::cuda {

namespace {

constexpr int kWarpsPerBlock = 4;

template <int kSlots>
__global__ void __launch_bounds__(kWarpsPerBlock * 32)
    unrotate_kernel(float* x,  // F32[rows = T·heads, 32·kSlots]
                    int64_t rows, int heads, const float* signs, const TokenPositions only) {
  constexpr int kDim = 32 * kSlots;
  const int64_t r = int64_t{blockIdx.x} * kWarpsPerBlock + (threadIdx.x >> 5);
  if (r >= rows) return;  // the whole warp
  if (only.query_start != nullptr) {
    const int pos = device::locate_query(only.query_start, only.context_len, only.num_rows,
                                         static_cast<int>(r / heads))
                        .pos;
    if (pos < only.begin || pos >= only.end) return;
  }
  const int lane = static_cast<int>(threadIdx.x) & 31;
  float* row = x + r * kDim;
  float y[kSlots];
#pragma unroll
  for (int c = 0; c < kSlots; ++c) y[c] = row[c * 32 + lane];
  device::store_unrotated<kSlots>(y, signs, row);
}

}  // namespace

void turbo_unrotate_rows(Tensor& x, const TokenPositions& only) {
  const int D = static_cast<int>(x.shape[x.ndim - 1]);
  const int heads = x.ndim >= 2 ? static_cast<int>(x.shape[x.ndim - 2]) : 1;
  const int64_t rows = x.numel() / D;
  if (rows == 0) return;
  kv::validate_turbo(8, 3, D);  // head_dim only
  const float* signs = turbo_signs_on_device(D);
  Context& ctx = Context::get();
  const auto blocks = static_cast<unsigned>((rows + kWarpsPerBlock - 1) / kWarpsPerBlock);
  const auto launch = [&]<int kSlots>() {
    unrotate_kernel<kSlots><<<blocks, kWarpsPerBlock * 32, 0, ctx.stream()>>>(x.ptr<float>(), rows,
                                                                              heads, signs, only);
  };
  device::with_turbo_slots(D, launch);
  check_launch("unrotate_kernel");
}

}  // namespace ringlm::cuda
