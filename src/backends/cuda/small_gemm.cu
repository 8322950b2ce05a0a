// The small-M tensor-core GEMM (small_gemm.h): y = x · wᵀ (+ bias) for 3..16 rows.
//
// Grid: (column blocks of 64, K splits). A block of 8 warps owns 64 columns and one K range of at
// most kMaxSplitK values. It first stages x's rows (rounded to T, rows past M zero) for that range
// in shared memory, then warp w streams the weight rows n0 + 8w .. n0 + 8w + 7: lane (g, c) reads
// 16 bytes of row n0 + 8w + g per chunk of 32 k values (k = 8c .. 8c + 7), eight chunks in flight.
// Two MMAs per chunk consume them with the k values permuted (the sum's order is ours to choose as
// long as x follows it): MMA 1 takes the lane's k pairs (8c, 8c+1) and (8c+2, 8c+3) as its slots
// (2c, 2c+1) and (2c+8, 2c+9), MMA 2 the pairs at 8c+4 and 8c+6; x's fragments come from the same
// 16 bytes of its shared-memory rows g and g + 8. With one split the block writes y (+ bias);
// otherwise each split writes its partial sums and small_gemm_reduce_kernel adds them in order.
#include <algorithm>
#include <cstdint>

#include "backends/cuda/cuda_ops.h"
#include "backends/cuda/device/common.cuh"
#include "backends/cuda/device/mma.cuh"
#include "backends/cuda/gemv.h"
#include "backends/cuda/small_gemm.h"

namespace ringlm::cuda {

namespace {

using device::AnyFloat;

constexpr int kWarps = 8, kThreads = 32 * kWarps;
constexpr int kBlockCols = 8 * kWarps;     // 64 columns per block
constexpr int kChunkK = 32;                // k values per lane group of 4 lanes × 16 bytes
constexpr int kInFlight = 8;               // chunks loaded before the first is consumed
constexpr int kMaxSplitK = 1024;           // x tile: 16 rows × (1024 + pad) × 2 bytes of smem
constexpr int kXStride = kMaxSplitK + 32;  // padded: rows g and g + 1 hit disjoint banks
constexpr int kRows = 16;

struct SmallGemmArgs {
  const float* x;  // F32[M, K], row stride ldx
  int64_t ldx;
  const void* w;  // T[N, K]
  AnyFloat bias;  // [N] or null
  float* y;       // F32[M, N], row stride ldy
  int64_t ldy;
  float* partials;  // [splits, M, N] when splits > 1
  int M;
  int64_t N, K;
  int splits;
  int64_t split_k;  // k values per split (a multiple of kChunkK)
};

template <typename T>
__global__ void __launch_bounds__(kThreads) small_gemm_kernel(const SmallGemmArgs a) {
  __shared__ __align__(16) T xs[kRows][kXStride];
  const int warp = static_cast<int>(threadIdx.x) >> 5, lane = static_cast<int>(threadIdx.x) & 31;
  const int g = lane >> 2, c = lane & 3;
  const int64_t k_begin = blockIdx.y * a.split_k;
  const int64_t k_len = std::min<int64_t>(a.split_k, a.K - k_begin);

  const int64_t n_lane = blockIdx.x * int64_t{kBlockCols} + 8 * warp + g;
  const int64_t n_read = n_lane < a.N ? n_lane : a.N - 1;  // past N: re-read, never stored
  const uint4* wrow =
      reinterpret_cast<const uint4*>(static_cast<const T*>(a.w) + n_read * a.K + k_begin + 8 * c);
  const int chunks = static_cast<int>(k_len / kChunkK);
  auto load = [&](uint4(&wv)[kInFlight], int ch0) {
#pragma unroll
    for (int j = 0; j < kInFlight; ++j)  // streamed once: evict-first
      wv[j] = ch0 + j < chunks ? __ldcs(wrow + (ch0 + j) * (kChunkK / 8)) : make_uint4(0, 0, 0, 0);
  };
  // The first weights are requested before x is staged: their latency overlaps the staging.
  uint4 current[kInFlight], next[kInFlight];
  load(current, 0);

  // Stage x[0..15][k_begin, k_begin + k_len) rounded to T (rows >= M: zeros).
  for (int64_t e = threadIdx.x; e < kRows * k_len; e += kThreads) {
    const int row = static_cast<int>(e / k_len);
    const int64_t k = e % k_len;
    const float v = row < a.M ? a.x[row * a.ldx + k_begin + k] : 0.0f;
    xs[row][k] = device::from_f32<T>(v);
  }
  __syncthreads();

  const uint4* xa = reinterpret_cast<const uint4*>(&xs[g][8 * c]);
  const uint4* xb = reinterpret_cast<const uint4*>(&xs[g + 8][8 * c]);
  float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
  for (int ch0 = 0; ch0 < chunks; ch0 += kInFlight) {
    load(next, ch0 + kInFlight);  // double buffer: the next chunks are in flight during the MMAs
#pragma unroll
    for (int j = 0; j < kInFlight; ++j) {
      if (ch0 + j >= chunks) break;
      const uint4 x_a = xa[(ch0 + j) * (kChunkK / 8)], x_b = xb[(ch0 + j) * (kChunkK / 8)];
      const uint32_t a1[4] = {x_a.x, x_b.x, x_a.y, x_b.y};
      const uint32_t a2[4] = {x_a.z, x_b.z, x_a.w, x_b.w};
      device::mma16816<T>(acc, a1, current[j].x, current[j].y);
      device::mma16816<T>(acc, a2, current[j].z, current[j].w);
    }
#pragma unroll
    for (int j = 0; j < kInFlight; ++j) current[j] = next[j];
  }

  // acc: (row g, column 2c), (g, 2c + 1), (g + 8, 2c), (g + 8, 2c + 1) of the warp's 8 columns.
  const int64_t n_base = blockIdx.x * int64_t{kBlockCols} + 8 * warp + 2 * c;
#pragma unroll
  for (int e = 0; e < 4; ++e) {
    const int row = g + (e >= 2 ? 8 : 0);
    const int64_t n = n_base + (e & 1);
    if (row >= a.M || n >= a.N) continue;
    if (a.splits == 1) {
      a.y[row * a.ldy + n] = acc[e] + (a.bias.p == nullptr ? 0.0f : a.bias[n]);
    } else {
      a.partials[(blockIdx.y * int64_t{a.M} + row) * a.N + n] = acc[e];
    }
  }
}

// y[m, n] = Σ_s partials[s, m, n] (in split order) + bias[n].
__global__ void small_gemm_reduce_kernel(const SmallGemmArgs a) {
  const int64_t total = int64_t{a.M} * a.N;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < total;
       i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t m = i / a.N, n = i % a.N;
    float s = 0.0f;
    for (int p = 0; p < a.splits; ++p) s += a.partials[p * total + i];
    a.y[m * a.ldy + n] = s + (a.bias.p == nullptr ? 0.0f : a.bias[n]);
  }
}

// Splits of K for N columns: enough blocks to give every SM two (264), each split at most
// kMaxSplitK values; a function of (N, K) only, so a row's bits never depend on M.
int small_gemm_splits(int64_t N, int64_t K, int64_t* split_k) {
  const int64_t col_blocks = (N + kBlockCols - 1) / kBlockCols;
  const int64_t chunks = K / kChunkK;
  int64_t splits =
      std::max<int64_t>((K + kMaxSplitK - 1) / kMaxSplitK, (264 + col_blocks - 1) / col_blocks);
  splits = std::min(splits, chunks);
  const int64_t chunks_per_split = (chunks + splits - 1) / splits;
  *split_k = chunks_per_split * kChunkK;
  return static_cast<int>((K + *split_k - 1) / *split_k);
}

bool aligned16(const void* p) {
  return reinterpret_cast<uintptr_t>(p) % 16 == 0;
}

}  // namespace

bool small_gemm_applies(const Tensor& x, const Tensor& w) {
  const int64_t M = x.shape[0], K = x.shape[1];
  return M >= kSmallGemmMinRows && M <= kSmallGemmMaxRows &&
         (w.dtype == DType::BF16 || w.dtype == DType::F16) && K % kChunkK == 0 && K > 0 &&
         w.shape[0] > 0 && aligned16(w.data);
}

void small_gemm(const Tensor& x, const Tensor& w, const Tensor& bias, Tensor& y) {
  Context& ctx = Context::get();
  SmallGemmArgs a{};
  a.x = x.ptr<const float>();
  a.ldx = leading_dim(x);
  a.w = w.data;
  a.bias = AnyFloat{bias.empty() ? nullptr : bias.data, bias.dtype};
  a.y = y.ptr<float>();
  a.ldy = leading_dim(y);
  a.M = static_cast<int>(x.shape[0]);
  a.N = w.shape[0];
  a.K = w.shape[1];
  a.splits = small_gemm_splits(a.N, a.K, &a.split_k);
  if (a.splits > 1) {
    a.partials = static_cast<float*>(ctx.scratch(
        Scratch::GemmPartials,
        static_cast<size_t>(a.splits) * static_cast<size_t>(a.M * a.N) * sizeof(float)));
  }
  const dim3 grid(static_cast<unsigned>((a.N + kBlockCols - 1) / kBlockCols),
                  static_cast<unsigned>(a.splits));
  if (w.dtype == DType::BF16) {
    small_gemm_kernel<__nv_bfloat16><<<grid, kThreads, 0, ctx.stream()>>>(a);
  } else {
    small_gemm_kernel<__half><<<grid, kThreads, 0, ctx.stream()>>>(a);
  }
  check_launch("small_gemm_kernel");
  if (a.splits > 1) {
    small_gemm_reduce_kernel<<<device::grid_for(int64_t{a.M} * a.N), device::kThreads, 0,
                               ctx.stream()>>>(a);
    check_launch("small_gemm_reduce_kernel");
  }
}

}  // namespace ringlm::cuda
