// The decode GEMV: y = x · wᵀ (+ bias) for M <= kGemvMaxRows rows and BF16/F16 weights, streaming
// w once at close to HBM bandwidth (gemv.h says why M <= 2 and what the precision is).
//
// One launch can serve up to kGemvMaxTargets weight matrices of one x (gemv_many: the q, k and v
// projections, or gate and up): each gets its own blocks. A block owns C output columns (4; 2 when
// N <= 2048, so that the k and v projections of GQA models, N = 1024, fill the GPU: 512 blocks
// instead of half a wave of 256) and all M rows. Its 256 threads split K into chunks of 8 values
// (one 16-byte load per weight row): thread t takes chunks t, t + 256, ... Per chunk it loads the C
// columns' weights (two chunks at a time, so 2·C loads are in flight before the first use), x's 8
// values of each row (f32, L1/L2-resident, rounded to the weights' dtype in registers) and
// accumulates M × C FMA chains. The block then reduces the 256 partial sums of each output in a
// fixed order (device/gemv_common.cuh). A column's sums do not depend on C or on the other matrices
// of the launch: its bits are the same either way. A gated launch (gemv_gated: gate and up of an
// MLP) gives each block C/2 columns of both and writes act(gate) · up — the MLP's gated
// activation without its own kernel or the round trip of gate and up through memory.
//
// At a pre-norm block boundary the GEMV also takes the residual stream's add and norm (gemv.h's
// GemvNorm, gemv_accumulate): the projection that ends a block adds its sums into the residual
// stream (y += sum), and the matmuls that start the next block read that stream raw and
// normalize it on the way in — each block sums its rows' squares in the one-pass norm kernel's
// layout and order (device/rope_norm.cuh) and writes x · r · w, rounded to T, to shared memory
// once, so the dot products see bit for bit what rms_norm would have written. Such launches are
// persistent (a block per tile would pay that prologue per tile). At batch 1 that leaves no norm
// kernel between the GEMVs.
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <span>
#include <type_traits>

#include "backends/cuda/cuda_ops.h"
#include "backends/cuda/device/activation.cuh"
#include "backends/cuda/device/common.cuh"
#include "backends/cuda/device/gemv_common.cuh"
#include "backends/cuda/device/mma.cuh"
#include "backends/cuda/device/pdl.cuh"
#include "backends/cuda/device/rope_norm.cuh"
#include "backends/cuda/gemv.h"

namespace ringlm::cuda {

namespace {

using device::AnyFloat;

constexpr int kThreads = 256;
constexpr int kChunk = 8;           // weights per 16-byte load
constexpr int64_t kNarrowN = 2048;  // N up to this: 2 columns per block
constexpr int64_t kWideN = 4096;    // N from this (plain launches): 8 columns per block, else 4

// One weight matrix of a launch: its blocks are [first_block, next segment's first_block).
struct GemvSegment {
  const void* w;  // T[N, K]
  AnyFloat bias;  // [N] or null
  float* y;       // F32[M, N], row stride ldy
  int64_t ldy;
  int64_t N;
  int64_t first_block;  // its first tile
};

struct GemvArgs {
  const float* x;  // F32[M, K], row stride ldx
  int64_t ldx;
  bool x_vec;  // every x row 16-byte aligned: float4 loads
  int64_t K;
  int segments;
  GemvSegment seg[kGemvMaxTargets];
  // Gated launches (gemv_gated): seg[0] is gate, seg[1] up (same N); out = act(gate) · up.
  ops::Activation act;
  float* out;  // F32[M, N], row stride ldo
  int64_t ldo;
  // A fused input norm (norm_w non-null): x is the raw residual stream, normalized by
  // rms_norm's arithmetic in its one-pass layout (device/rope_norm.cuh).
  const void* norm_w;  // T[K], 16-byte aligned
  float norm_eps;
  bool norm_unit_offset;
  bool accumulate;  // y += sum (+ bias) instead of y = sum (+ bias); not gated
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

// Eight T values (one 16-byte word), widened exactly to f32.
template <typename T>
__device__ __forceinline__ void widen8(uint4 v, float (&f)[kChunk]) {
  widen2(v.x, static_cast<T*>(nullptr), f[0], f[1]);
  widen2(v.y, static_cast<T*>(nullptr), f[2], f[3]);
  widen2(v.z, static_cast<T*>(nullptr), f[4], f[5]);
  widen2(v.w, static_cast<T*>(nullptr), f[6], f[7]);
}

// kNorm launches: rows' x · r · w rounded to T, in shared memory ([M][K / 8] words of 8).
template <typename T, int M>
__device__ __forceinline__ void stage_normed_x(const GemvArgs& a, uint4* normed) {
  __shared__ float norm_smem[32 * M], rms[M];
  device::norm_vec_row_scales<M>(a.x, a.ldx, M, static_cast<int>(a.K), a.norm_eps, norm_smem, rms);
  const int64_t chunks = a.K / kChunk;
  for (int64_t i = threadIdx.x; i < M * chunks; i += kThreads) {
    const int m = static_cast<int>(i / chunks);
    const int64_t ch = i % chunks;
    float xv[kChunk], gv[kChunk];
    device::load_x8(a.x + m * a.ldx + ch * kChunk, true, xv);
    widen8<T>(__ldg(reinterpret_cast<const uint4*>(a.norm_w) + ch), gv);
    uint32_t packed[kChunk / 2];
#pragma unroll
    for (int j = 0; j < kChunk; j += 2) {
      packed[j / 2] =
          device::pack2<T>(device::rms_apply(xv[j], rms[m], gv[j], a.norm_unit_offset),
                           device::rms_apply(xv[j + 1], rms[m], gv[j + 1], a.norm_unit_offset));
    }
    normed[i] = make_uint4(packed[0], packed[1], packed[2], packed[3]);
  }
  __syncthreads();
}

// acc[m][c] += Σ_j x[m][j]·w[c][j] for one chunk, j in order (each a single FMA chain); kNorm:
// x[m] from stage_normed_x's words (the same values the plain path rounds x to).
template <typename T, int M, int kCols, bool kNorm>
__device__ __forceinline__ void accumulate_chunk(const GemvArgs& a, int64_t chunk,
                                                 const uint4 (&wv)[kCols], const uint4* normed,
                                                 float (&acc)[M][kCols]) {
  float wf[kCols][kChunk];
#pragma unroll
  for (int c = 0; c < kCols; ++c) widen8<T>(wv[c], wf[c]);
#pragma unroll
  for (int m = 0; m < M; ++m) {
    float xv[kChunk];
    if constexpr (kNorm) {
      widen8<T>(normed[m * (a.K / kChunk) + chunk], xv);
    } else {
      device::load_x8(a.x + m * a.ldx + chunk * kChunk, a.x_vec, xv);
#pragma unroll
      for (int j = 0; j < kChunk; ++j) xv[j] = device::to_f32(device::from_f32<T>(xv[j]));
    }
#pragma unroll
    for (int c = 0; c < kCols; ++c) {
#pragma unroll
      for (int j = 0; j < kChunk; ++j) acc[m][c] = fmaf(xv[j], wf[c][j], acc[m][c]);
    }
  }
}

// One tile of a launch: kCols weight rows (kGated: kCols / 2 columns of gate and the same
// columns of up) and where their sums go. Tile b is what block b computes in a launch of one
// block per tile; the persistent launch walks the tiles with fewer blocks.
template <typename T, int kCols, bool kGated>
struct GemvTile {
  const uint4* rows[kCols];
  int64_t n0;
  int s;  // the tile's weight matrix (not gated)

  __device__ __forceinline__ GemvTile(const GemvArgs& a, int64_t tile) {
    constexpr int kPairs = kCols / 2;
    s = 0;
    while (!kGated && s + 1 < a.segments && tile >= a.seg[s + 1].first_block) ++s;
    n0 = kGated ? tile * kPairs : (tile - a.seg[s].first_block) * int64_t{kCols};
    // Columns past N (the last tile only) re-read column N - 1 and are never stored.
#pragma unroll
    for (int c = 0; c < kCols; ++c) {
      const GemvSegment& row_seg = kGated ? a.seg[c < kPairs ? 0 : 1] : a.seg[s];
      const int64_t col = n0 + (kGated ? c % kPairs : c);
      const int64_t n = col < row_seg.N ? col : row_seg.N - 1;
      rows[c] = reinterpret_cast<const uint4*>(static_cast<const T*>(row_seg.w) + n * a.K);
    }
  }

  // The weights of chunks ch and ch + kThreads (zeros past the end): streamed once, evict-first.
  __device__ __forceinline__ void load_pair(int64_t chunks, int64_t ch, uint4 (&w0)[kCols],
                                            uint4 (&w1)[kCols]) const {
    const bool first = ch < chunks, second = ch + kThreads < chunks;
#pragma unroll
    for (int c = 0; c < kCols; ++c) {
      w0[c] = first ? __ldcs(rows[c] + ch) : make_uint4(0, 0, 0, 0);
      w1[c] = second ? __ldcs(rows[c] + ch + kThreads) : make_uint4(0, 0, 0, 0);
    }
  }

  // Every chunk of the tile, two per iteration (loads first), accumulated chunk by chunk in
  // order; w0/w1 hold the first pair on entry (loaded by the caller).
  template <int M, bool kNorm>
  __device__ __forceinline__ void accumulate(const GemvArgs& a, uint4 (&w0)[kCols],
                                             uint4 (&w1)[kCols], const uint4* normed,
                                             float (&acc)[M][kCols]) const {
    const int64_t chunks = a.K / kChunk;
#pragma unroll
    for (int m = 0; m < M; ++m) {
#pragma unroll
      for (int c = 0; c < kCols; ++c) acc[m][c] = 0.0f;
    }
    for (int64_t ch = threadIdx.x; ch < chunks; ch += 2 * kThreads) {
      if (ch != threadIdx.x) load_pair(chunks, ch, w0, w1);
      accumulate_chunk<T, M, kCols, kNorm>(a, ch, w0, normed, acc);
      if (ch + kThreads < chunks)
        accumulate_chunk<T, M, kCols, kNorm>(a, ch + kThreads, w1, normed, acc);
    }
  }

  // The block's sums into y (kGated: act(gate) · up into out).
  template <int M>
  __device__ __forceinline__ void write(const GemvArgs& a, float (&acc)[M][kCols],
                                        float* partials) const {
    constexpr int kPairs = kCols / 2;
    if constexpr (kGated) {
      device::reduce_tile<M, kCols, kThreads>(acc, partials);
      const float* sums = partials + (kThreads / 32) * M * kCols;
      const int i = static_cast<int>(threadIdx.x);
      if (i < M * kPairs) {
        const int m = i / kPairs, c = i % kPairs;
        const int64_t n = n0 + c;
        if (n < a.seg[0].N) {
          float g = sums[m * kCols + c], u = sums[m * kCols + kPairs + c];
          if (a.seg[0].bias.p != nullptr) g += a.seg[0].bias[n];
          if (a.seg[1].bias.p != nullptr) u += a.seg[1].bias[n];
          a.out[m * a.ldo + n] = device::gated_value(a.act, g, u);
        }
      }
    } else {
      const GemvSegment& seg = a.seg[s];
      device::reduce_tile_to_y<M, kCols, kThreads>(acc, partials, n0, seg.N, seg.bias, seg.y,
                                                   seg.ldy, a.accumulate);
    }
  }
};

// Block b computes tiles b, b + gridDim.x, ... (one tile each when the grid has a block per
// tile). The first tile's weights are loaded before waiting for the kernel before us (weights are
// not its output; x and y are); each next tile's first loads go out before this tile's
// reduction, so the block streams weights while it reduces. A tile's sums are the same whichever
// block computes it. kNorm: the block normalizes its rows of x into shared memory once, while its
// first weights are in flight.
template <typename T, int M, int kCols, bool kGated, bool kNorm>
__global__ void __launch_bounds__(kThreads, 2) gemv_kernel(GemvArgs a, int64_t tiles) {
  __shared__ float partials[(kThreads / 32 + 1) * M * kCols];
  using Tile = GemvTile<T, kCols, kGated>;
  const int64_t chunks = a.K / kChunk;
  int64_t tile = blockIdx.x;
  Tile current(a, tile);
  uint4 w0[kCols], w1[kCols];
  current.load_pair(chunks, threadIdx.x, w0, w1);
  device::wait_prior_grid();
  // A persistent kNorm launch lets the next kernel launch only when its blocks are done: all of
  // them start at once, so an early trigger would launch the next kernel at the very start, to
  // squat on the SMs (H200, 8B bf16, batch 1: -12 % at 4k / 32k context that way, +2 % at 512 to
  // 32k with the trigger at the end; docs/benchmarks.md).
  if constexpr (!kNorm) device::launch_dependents();
  extern __shared__ uint4 normed[];  // kNorm: [M][K / 8]
  if constexpr (kNorm) stage_normed_x<T, M>(a, normed);
  while (true) {
    float acc[M][kCols];
    current.template accumulate<M, kNorm>(a, w0, w1, normed, acc);
    const int64_t next_tile = tile + gridDim.x;
    const bool more = next_tile < tiles;
    const Tile next(a, more ? next_tile : tile);
    if (more) next.load_pair(chunks, threadIdx.x, w0, w1);
    current.template write<M>(a, acc, partials);
    if (!more) break;
    __syncthreads();  // every thread has read partials before the next reduction writes them
    tile = next_tile;
    current = next;
  }
  if constexpr (kNorm) device::launch_dependents();
}

// Two-row GEMV launches are persistent (at most kPersistentBlocksPerSm blocks per SM walking the
// tiles) unless RINGLM_CUDA_GEMV_PERSISTENT=0 or set_gemv_persistent(false): the same bits either
// way. One-row launches keep a block per tile: on the H200 (8B shape, docs/benchmarks.md)
// persistence gave +9.5 % at batch 2 and -0.7 % at batch 1 — except the normalizing (kNorm)
// launches, always persistent: a block per tile would normalize x once per tile (-11 % at batch 1).
constexpr int kPersistentBlocksPerSm = 2;  // __launch_bounds__(kThreads, 2)
// kNorm's x in shared memory: with the static arrays under the 48 KB that needs no opt-in.
constexpr int64_t kMaxNormedBytes = 40 << 10;
constexpr int kPersistentMinRows = 2;

std::atomic<bool>& persistent_flag() {
  static std::atomic<bool> on{env_switch_on("RINGLM_CUDA_GEMV_PERSISTENT")};
  return on;
}

std::atomic<bool>& fused_norms_flag() {
  static std::atomic<bool> on{env_switch_on("RINGLM_CUDA_FUSED_NORMS")};
  return on;
}

int64_t grid_for_tiles(int64_t tiles, int rows) {
  if (rows < kPersistentMinRows || !persistent_flag().load(std::memory_order_relaxed)) return tiles;
  return std::min(tiles, int64_t{sm_count()} * kPersistentBlocksPerSm);
}

template <typename T, int M, int kCols, bool kGated>
void launch_tiles(const GemvArgs& a, int64_t tiles, cudaStream_t stream) {
  if (a.norm_w != nullptr) {  // persistent: each block normalizes x once
    const dim3 grid(
        static_cast<unsigned>(std::min(tiles, int64_t{sm_count()} * kPersistentBlocksPerSm)));
    const size_t smem = static_cast<size_t>(M * a.K) * sizeof(T);
    launch_pdl(gemv_kernel<T, M, kCols, kGated, true>, grid, dim3(kThreads), smem, stream, a,
               tiles);
  } else {
    const dim3 grid(static_cast<unsigned>(grid_for_tiles(tiles, M)));
    launch_pdl(gemv_kernel<T, M, kCols, kGated, false>, grid, dim3(kThreads), 0, stream, a, tiles);
  }
}

template <typename T, int M, int kCols>
void launch_cols(GemvArgs a, bool gated, cudaStream_t stream) {
  if (gated) {
    if constexpr (kCols <= 4) {  // launch() gives gated launches 2 or 4 columns
      launch_tiles<T, M, kCols, true>(a, (a.seg[0].N + kCols / 2 - 1) / (kCols / 2), stream);
    } else {
      RINGLM_FAIL("gemv: a gated launch of ", kCols, " columns");
    }
    return;
  }
  int64_t tiles = 0;
  for (int s = 0; s < a.segments; ++s) {
    a.seg[s].first_block = tiles;
    tiles += (a.seg[s].N + kCols - 1) / kCols;
  }
  launch_tiles<T, M, kCols, false>(a, tiles, stream);
}

template <typename T, int M>
void launch(const GemvArgs& a, bool gated, cudaStream_t stream) {
  int64_t N = 0;
  for (int s = 0; s < a.segments; ++s) N += a.seg[s].N;
  if (N <= kNarrowN) {
    launch_cols<T, M, 2>(a, gated, stream);
  } else if (N >= kWideN && !gated) {
    launch_cols<T, M, 8>(a, gated, stream);
  } else {
    launch_cols<T, M, 4>(a, gated, stream);
  }
}

void launch_rows(DType dtype, int64_t M, const GemvArgs& a, bool gated, cudaStream_t stream) {
  device::dispatch_float(dtype, [&]<typename T>(T*) {
    if constexpr (std::is_same_v<T, float>) {
      RINGLM_FAIL("gemv: f32 weights");
    } else if (M == 1) {
      launch<T, 1>(a, gated, stream);
    } else if (M == 2) {
      launch<T, 2>(a, gated, stream);
    } else {
      RINGLM_FAIL("gemv: ", M, " rows (at most ", kGemvMaxRows, ")");
    }
  });
}

bool aligned16(const void* p) {
  return reinterpret_cast<uintptr_t>(p) % 16 == 0;
}

}  // namespace

bool gemv_persistent() {
  return persistent_flag().load(std::memory_order_relaxed);
}
void set_gemv_persistent(bool enabled) {
  persistent_flag().store(enabled, std::memory_order_relaxed);
}

bool gemv_fused_norms() {
  return fused_norms_flag().load(std::memory_order_relaxed);
}
void set_gemv_fused_norms(bool enabled) {
  fused_norms_flag().store(enabled, std::memory_order_relaxed);
}

int64_t leading_dim(const Tensor& t) {
  const int64_t cols = t.shape[1];
  return t.shape[0] <= 1 ? (t.strides[0] >= cols ? t.strides[0] : cols) : t.strides[0];
}

bool gemv_applies(const Tensor& x, const Tensor& w) {
  const int64_t M = x.shape[0], K = x.shape[1];
  return M >= 1 && M <= kGemvMaxRows && x.dtype == DType::F32 &&
         (w.dtype == DType::BF16 || w.dtype == DType::F16) && K % kChunk == 0 && aligned16(w.data);
}

bool gemv_many_applies(const Tensor& x, std::span<const GemvTarget> targets) {
  if (targets.empty() || targets.size() > static_cast<size_t>(kGemvMaxTargets)) return false;
  for (const GemvTarget& t : targets) {
    if (!gemv_applies(x, *t.w) || t.w->dtype != targets[0].w->dtype) return false;
  }
  return true;
}

namespace {

GemvArgs args_for(const Tensor& x, std::span<const GemvTarget> targets) {
  const int64_t ldx = leading_dim(x);
  GemvArgs a{};
  a.x = x.ptr<const float>();
  a.ldx = ldx;
  a.x_vec = aligned16(x.data) && ldx % 4 == 0;
  a.K = x.shape[1];
  a.segments = static_cast<int>(targets.size());
  for (size_t i = 0; i < targets.size(); ++i) {
    const Tensor &w = *targets[i].w, &bias = *targets[i].bias;
    Tensor& y = *targets[i].y;
    a.seg[i] = GemvSegment{w.data,         AnyFloat{bias.empty() ? nullptr : bias.data, bias.dtype},
                           y.ptr<float>(), leading_dim(y),
                           w.shape[0],     0};
  }
  return a;
}

void set_norm(const GemvNorm* norm, GemvArgs& a) {
  if (norm == nullptr) return;
  a.norm_w = norm->weight->data;
  a.norm_eps = norm->eps;
  a.norm_unit_offset = norm->unit_offset;
}

}  // namespace

bool gemv_norm_applies(const Tensor& x, DType weights, const GemvNorm& norm) {
  const Tensor& g = *norm.weight;
  const int64_t K = x.shape[1];
  return gemv_fused_norms() && x.dtype == DType::F32 && aligned16(x.data) &&
         leading_dim(x) % 4 == 0 && K % kChunk == 0 && x.shape[0] * K * 2 <= kMaxNormedBytes &&
         K <= int64_t{4} * device::kNormVecThreads * device::kNormMaxVecs && g.dtype == weights &&
         g.device == Device::CUDA && g.ndim == 1 && g.shape[0] == K && g.strides[0] == 1 &&
         aligned16(g.data);
}

void gemv_many(const Tensor& x, std::span<const GemvTarget> targets, const GemvNorm* norm) {
  RINGLM_CHECK(gemv_many_applies(x, targets), "gemv_many: ", targets.size(),
               " targets it does not serve");
  RINGLM_CHECK(norm == nullptr || gemv_norm_applies(x, targets[0].w->dtype, *norm),
               "gemv_many: a norm it does not fuse");
  GemvArgs a = args_for(x, targets);
  set_norm(norm, a);
  launch_rows(targets[0].w->dtype, x.shape[0], a, false, Context::get().stream());
  check_launch("gemv_kernel");
}

void gemv_accumulate(const Tensor& x, const Tensor& w, const Tensor& bias, Tensor& acc) {
  const GemvTarget one{&w, &bias, &acc};
  const std::span<const GemvTarget> targets(&one, 1);
  RINGLM_CHECK(gemv_many_applies(x, targets), "gemv_accumulate: a matmul it does not serve");
  GemvArgs a = args_for(x, targets);
  a.accumulate = true;
  launch_rows(w.dtype, x.shape[0], a, false, Context::get().stream());
  check_launch("gemv_kernel");
}

bool gemv_gated_applies(const Tensor& x, const GemvTarget& gate, const GemvTarget& up) {
  const GemvTarget both[] = {gate, up};
  return gemv_many_applies(x, both) && gate.w->shape[0] == up.w->shape[0];
}

void gemv_gated(const Tensor& x, const GemvTarget& gate, const GemvTarget& up,
                ops::Activation activation, Tensor& out, const GemvNorm* norm) {
  RINGLM_CHECK(gemv_gated_applies(x, gate, up), "gemv_gated: weights it does not serve");
  RINGLM_CHECK(norm == nullptr || gemv_norm_applies(x, gate.w->dtype, *norm),
               "gemv_gated: a norm it does not fuse");
  const GemvTarget both[] = {gate, up};
  GemvArgs a = args_for(x, both);
  set_norm(norm, a);
  a.act = activation;
  a.out = out.ptr<float>();
  a.ldo = leading_dim(out);
  launch_rows(gate.w->dtype, x.shape[0], a, true, Context::get().stream());
  check_launch("gemv_kernel");
}

void gemv(const Tensor& x, const Tensor& w, const Tensor& bias, Tensor& y) {
  const GemvTarget one{&w, &bias, &y};
  gemv_many(x, std::span<const GemvTarget>(&one, 1));
}

}  // namespace ringlm::cuda
