// embedding on the GPU: out[m] = table[ids[m]] · scale, one block per token, for a dense or an
// MLX affine-quantized table. A token id outside the vocabulary leaves its row NaN and is reported
// by cuda::synchronize().
#include <cmath>
#include <cstdint>

#include "backends/cuda/cuda_ops.h"
#include "backends/cuda/device/affine_unpack.cuh"
#include "backends/cuda/device/common.cuh"
#include "backends/cuda/device/pdl.cuh"

namespace ringlm::cuda {

namespace {

template <typename T>
__global__ void embedding_kernel(const int32_t* ids, const T* table, int64_t vocab, int64_t H,
                                 float scale, float* out, int64_t ld_out,
                                 DeviceErrorRecord* errors) {
  device::wait_prior_grid();
  device::launch_dependents();
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

struct QuantTable {
  const uint32_t* codes;  // U32[V, row_words]
  int64_t row_words;
  device::AnyFloat scales;  // [V, groups]
  device::AnyFloat biases;
  int64_t groups;
  int group_size;
  int64_t vocab, H;
};

// Threads walk the row's chunks of 32 codes; each value is dequantized as the CPU does
// (kv::affine_dequantize, then · scale when scale != 1), so the row matches it bit for bit.
template <int BITS>
__global__ void embedding_quantized_kernel(const int32_t* ids, QuantTable t, float scale,
                                           float* out, int64_t ld_out, DeviceErrorRecord* errors) {
  const int64_t m = blockIdx.x;
  const int32_t id = ids[m];
  float* dst = out + m * ld_out;
  if (id < 0 || id >= t.vocab) {
    if (threadIdx.x == 0)
      device::report_error(errors, DeviceErrorCode::EmbeddingId, m, id, t.vocab);
    for (int64_t h = threadIdx.x; h < t.H; h += blockDim.x) dst[h] = NAN;
    return;
  }
  const uint32_t* row = t.codes + id * t.row_words;
  for (int64_t ch = threadIdx.x; ch < t.H / device::kCodesPerChunk; ch += blockDim.x) {
    uint32_t words[BITS];
    device::load_chunk_words<BITS, false>(row + ch * BITS, words);
    const int64_t g = id * t.groups + ch * device::kCodesPerChunk / t.group_size;
    const float s = t.scales[g], b = t.biases[g];
    float q[device::kCodesPerChunk];
    device::chunk_codes<BITS, 0, device::kCodesPerChunk>(words, q);
#pragma unroll
    for (int j = 0; j < device::kCodesPerChunk; ++j) {
      const float v = device::dequant(s, q[j], b);
      dst[ch * device::kCodesPerChunk + j] = scale != 1.0f ? __fmul_rn(v, scale) : v;
    }
  }
}

}  // namespace

void embedding(const Tensor& ids, const Tensor& table, float scale, Tensor& out) {
  const int64_t M = ids.shape[0];
  if (M == 0) return;
  RINGLM_CHECK(M <= INT32_MAX, "embedding: too many tokens: ", M);
  Context& ctx = Context::get();
  device::dispatch_float(table.dtype, [&]<typename T>(T*) {
    launch_pdl(embedding_kernel<T>, dim3(static_cast<unsigned>(M)),
               dim3(device::row_threads(table.shape[1])), 0, ctx.stream(), ids.ptr<const int32_t>(),
               table.ptr<const T>(), table.shape[0], table.shape[1], scale, out.ptr<float>(),
               out.strides[0], ctx.errors());
  });
  check_launch("embedding_kernel");
}

}  // namespace ringlm::cuda

namespace ringlm::cuda {

void embedding_quantized(const Tensor& ids, const ops::QuantizedMatrix& table, float scale,
                         Tensor& out) {
  const int64_t M = ids.shape[0];
  if (M == 0) return;
  RINGLM_CHECK(M <= INT32_MAX, "embedding: too many tokens: ", M);
  Context& ctx = Context::get();
  const QuantTable t{table.codes.ptr<const uint32_t>(),
                     table.codes.shape[1],
                     device::AnyFloat{table.scales.data, table.scales.dtype},
                     device::AnyFloat{table.biases.data, table.biases.dtype},
                     table.scales.shape[1],
                     table.group_size,
                     table.rows(),
                     table.cols()};
  const unsigned threads = device::row_threads(t.H / device::kCodesPerChunk);
  device::dispatch_bits(table.bits, [&]<int BITS>() {
    embedding_quantized_kernel<BITS><<<static_cast<unsigned>(M), threads, 0, ctx.stream()>>>(
        ids.ptr<const int32_t>(), t, scale, out.ptr<float>(), out.strides[0], ctx.errors());
  });
  check_launch("embedding_quantized_kernel");
}

}  // namespace ringlm::cuda
