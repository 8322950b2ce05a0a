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

// Rope and the K/V write in the store of a normalizing launch (gemv_rope_kernel, cuda_ops.h's
// GemvRope): segments [0, roped) are heads of head_dim columns whose tiles hold rope pairs —
// tile j of a head: columns j·P ... (j + 1)·P - 1 and their partners half + j·P ... (P = kCols /
// 2) — rotated as prepare_attention does; a segment with a cache also stores its values there at
// the row's slot. Bit for bit the plain store and then cuda::prepare_attention.
struct GemvRopeArgs {
  const int32_t* positions;      // I32[M]
  const int32_t* slots;          // I32[M], or null: no cache
  void* cache[kGemvMaxTargets];  // per segment: [capacity, N] of cache_dtype, or null
  DType cache_dtype;
  int64_t capacity;
  int roped;
  int head_dim, half;
  float scaling;
  DeviceErrorRecord* errors;
  float inv_freq[kMaxRopeHalf];  // in the kernel's parameters (graph-capturable)
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
template <typename T, int kCols, bool kGated, bool kRope = false>
struct GemvTile {
  const uint4* rows[kCols];
  int64_t n0;
  int64_t second;  // kRope: column c >= kCols / 2 is n0 + second + c - kCols / 2
  int s;           // the tile's weight matrix (not gated)

  __device__ __forceinline__ GemvTile(const GemvArgs& a, int64_t tile,
                                      const GemvRopeArgs* rope = nullptr) {
    constexpr int kPairs = kCols / 2;
    s = 0;
    while (!kGated && s + 1 < a.segments && tile >= a.seg[s + 1].first_block) ++s;
    n0 = kGated ? tile * kPairs : (tile - a.seg[s].first_block) * int64_t{kCols};
    second = kPairs;
    if constexpr (kRope) {
      if (s < rope->roped) {  // local tile t: head t / per_head, its pairs (t % per_head)·P ...
        // (32-bit: a 64-bit division here would delay the next tile's loads)
        const auto local = static_cast<uint32_t>(tile - a.seg[s].first_block);
        const auto per_head = static_cast<uint32_t>(rope->head_dim / kCols);
        const uint32_t head = local / per_head;
        n0 = int64_t{head} * rope->head_dim + (local - head * per_head) * kPairs;
        second = rope->half;
      }
    }
    // Columns past N (the last tile only) re-read column N - 1 and are never stored.
#pragma unroll
    for (int c = 0; c < kCols; ++c) {
      const GemvSegment& row_seg = kGated ? a.seg[c < kPairs ? 0 : 1] : a.seg[s];
      int64_t col = n0 + (kGated ? c % kPairs : c);
      if constexpr (kRope) col = n0 + (c < kPairs ? c : second + c - kPairs);
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

  // kRope: the block's sums into y as write() would, rotated on roped segments, and into the
  // segment's cache — prepare_attention's arithmetic and its errors (a negative position leaves
  // the row unrotated and unwritten to the cache; a slot out of range skips the cache).
  template <int M>
  __device__ __forceinline__ void write_rope(const GemvArgs& a, const GemvRopeArgs& r,
                                             float (&acc)[M][kCols], float* partials) const {
    constexpr int kPairs = kCols / 2;
    device::reduce_tile<M, kCols, kThreads>(acc, partials);
    const float* sums = partials + (kThreads / 32) * M * kCols;
    const GemvSegment& seg = a.seg[s];
    const bool roped = s < r.roped;
    const int per_row = roped ? kPairs : kCols, i = static_cast<int>(threadIdx.x);
    if (i >= M * per_row) return;
    const int m = i / per_row, c = i % per_row;
    const bool reports = n0 == 0 && c == 0;  // the segment's first tile, once per row
    const int32_t p = r.positions[m];
    void* cache = r.cache[s];
    int64_t slot = -1;
    if (p < 0) {
      if (s == 0 && reports) device::report_error(r.errors, DeviceErrorCode::RopePosition, m, p, 0);
    } else if (cache != nullptr) {
      slot = r.slots[m];
      if (slot < 0 || slot >= r.capacity) {
        if (s == 1 && reports)
          device::report_error(r.errors, DeviceErrorCode::KvSlot, m, slot, r.capacity);
        slot = -1;
      }
    }
    float* y = seg.y + m * seg.ldy;
    const int64_t n = n0 + c;
    float x1 = sums[m * kCols + c];
    if (seg.bias.p != nullptr) x1 += seg.bias[n];
    if (!roped) {
      if (n >= seg.N) return;
      y[n] = x1;
      if (slot >= 0) device::store_float(cache, r.cache_dtype, slot * seg.N + n, x1);
      return;
    }
    const int64_t n2 = n + second;
    float x2 = sums[m * kCols + kPairs + c];
    if (seg.bias.p != nullptr) x2 += seg.bias[n2];
    if (p >= 0) {
      float cs, sn;
      const uint32_t pair = static_cast<uint32_t>(n) % static_cast<uint32_t>(r.head_dim);
      device::rope_cos_sin(static_cast<float>(p), r.inv_freq[pair], r.scaling, cs, sn);
      device::rope_rotate(x1, x2, cs, sn);
    }
    y[n] = x1;
    y[n2] = x2;
    if (slot >= 0) {
      device::store_float(cache, r.cache_dtype, slot * seg.N + n, x1);
      device::store_float(cache, r.cache_dtype, slot * seg.N + n2, x2);
    }
  }
};

// Block b computes tiles b, b + gridDim.x, ... (one tile each when the grid has a block per
// tile). The first tile's weights are loaded before waiting for the kernel before us (weights are
// not its output; x and y are); each next tile's first loads go out before this tile's
// reduction, so the block streams weights while it reduces. A tile's sums are the same whichever
// block computes it. kNorm: the block normalizes its rows of x into shared memory once, while its
// first weights are in flight. kRope (with kNorm, not gated): the store is write_rope's.
template <typename T, int M, int kCols, bool kGated, bool kNorm, bool kRope>
__device__ __forceinline__ void gemv_tiles(const GemvArgs& a, int64_t tiles,
                                           const GemvRopeArgs* rope) {
  __shared__ float partials[(kThreads / 32 + 1) * M * kCols];
  using Tile = GemvTile<T, kCols, kGated, kRope>;
  const int64_t chunks = a.K / kChunk;
  int64_t tile = blockIdx.x;
  Tile current(a, tile, rope);
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
    const Tile next(a, more ? next_tile : tile, rope);
    if (more) next.load_pair(chunks, threadIdx.x, w0, w1);
    if constexpr (kRope) {
      current.template write_rope<M>(a, *rope, acc, partials);
    } else {
      current.template write<M>(a, acc, partials);
    }
    if (!more) break;
    __syncthreads();  // every thread has read partials before the next reduction writes them
    tile = next_tile;
    current = next;
  }
  if constexpr (kNorm) device::launch_dependents();
}

template <typename T, int M, int kCols, bool kGated, bool kNorm>
__global__ void __launch_bounds__(kThreads, 2) gemv_kernel(GemvArgs a, int64_t tiles) {
  gemv_tiles<T, M, kCols, kGated, kNorm, false>(a, tiles, nullptr);
}

template <typename T, int M, int kCols>
__global__ void __launch_bounds__(kThreads, 2)
    gemv_rope_kernel(GemvArgs a, int64_t tiles, const GemvRopeArgs rope) {
  gemv_tiles<T, M, kCols, false, true, true>(a, tiles, &rope);
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

// Off unless RINGLM_CUDA_FUSED_ROPE=1: on the H200 it lost 12 % at 4k context (docs/benchmarks.md).
std::atomic<bool>& fused_rope_flag() {
  static std::atomic<bool> on{env_switch_on("RINGLM_CUDA_FUSED_ROPE", false)};
  return on;
}

int64_t grid_for_tiles(int64_t tiles, int rows) {
  if (rows < kPersistentMinRows || !persistent_flag().load(std::memory_order_relaxed)) return tiles;
  return std::min(tiles, int64_t{sm_count()} * kPersistentBlocksPerSm);
}

// How a launch stores its sums: plain (y = sum + bias), gated (out = act(gate) · up) or with
// rope and the K/V write (rope non-null; normalizing launches only).
struct GemvStore {
  bool gated = false;
  const GemvRopeArgs* rope = nullptr;
};

template <typename T, int M, int kCols, bool kGated>
void launch_tiles(const GemvArgs& a, int64_t tiles, const GemvStore& store, cudaStream_t stream) {
  if (a.norm_w != nullptr) {  // persistent: each block normalizes x once
    const dim3 grid(
        static_cast<unsigned>(std::min(tiles, int64_t{sm_count()} * kPersistentBlocksPerSm)));
    const size_t smem = static_cast<size_t>(M * a.K) * sizeof(T);
    if constexpr (!kGated) {
      if (store.rope != nullptr) {
        return launch_pdl(gemv_rope_kernel<T, M, kCols>, grid, dim3(kThreads), smem, stream, a,
                          tiles, *store.rope);
      }
    }
    launch_pdl(gemv_kernel<T, M, kCols, kGated, true>, grid, dim3(kThreads), smem, stream, a,
               tiles);
  } else {
    RINGLM_CHECK(store.rope == nullptr, "gemv: rope in the store of a launch without a norm");
    const dim3 grid(static_cast<unsigned>(grid_for_tiles(tiles, M)));
    launch_pdl(gemv_kernel<T, M, kCols, kGated, false>, grid, dim3(kThreads), 0, stream, a, tiles);
  }
}

template <typename T, int M, int kCols>
void launch_cols(GemvArgs a, const GemvStore& store, cudaStream_t stream) {
  if (store.gated) {
    if constexpr (kCols <= 4) {  // launch() gives gated launches 2 or 4 columns
      launch_tiles<T, M, kCols, true>(a, (a.seg[0].N + kCols / 2 - 1) / (kCols / 2), store, stream);
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
  launch_tiles<T, M, kCols, false>(a, tiles, store, stream);
}

template <typename T, int M>
void launch(const GemvArgs& a, const GemvStore& store, cudaStream_t stream) {
  int64_t N = 0;
  for (int s = 0; s < a.segments; ++s) N += a.seg[s].N;
  if (N <= kNarrowN) {
    launch_cols<T, M, 2>(a, store, stream);
  } else if (N >= kWideN && !store.gated) {  // (rope launches: head_dim % 8 == 0 fits all three)
    launch_cols<T, M, 8>(a, store, stream);
  } else {
    launch_cols<T, M, 4>(a, store, stream);
  }
}

void launch_rows(DType dtype, int64_t M, const GemvArgs& a, const GemvStore& store,
                 cudaStream_t stream) {
  device::dispatch_float(dtype, [&]<typename T>(T*) {
    if constexpr (std::is_same_v<T, float>) {
      RINGLM_FAIL("gemv: f32 weights");
    } else if (M == 1) {
      launch<T, 1>(a, store, stream);
    } else if (M == 2) {
      launch<T, 2>(a, store, stream);
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

bool gemv_fused_rope() {
  return fused_rope_flag().load(std::memory_order_relaxed);
}
void set_gemv_fused_rope(bool enabled) {
  fused_rope_flag().store(enabled, std::memory_order_relaxed);
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

bool gemv_rope_applies(const Tensor& x, std::span<const GemvTarget> targets, const GemvNorm& norm,
                       const GemvRope& rope) {
  const int64_t D = rope.head_dim, M = x.shape[0];
  const ops::KvLayerView* kv = rope.kv;
  if (!gemv_fused_rope() || !gemv_many_applies(x, targets) ||
      !gemv_norm_applies(x, targets[0].w->dtype, norm) || targets.size() != (kv ? 3u : 1u) ||
      D % 8 != 0 || rope.table->rotary_dim != D || D / 2 > kMaxRopeHalf ||
      rope.positions->numel() != M)
    return false;
  for (size_t i = 0; i < targets.size(); ++i) {
    if (targets[i].w->shape[0] % D != 0) return false;
  }
  if (kv == nullptr) return true;
  const auto float_dtype = [](DType d) {
    return d == DType::F32 || d == DType::BF16 || d == DType::F16;
  };
  return kv->dense() && float_dtype(kv->k.dtype) && kv->v.dtype == kv->k.dtype &&
         kv->k.is_contiguous() && kv->v.is_contiguous() && kv->k.ndim == 4 &&
         kv->k.shape[2] * kv->k.shape[3] == targets[1].w->shape[0] &&
         targets[2].w->shape[0] == targets[1].w->shape[0] && rope.slots->numel() == M;
}

void gemv_many(const Tensor& x, std::span<const GemvTarget> targets, const GemvNorm* norm,
               const GemvRope* rope) {
  RINGLM_CHECK(gemv_many_applies(x, targets), "gemv_many: ", targets.size(),
               " targets it does not serve");
  RINGLM_CHECK(norm == nullptr || gemv_norm_applies(x, targets[0].w->dtype, *norm),
               "gemv_many: a norm it does not fuse");
  RINGLM_CHECK(rope == nullptr || (norm != nullptr && gemv_rope_applies(x, targets, *norm, *rope)),
               "gemv_many: a rope it does not fuse");
  GemvArgs a = args_for(x, targets);
  set_norm(norm, a);
  GemvRopeArgs r{};
  if (rope != nullptr) {
    const ops::RopeTable& table = *rope->table;
    r.positions = rope->positions->ptr<const int32_t>();
    r.roped = static_cast<int>(std::min<size_t>(targets.size(), 2));  // q, k
    r.head_dim = static_cast<int>(rope->head_dim);
    r.half = table.rotary_dim / 2;
    r.scaling = table.attention_scaling;
    r.errors = Context::get().errors();
    for (int i = 0; i < r.half; ++i) r.inv_freq[i] = table.inv_freq[static_cast<size_t>(i)];
    if (const ops::KvLayerView* kv = rope->kv; kv != nullptr) {
      r.slots = rope->slots->ptr<const int32_t>();
      r.cache[1] = kv->k.data;
      r.cache[2] = kv->v.data;
      r.cache_dtype = kv->k.dtype;
      r.capacity = kv->k.shape[0] * kv->k.shape[1];
    }
  }
  const GemvStore store{.rope = rope != nullptr ? &r : nullptr};
  launch_rows(targets[0].w->dtype, x.shape[0], a, store, Context::get().stream());
  check_launch("gemv_kernel");
}

void gemv_accumulate(const Tensor& x, const Tensor& w, const Tensor& bias, Tensor& acc) {
  const GemvTarget one{&w, &bias, &acc};
  const std::span<const GemvTarget> targets(&one, 1);
  RINGLM_CHECK(gemv_many_applies(x, targets), "gemv_accumulate: a matmul it does not serve");
  GemvArgs a = args_for(x, targets);
  a.accumulate = true;
  launch_rows(w.dtype, x.shape[0], a, {}, Context::get().stream());
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
  launch_rows(gate.w->dtype, x.shape[0], a, {.gated = true}, Context::get().stream());
  check_launch("gemv_kernel");
}

void gemv(const Tensor& x, const Tensor& w, const Tensor& bias, Tensor& y) {
  const GemvTarget one{&w, &bias, &y};
  gemv_many(x, std::span<const GemvTarget>(&one, 1));
}

}  // namespace ringlm::cuda
