// decode_kv_rows: the KV readers' output for every row of a view, N dims per call — what the
// attention kernels see, exposed so that tests can hold each reader path (N = 1, 4, 8) against
// the CPU codecs.
#include <cstdint>

#include "backends/cuda/cuda_ops.h"
#include "backends/cuda/device/common.cuh"
#include "backends/cuda/device/kv_readers.cuh"
#include "backends/cuda/quantized_kv.h"

namespace ringlm::cuda {

namespace {

// One thread per (row, N consecutive dims).
template <typename Kv, int N>
__global__ void decode_kernel(const Kv kv, int64_t rows, int head_dim,
                              float* keys,      // F32[rows, head_dim]
                              float* values) {  // F32[rows, head_dim]
  const int64_t per_row = head_dim / N;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < rows * per_row;
       i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t row = i / per_row;
    const int d0 = static_cast<int>(i % per_row) * N;
    float k[N], v[N];
    kv.template key<N>(row, d0, k);
    kv.template value<N>(row, d0, v);
#pragma unroll
    for (int j = 0; j < N; ++j) {
      keys[row * head_dim + d0 + j] = k[j];
      values[row * head_dim + d0 + j] = v[j];
    }
  }
}

}  // namespace

void decode_kv_rows(const ops::KvLayerView& kv, int dims_per_read, Tensor& keys, Tensor& values) {
  const int D = kv.head_dim();
  const int64_t rows = kv.k.shape[0] * kv.k.shape[1] * kv.k.shape[2];
  RINGLM_CHECK(dims_per_read == 1 || dims_per_read == 4 || dims_per_read == 8,
               "decode_kv_rows: dims_per_read ", dims_per_read, " is not 1, 4 or 8");
  RINGLM_CHECK(D % dims_per_read == 0, "decode_kv_rows: head_dim ", D, " is not a multiple of ",
               dims_per_read);
  RINGLM_CHECK(keys.numel() == rows * D && values.numel() == rows * D,
               "decode_kv_rows: outputs must hold ", rows, " rows of ", D);
  if (rows == 0) return;
  Context& ctx = Context::get();
  const unsigned grid = device::grid_for(rows * D / dims_per_read);
  device::with_kv_reader(kv, [&]<typename Kv>(const Kv& reader) {
    const auto launch = [&]<int N>() {
      decode_kernel<Kv, N><<<grid, device::kThreads, 0, ctx.stream()>>>(
          reader, rows, D, keys.ptr<float>(), values.ptr<float>());
    };
    if (dims_per_read == 1) {
      launch.template operator()<1>();
    } else if (dims_per_read == 4) {
      launch.template operator()<4>();
    } else {
      launch.template operator()<8>();
    }
  });
  check_launch("decode_kernel");
}

}  // namespace ringlm::cuda
