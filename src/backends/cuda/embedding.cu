// embedding on the GPU: out[m] = table[ids[m]] · scale, one block per token. A token id outside
// the vocabulary leaves its row NaN and is reported by cuda::synchronize().
#include <cmath>
#include <cstdint>

#include "backends/cuda/cuda_ops.h"
#include "backends/cuda/device/common.cuh"

namespace ringlm::cuda {

namespace {

template <typename T>
__global__ void embedding_kernel(const int32_t* ids, const T* table, int64_t vocab, int64_t H,
                                 float scale, float* out, int64_t ld_out,
                                 DeviceErrorRecord* errors) {
  const int64_t m = blockIdx.x;
  const int32_t id = ids[m];
  float* dst = out + m * ld_out;
  if (id < 0 || id >= vocab) {
    if (threadIdx.x == 0) device::report_error(errors, DeviceErrorCode::EmbeddingId, m, id, vocab);
    for (int64_t h = threadIdx.x; h < H; h += blockDim.x) dst[h] = NAN;
    return;
  }
  const T* src = table + id * H;
  for (int64_t h = threadIdx.x; h < H; h += blockDim.x) dst[h] = device::to_f32(src[h]) * scale;
}

}  // namespace

void embedding(const Tensor& ids, const Tensor& table, float scale, Tensor& out) {
  const int64_t M = ids.shape[0];
  if (M == 0) return;
  RINGLM_CHECK(M <= INT32_MAX, "embedding: too many tokens: ", M);
  Context& ctx = Context::get();
  device::dispatch_float(table.dtype, [&]<typename T>(T*) {
    embedding_kernel<T>
        <<<static_cast<unsigned>(M), device::row_threads(table.shape[1]), 0, ctx.stream()>>>(
            ids.ptr<const int32_t>(), table.ptr<const T>(), table.shape[0], table.shape[1], scale,
            out.ptr<float>(), out.strides[0], ctx.errors());
  });
  check_launch("embedding_kernel");
}

}  // namespace ringlm::cuda
