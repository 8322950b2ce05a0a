// The decode GEMV: y = x · wᵀ (+ bias) for M <= kGemvMaxRows rows and BF16/F16 weights, streaming
// w once at close to HBM bandwidth (gemv.h says why M <= 2 and what the precision is).
//
// A block owns kCols = 4 output columns and all M rows. Its 256 threads split K into chunks of 8
// values (one 16-byte load per weight row): thread t takes chunks t, t + 256, ... Per chunk it
// loads the 4 columns' weights (two chunks at a time, so 8 loads are in flight before the first
// use), x's 8 values of each row (f32, L1/L2-resident, rounded to the weights' dtype in
// registers) and accumulates M × 4 FMA chains. The block then reduces the 256 partial sums of each
// output in a fixed order (device/gemv_common.cuh). N = 1024 gives 256 blocks: two per SM.
#include <cstdint>

#include "backends/cuda/cuda_ops.h"
#include "backends/cuda/device/common.cuh"
#include "backends/cuda/device/gemv_common.cuh"
#include "backends/cuda/gemv.h"

namespace ringlm::cuda {

namespace {

using device::AnyFloat;

constexpr int kThreads = 256;
constexpr int kCols = 4;
constexpr int kChunk = 8;  // weights per 16-byte load

struct GemvArgs {
  const float* x;  // F32[M, K], row stride ldx
  int64_t ldx;
  bool x_vec;     // every x row 16-byte aligned: float4 loads
  const void* w;  // T[N, K]
  AnyFloat bias;  // [N] or null
  float* y;       // F32[M, N], row stride ldy
  int64_t ldy;
  int64_t N, K;
};

// The two T values packed in a 32-bit word, widened exactly to f32.
__device__ __forceinline__ void widen2(uint32_t v, __nv_bfloat16*, float& lo, float& hi) {
  lo = __uint_as_float(v << 16);
  hi = __uint_as_float(v & 0xffff0000u);
}
__device__ __forceinline__ void widen2(uint32_t v, __half*, float& lo, float& hi) {
  lo = __half2float(__ushort_as_half(static_cast<unsigned short>(v & 0xffffu)));
  hi = __half2float(__ushort_as_half(static_cast<unsigned short>(v >> 16)));
}

// acc[m][c] += Σ_j x[m][j]·w[c][j] for one chunk, j in order (each a single FMA chain).
template <typename T, int M>
__device__ __forceinline__ void accumulate_chunk(const GemvArgs& a, int64_t chunk,
                                                 const uint4 (&wv)[kCols], float (&acc)[M][kCols]) {
  float wf[kCols][kChunk];
#pragma unroll
  for (int c = 0; c < kCols; ++c) {
    widen2(wv[c].x, static_cast<T*>(nullptr), wf[c][0], wf[c][1]);
    widen2(wv[c].y, static_cast<T*>(nullptr), wf[c][2], wf[c][3]);
    widen2(wv[c].z, static_cast<T*>(nullptr), wf[c][4], wf[c][5]);
    widen2(wv[c].w, static_cast<T*>(nullptr), wf[c][6], wf[c][7]);
  }
#pragma unroll
  for (int m = 0; m < M; ++m) {
    float xv[kChunk];
    device::load_x8(a.x + m * a.ldx + chunk * kChunk, a.x_vec, xv);
#pragma unroll
    for (int j = 0; j < kChunk; ++j) xv[j] = device::to_f32(device::from_f32<T>(xv[j]));
#pragma unroll
    for (int c = 0; c < kCols; ++c) {
#pragma unroll
      for (int j = 0; j < kChunk; ++j) acc[m][c] = fmaf(xv[j], wf[c][j], acc[m][c]);
    }
  }
}

template <typename T, int M>
__global__ void __launch_bounds__(kThreads, 2) gemv_kernel(GemvArgs a) {
  __shared__ float partials[(kThreads / 32) * M * kCols];
  const int64_t n0 = blockIdx.x * int64_t{kCols};
  const int64_t chunks = a.K / kChunk;
  // Columns past N (last block only) re-read column N - 1 and are never stored.
  const uint4* rows[kCols];
#pragma unroll
  for (int c = 0; c < kCols; ++c) {
    const int64_t n = n0 + c < a.N ? n0 + c : a.N - 1;
    rows[c] = reinterpret_cast<const uint4*>(static_cast<const T*>(a.w) + n * a.K);
  }
  float acc[M][kCols];
#pragma unroll
  for (int m = 0; m < M; ++m) {
#pragma unroll
    for (int c = 0; c < kCols; ++c) acc[m][c] = 0.0f;
  }
  // Two chunks per iteration, loads first; the accumulation order stays chunk by chunk.
  for (int64_t ch = threadIdx.x; ch < chunks; ch += 2 * kThreads) {
    const int64_t ch2 = ch + kThreads;
    const bool second = ch2 < chunks;
    uint4 w0[kCols], w1[kCols];
#pragma unroll
    for (int c = 0; c < kCols; ++c) {
      w0[c] = __ldcs(rows[c] + ch);  // streamed once: evict-first
      w1[c] = second ? __ldcs(rows[c] + ch2) : make_uint4(0, 0, 0, 0);
    }
    accumulate_chunk<T, M>(a, ch, w0, acc);
    if (second) accumulate_chunk<T, M>(a, ch2, w1, acc);
  }
  device::reduce_tile_to_y<M, kCols, kThreads>(acc, partials, n0, a.N, a.bias, a.y, a.ldy);
}

template <typename T, int M>
void launch(const GemvArgs& a, cudaStream_t stream) {
  const auto blocks = static_cast<unsigned>((a.N + kCols - 1) / kCols);
  gemv_kernel<T, M><<<blocks, kThreads, 0, stream>>>(a);
}

template <typename T>
void launch_rows(int64_t M, const GemvArgs& a, cudaStream_t stream) {
  switch (M) {
    case 1:
      return launch<T, 1>(a, stream);
    case 2:
      return launch<T, 2>(a, stream);
    default:
      RINGLM_FAIL("gemv: ", M, " rows (at most ", kGemvMaxRows, ")");
  }
}

bool aligned16(const void* p) {
  return reinterpret_cast<uintptr_t>(p) % 16 == 0;
}

}  // namespace

int64_t leading_dim(const Tensor& t) {
  const int64_t cols = t.shape[1];
  return t.shape[0] <= 1 ? (t.strides[0] >= cols ? t.strides[0] : cols) : t.strides[0];
}

bool gemv_applies(const Tensor& x, const Tensor& w) {
  const int64_t M = x.shape[0], K = x.shape[1];
  return M >= 1 && M <= kGemvMaxRows && (w.dtype == DType::BF16 || w.dtype == DType::F16) &&
         K % kChunk == 0 && aligned16(w.data);
}

void gemv(const Tensor& x, const Tensor& w, const Tensor& bias, Tensor& y) {
  const int64_t M = x.shape[0], ldx = leading_dim(x);
  GemvArgs a{x.ptr<const float>(),
             ldx,
             aligned16(x.data) && ldx % 4 == 0,
             w.data,
             AnyFloat{bias.empty() ? nullptr : bias.data, bias.dtype},
             y.ptr<float>(),
             leading_dim(y),
             w.shape[0],
             w.shape[1]};
  cudaStream_t stream = Context::get().stream();
  if (w.dtype == DType::BF16) {
    launch_rows<__nv_bfloat16>(M, a, stream);
  } else {
    launch_rows<__half>(M, a, stream);
  }
  check_launch("gemv_kernel");
}

}  // namespace ringlm::cuda
