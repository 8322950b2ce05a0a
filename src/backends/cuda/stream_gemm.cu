// stream_gemm.h's kernel: y[M, N] (+)= x[M, K] · w[N, K]ᵀ on Hopper, TMA + wgmma, stream-K.
//
// Computed transposed: a tile is 128 weight rows (two warpgroups of 64: wgmma's M) by BM rows of
// x (wgmma's N, 32..256), over 64-wide chunks of K (128 bytes of 16-bit values: one 128-byte
// swizzle row, as TMA writes and wgmma reads it). A unit is one (tile, chunk); the grid's CTAs
// (one per SM) take equal contiguous ranges of the units in tile-major order. A CTA's range is a
// run of segments (the chunks of one tile it holds); a segment holding all of its tile's chunks
// writes y directly, any other writes its partial sums to a slot of the CTA's own (its first or
// its last segment). At the end of its range each CTA that parked a part waits for the tile's
// other parts and adds one slice of the tile — every part in CTA order, k order — into y; the
// last to finish re-arms the tile's counters for the next launch.
//
// Each chunk's MMAs run while the next chunk's are issued (wgmma.wait_group 1): a stage goes back
// to the copies one chunk after its MMAs were issued.
#include <cuda.h>  // CUtensorMap (a header type; the encoder comes from the runtime, below)
#include <cudaTypedefs.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <string>

#include "backends/cuda/cuda_ops.h"
#include "backends/cuda/device/common.cuh"
#include "backends/cuda/device/pdl.cuh"
#include "backends/cuda/device/wgmma.cuh"
#include "backends/cuda/stream_gemm.h"

namespace ringlm::cuda {

namespace {

// Weight rows per tile, TR: 128 (each consumer warpgroup one wgmma of 64 rows per k step) for
// any BM, or 256 (two each) for BM <= 128: twice the weight bytes per copy of x's rows, so half
// the x traffic from L2 and half the stage hand-overs per weight byte. Registers bound it: a
// thread holds TR · BM / 256 accumulators, 128 at most.
constexpr int kNarrowTile = 128;
constexpr int kWideTile = 256;
constexpr int kChunk = 64;  // K per unit: 128 bytes of 16-bit values
// Two warpgroups; thread 0 also issues the copies, refilling each stage once every warp is done
// with it. (A producer warp or warpgroup of its own spilled the 128 accumulators of 256 rows:
// ptxas allots 168 registers to a thread of a 288- or 384-thread block, setmaxnreg or not.)
constexpr int kConsumerThreads = 256;
constexpr int kThreads = kConsumerThreads;
constexpr int kSmemBudget = 220 * 1024;
constexpr int kMaxTiles = 4096;  // counters kept per tile (N up to 524,288 at narrow tiles)

template <int BM, int TR>
struct Shape {
  static_assert(TR == kNarrowTile || (TR == kWideTile && BM <= 128));
  static constexpr int kWBytes = TR * kChunk * 2;
  static constexpr int kXBytes = BM * kChunk * 2;
  static constexpr int kStages = std::min(10, kSmemBudget / (kWBytes + kXBytes));
  // 1,024 bytes for aligning the tiles (128-byte swizzle atoms), then the barriers.
  static constexpr int kSmem = 1024 + kStages * (kWBytes + kXBytes) + kStages * 8;
  static constexpr int kSub = TR / 128;   // 64-row wgmma tiles per warpgroup
  static constexpr int kSubAcc = BM / 2;  // accumulators per thread of one of them
  static constexpr int kSubVec = kSubAcc / 4;
  static constexpr int kVec = kSub * kSubVec;  // float4s of accumulators per thread
};

struct Args {
  float* y;  // F32[M, N], row stride ldy
  int64_t ldy;
  int M, N;
  int k_chunks;       // chunks per tile: ceil(K / 64)
  int units;          // tiles · k_chunks (range_start multiplies in 64 bits)
  int grid;           // CTAs: min(SMs, units), so that every CTA holds at least one unit
  int accumulate;     // y += instead of y =
  float* partials;    // F32[grid, 2 slots, 128 · BM] in fragment order
  unsigned* arrived;  // [tiles]: partials written this launch; zero between launches
  unsigned* reduced;  // [tiles]: slices reduced this launch; zero between launches
};

__device__ __forceinline__ int64_t range_start(int64_t cta, const Args& a) {
  return cta * a.units / a.grid;
}
// The CTA whose range holds unit u: the largest c with range_start(c) <= u.
__device__ __forceinline__ int cta_of(int64_t u, const Args& a) {
  return static_cast<int>(((u + 1) * a.grid - 1) / a.units);
}
// A CTA's slot for its segment of `tile`: 0 for its first segment, 1 for its last.
__device__ __forceinline__ int slot_of(int cta, int tile, const Args& a) {
  return range_start(cta, a) / a.k_chunks == tile ? 0 : 1;
}
// The CTAs holding chunks of `tile`: first..last, in k order.
struct Contributors {
  int first, last;
};
__device__ __forceinline__ Contributors contributors_of(int tile, const Args& a) {
  const int64_t first_unit = int64_t{tile} * a.k_chunks;
  return {cta_of(first_unit, a), cta_of(first_unit + a.k_chunks - 1, a)};
}

__device__ __forceinline__ void consumer_barrier() {
  asm volatile("bar.sync 1, %0;\n" ::"n"(kConsumerThreads) : "memory");
}

// Where thread `ctid`'s float4 v of accumulators lies in the tile — acc[v / kSubVec][4w..4w+3]
// with w = v % kSubVec — as weight row n (and n + 8) and x rows m, m + 1 (wgmma.cuh's fragment:
// d[4j + 2h + b] = D[16w + l/4 + 8h][8j + 2(l%4) + b]; warpgroup g's sub-tile j holds weight
// rows g · TR/2 + 64 j ...).
struct FragmentPlace {
  int n, m;
};
template <int BM, int TR>
__device__ __forceinline__ FragmentPlace fragment_place(int tile, int ctid, int v) {
  using S = Shape<BM, TR>;
  const int warp = ctid / 32, lane = ctid % 32, sub = v / S::kSubVec, w = v % S::kSubVec;
  return {tile * TR + (warp / 4) * (TR / 2) + sub * 64 + (warp % 4) * 16 + lane / 4,
          8 * w + 2 * (lane % 4)};
}
// Thread's float4 v of accumulators (fragment_place's order).
template <int BM, int TR>
__device__ __forceinline__ float4
accumulators(const float (&acc)[Shape<BM, TR>::kSub][Shape<BM, TR>::kSubAcc], int v) {
  using S = Shape<BM, TR>;
  const float* q = &acc[v / S::kSubVec][4 * (v % S::kSubVec)];
  return make_float4(q[0], q[1], q[2], q[3]);
}

// Four sums of one fragment place into y (masked to M × N), onto y's values when accumulating.
__device__ __forceinline__ void store_quad(float4 sums, FragmentPlace at, const Args& a) {
  const float values[4] = {sums.x, sums.y, sums.z, sums.w};
#pragma unroll
  for (int q = 0; q < 4; ++q) {
    const int n = at.n + 8 * (q / 2), m = at.m + q % 2;
    if (n < a.N && m < a.M) {
      float* out = a.y + int64_t{m} * a.ldy + n;
      *out = a.accumulate ? *out + values[q] : values[q];
    }
  }
}

template <int BM, int TR>
__device__ __forceinline__ float* partial_slot(const Args& a, int cta, int slot) {
  return a.partials + (int64_t{cta} * 2 + slot) * (TR * BM);
}

// A segment holding only some of its tile's chunks parks its sums in its slot, in fragment order
// (float4 v·256 + ctid holds thread ctid's accumulators 4v..4v+3), and counts itself arrived.
template <int BM, int TR>
__device__ void park_partial(const float (&acc)[Shape<BM, TR>::kSub][Shape<BM, TR>::kSubAcc],
                             int tile, int cta, int ctid, const Args& a) {
  float4* mine = reinterpret_cast<float4*>(partial_slot<BM, TR>(a, cta, slot_of(cta, tile, a)));
#pragma unroll
  for (int v = 0; v < Shape<BM, TR>::kVec; ++v)
    mine[v * kConsumerThreads + ctid] = accumulators<BM, TR>(acc, v);
  __threadfence();
  consumer_barrier();
  if (ctid == 0) atomicAdd(&a.arrived[tile], 1u);
}

// Once every contributor of `tile` has parked its sums, this CTA (the index-th of the tile's
// parts) adds the parts of its own slice of the tile in CTA order — k order, the same for every
// slice and every M — and writes y; the last to finish re-arms the tile's counters. Every part
// reduces a slice at its range's end, so no CTA adds a whole tile alone while the others idle.
template <int BM, int TR>
__device__ void reduce_slice(int tile, int cta, int ctid, const Args& a) {
  constexpr int kTotal = Shape<BM, TR>::kVec * kConsumerThreads;
  const Contributors parts = contributors_of(tile, a);
  const unsigned count = static_cast<unsigned>(parts.last - parts.first + 1);
  if (ctid == 0) {
    // Every CTA of the grid is resident (one per SM, grid <= SMs), so the wait ends.
    while (*static_cast<volatile unsigned*>(&a.arrived[tile]) < count) __nanosleep(32);
    __threadfence();
  }
  consumer_barrier();
  const int index = cta - parts.first;
  const int begin = static_cast<int>(int64_t{index} * kTotal / count);
  const int end = static_cast<int>(int64_t{index + 1} * kTotal / count);
  // Only the first part's range can start before the tile (its slot 1); every later part's
  // range starts inside it (slot 0). Found once here: slot_of divides 64-bit integers.
  const int first_slot = slot_of(parts.first, tile, a);
  const auto part_of = [&](int c) {
    return reinterpret_cast<const float4*>(
        partial_slot<BM, TR>(a, c, c == parts.first ? first_slot : 0));
  };
  constexpr int kBatch = 8;  // parts' loads in flight per float4
  for (int f = begin + ctid; f < end; f += kConsumerThreads) {
    float4 sum = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    for (int c0 = parts.first; c0 <= parts.last; c0 += kBatch) {
      float4 loaded[kBatch];
#pragma unroll
      for (int j = 0; j < kBatch; ++j)
        if (c0 + j <= parts.last) loaded[j] = __ldcg(part_of(c0 + j) + f);
#pragma unroll
      for (int j = 0; j < kBatch; ++j) {
        if (c0 + j > parts.last) break;
        const float4 p = loaded[j];
        sum = c0 + j == parts.first
                  ? p
                  : make_float4(sum.x + p.x, sum.y + p.y, sum.z + p.z, sum.w + p.w);
      }
    }
    store_quad(sum, fragment_place<BM, TR>(tile, f % kConsumerThreads, f / kConsumerThreads), a);
  }
  consumer_barrier();
  if (ctid == 0 && atomicAdd(&a.reduced[tile], 1u) == count - 1) {
    a.arrived[tile] = 0;
    a.reduced[tile] = 0;
  }
}

template <typename T, int BM, int TR>
__global__ void __launch_bounds__(kThreads, 1)
    stream_gemm_kernel(const __grid_constant__ CUtensorMap w_map,  // BF16|F16[N, K], box 64×TR
                       const __grid_constant__ CUtensorMap x_map,  // BF16|F16[M, K], box 64×BM
                       const Args a) {
  using S = Shape<BM, TR>;
  extern __shared__ unsigned char smem_raw[];
  unsigned char* const tiles = reinterpret_cast<unsigned char*>(
      (reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~uintptr_t{1023});
  unsigned char* const w_tiles = tiles;
  unsigned char* const x_tiles = tiles + S::kStages * S::kWBytes;
  uint64_t* const full = reinterpret_cast<uint64_t*>(x_tiles + S::kStages * S::kXBytes);

  const int cta = blockIdx.x;
  // 32-bit unit indices in the main loop: its divisions by k_chunks stay 32-bit (with 64-bit
  // ones the 256-row-tile kernel takes 230 registers instead of 188).
  const int first = static_cast<int>(range_start(cta, a));
  const int count = static_cast<int>(range_start(cta + 1, a) - first);
  if (threadIdx.x == 0) {
    for (int s = 0; s < S::kStages; ++s) device::mbarrier_init(&full[s], 1);
    device::mbarrier_init_fence();
  }
  __syncthreads();

  // The copies of unit i into stage i % kStages, completing full[stage].
  const uint64_t evict_first = device::l2_evict_first_policy();
  const auto copy_weights = [&](int i) {
    const int u = first + i;
    const int s = static_cast<int>(i % S::kStages);
    device::mbarrier_arrive_expect_tx(&full[s], S::kWBytes + S::kXBytes);
    device::tma_load_2d(w_tiles + s * S::kWBytes, &w_map, (u % a.k_chunks) * kChunk,
                        (u / a.k_chunks) * TR, &full[s], evict_first);
  };
  const auto copy_x = [&](int i) {
    const int u = first + i;
    const int s = static_cast<int>(i % S::kStages);
    device::tma_load_2d(x_tiles + s * S::kXBytes, &x_map, (u % a.k_chunks) * kChunk, 0, &full[s],
                        0);
  };
  const int prologue = count < S::kStages ? count : S::kStages;
  if (threadIdx.x == 0) {
    // The weights are never written by a kernel: the first stages' copies start before the
    // previous kernel finishes (pdl.cuh), x's after it.
    for (int i = 0; i < prologue; ++i) copy_weights(i);
    device::wait_prior_grid();
    for (int i = 0; i < prologue; ++i) copy_x(i);
  }
  __syncwarp();               // wgmma's instructions want the whole warp converged
  device::wait_prior_grid();  // y, the partials and the counters
  const int ctid = threadIdx.x, group = ctid / 128;
  // Unit i's stage has been read by both warpgroups' MMAs (each waited for them): after a
  // barrier of all eight warps, thread 0 refills it with unit i + kStages.
  const auto release = [&](int i) {
    consumer_barrier();
    if (ctid == 0 && i + S::kStages < count) {
      copy_weights(i + S::kStages);
      copy_x(i + S::kStages);
    }
  };
  float acc[S::kSub][S::kSubAcc];
  const auto fence_accumulators = [&] {
#pragma unroll
    for (int j = 0; j < S::kSub; ++j)
#pragma unroll
      for (int i2 = 0; i2 < S::kSubAcc; ++i2) device::fence_operand(acc[j][i2]);
  };
#pragma unroll
  for (int j = 0; j < S::kSub; ++j)
#pragma unroll
    for (int i2 = 0; i2 < S::kSubAcc; ++i2) acc[j][i2] = 0.0f;
  int parked_first = -1, parked_last = -1;  // the tiles of this CTA's partial segments
  int segment_start = 0;                    // the segment's first chunk
  for (int i = 0; i < count; ++i) {
    const int u = first + i;
    const int tile = u / a.k_chunks;
    const int chunk = u % a.k_chunks;
    if (i == 0 || chunk == 0) segment_start = chunk;
    const int s = static_cast<int>(i % S::kStages);
    device::mbarrier_wait(&full[s], static_cast<uint32_t>((i / S::kStages) & 1));
    // Warpgroup g's sub-tile j: weight rows g · TR/2 + 64 j.. of the stage (128 bytes a row).
    const unsigned char* const w_stage = w_tiles + s * S::kWBytes + group * (TR / 2) * 128;
    const uint64_t x_desc = device::smem_descriptor(x_tiles + s * S::kXBytes);
    fence_accumulators();
    device::wgmma_fence();
#pragma unroll
    for (int k = 0; k < kChunk / 16; ++k)
#pragma unroll
      for (int j = 0; j < S::kSub; ++j)
        device::Wgmma<BM, T>::run(acc[j], device::smem_descriptor(w_stage + j * 64 * 128) + 2 * k,
                                  x_desc + 2 * k, (chunk == segment_start && k == 0) ? 0 : 1);
    device::wgmma_commit();
    const bool segment_ends = i + 1 == count || chunk + 1 == a.k_chunks;
    if (!segment_ends) {
      // This chunk's MMAs stay in flight while the previous chunk's stage is handed back.
      device::wgmma_wait<1>();
      fence_accumulators();
      if (chunk != segment_start) release(i - 1);
      continue;
    }
    device::wgmma_wait<0>();
    fence_accumulators();
    if (chunk != segment_start) release(i - 1);
    release(i);
    if (i + 1 == count) device::launch_dependents();
    if (segment_start == 0 && chunk + 1 == a.k_chunks) {
#pragma unroll
      for (int v = 0; v < S::kVec; ++v)
        store_quad(accumulators<BM, TR>(acc, v), fragment_place<BM, TR>(tile, ctid, v), a);
    } else {
      park_partial<BM, TR>(acc, tile, cta, ctid, a);
      (parked_first < 0 ? parked_first : parked_last) = tile;
    }
  }
  // Nothing is in flight after the last segment's wait, but ptxas cannot tell: without this wait
  // the branches below make it serialize every wgmma of the kernel (its info line C7518). So do
  // the two waits in the loop merged into one path (C7514): each path keeps its own.
  device::wgmma_wait<0>();
  // The tiles cut between CTAs, reduced once every CTA's range is done (all finish together).
  if (parked_first >= 0) reduce_slice<BM, TR>(parked_first, cta, ctid, a);
  if (parked_last >= 0) reduce_slice<BM, TR>(parked_last, cta, ctid, a);
}

std::atomic<bool>& enabled_flag() {
  static std::atomic<bool> enabled{env_switch_on("RINGLM_CUDA_STREAM_GEMM", false)};
  return enabled;
}

std::atomic<int64_t>& min_rows_value() {
  static std::atomic<int64_t> rows{env_positive_int("RINGLM_CUDA_STREAM_GEMM_MIN_ROWS", 17)};
  return rows;
}

std::atomic<bool>& wide_tiles_flag() {
  static std::atomic<bool> wide{env_switch_on("RINGLM_CUDA_STREAM_GEMM_WIDE", true)};
  return wide;
}

std::atomic<int64_t>& calls() {
  static std::atomic<int64_t> n{0};
  return n;
}

}  // namespace

bool stream_gemm_device_supported() {
  static const bool is_sm90 = [] {
    int device = 0, major = 0, minor = 0;
    RINGLM_CUDA_CHECK(cudaGetDevice(&device));
    RINGLM_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
    RINGLM_CUDA_CHECK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device));
    return major == 9 && minor == 0;
  }();
  return is_sm90;
}

namespace {

PFN_cuTensorMapEncodeTiled_v12000 tensor_map_encoder() {
  static const PFN_cuTensorMapEncodeTiled_v12000 encode = [] {
    void* fn = nullptr;
    cudaDriverEntryPointQueryResult found{};
    RINGLM_CUDA_CHECK(cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn, 12000,
                                                       cudaEnableDefault, &found));
    RINGLM_CHECK(found == cudaDriverEntryPointSuccess && fn != nullptr,
                 "stream_gemm: the driver has no cuTensorMapEncodeTiled");
    return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(fn);
  }();
  return encode;
}

// A 2-D map of a row-major [rows, cols] 16-bit matrix (row stride ld elements), read in boxes of
// 64 columns × box_rows rows with 128-byte swizzle; out-of-range elements read as zeros.
CUtensorMap tensor_map(const void* base, DType dtype, int64_t rows, int64_t cols, int64_t ld,
                       int box_rows) {
  CUtensorMap map{};
  const cuuint64_t dims[2] = {static_cast<cuuint64_t>(cols), static_cast<cuuint64_t>(rows)};
  const cuuint64_t strides[1] = {static_cast<cuuint64_t>(ld) * 2};
  const cuuint32_t box[2] = {static_cast<cuuint32_t>(kChunk), static_cast<cuuint32_t>(box_rows)};
  const cuuint32_t element_strides[2] = {1, 1};
  const CUresult status = tensor_map_encoder()(
      &map,
      dtype == DType::BF16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 : CU_TENSOR_MAP_DATA_TYPE_FLOAT16, 2,
      const_cast<void*>(base), dims, strides, box, element_strides, CU_TENSOR_MAP_INTERLEAVE_NONE,
      CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
      CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  RINGLM_CHECK(status == CUDA_SUCCESS, "stream_gemm: cuTensorMapEncodeTiled failed (", status,
               ") for [", rows, ", ", cols, "] ld ", ld);
  return map;
}

template <typename T, int BM, int TR>
void launch(const StreamGemm& g) {
  using S = Shape<BM, TR>;
  static const bool configured = [] {
    RINGLM_CUDA_CHECK(cudaFuncSetAttribute(stream_gemm_kernel<T, BM, TR>,
                                           cudaFuncAttributeMaxDynamicSharedMemorySize, S::kSmem));
    return true;
  }();
  (void)configured;
  Context& context = Context::get();
  const int tiles = static_cast<int>((g.N + TR - 1) / TR);
  const int k_chunks = static_cast<int>((g.K + kChunk - 1) / kChunk);
  const int64_t units = int64_t{tiles} * k_chunks;
  const int grid = static_cast<int>(std::min<int64_t>(sm_count(), units));
  Args a{};
  a.y = g.y;
  a.ldy = g.ldy;
  a.M = static_cast<int>(g.M);
  a.N = static_cast<int>(g.N);
  a.k_chunks = k_chunks;
  a.units = static_cast<int>(units);
  a.grid = grid;
  a.accumulate = g.accumulate ? 1 : 0;
  a.partials = static_cast<float*>(context.scratch(
      Scratch::GemmPartials, static_cast<size_t>(grid) * 2 * TR * BM * sizeof(float)));
  a.arrived = static_cast<unsigned*>(
      context.scratch(Scratch::GemmTickets, 2 * kMaxTiles * sizeof(unsigned), /*zeroed=*/true));
  a.reduced = a.arrived + kMaxTiles;
  const CUtensorMap w_map = tensor_map(g.w, g.dtype, g.N, g.K, g.K, TR);
  const CUtensorMap x_map = tensor_map(g.x, g.dtype, g.M, g.K, g.ldx, BM);
  launch_pdl(stream_gemm_kernel<T, BM, TR>, dim3(grid), dim3(kThreads), S::kSmem, context.stream(),
             w_map, x_map, a);
  check_launch("stream_gemm_kernel");
}

template <typename T>
void launch_for_rows(const StreamGemm& g) {
  if (g.M <= 128 && stream_gemm_wide_tiles()) {
    if (g.M <= 32) return launch<T, 32, kWideTile>(g);
    if (g.M <= 64) return launch<T, 64, kWideTile>(g);
    return launch<T, 128, kWideTile>(g);
  }
  if (g.M <= 32) return launch<T, 32, kNarrowTile>(g);
  if (g.M <= 64) return launch<T, 64, kNarrowTile>(g);
  if (g.M <= 128) return launch<T, 128, kNarrowTile>(g);
  if (g.M <= 192) return launch<T, 192, kNarrowTile>(g);
  return launch<T, 256, kNarrowTile>(g);
}

}  // namespace

bool stream_gemm_applies(const StreamGemm& g) {
  const auto aligned = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; };
  return enabled_flag().load(std::memory_order_relaxed) &&
         (g.dtype == DType::BF16 || g.dtype == DType::F16) && g.M >= stream_gemm_min_rows() &&
         g.M <= kStreamGemmMaxRows && g.K > 0 && g.K % 8 == 0 && g.ldx % 8 == 0 && g.ldx >= g.K &&
         g.N > 0 && g.N <= int64_t{kMaxTiles} * kNarrowTile && g.K <= INT32_MAX &&
         (g.N + kNarrowTile - 1) / kNarrowTile * ((g.K + kChunk - 1) / kChunk) <= INT32_MAX &&
         aligned(g.x) && aligned(g.w) && stream_gemm_device_supported();
}

void stream_gemm(const StreamGemm& g) {
  RINGLM_CHECK(stream_gemm_applies(g), "stream_gemm: unsupported call (M ", g.M, ", N ", g.N,
               ", K ", g.K, ", ", dtype_name(g.dtype), ")");
  calls().fetch_add(1, std::memory_order_relaxed);
  if (g.dtype == DType::BF16) return launch_for_rows<__nv_bfloat16>(g);
  launch_for_rows<__half>(g);
}

bool stream_gemm_enabled() {
  return enabled_flag().load(std::memory_order_relaxed);
}
void set_stream_gemm(bool enabled) {
  enabled_flag().store(enabled, std::memory_order_relaxed);
}
int64_t stream_gemm_min_rows() {
  return min_rows_value().load(std::memory_order_relaxed);
}
void set_stream_gemm_min_rows(int64_t rows) {
  min_rows_value().store(std::max<int64_t>(rows, 1), std::memory_order_relaxed);
}
bool stream_gemm_wide_tiles() {
  return wide_tiles_flag().load(std::memory_order_relaxed);
}
void set_stream_gemm_wide_tiles(bool wide) {
  wide_tiles_flag().store(wide, std::memory_order_relaxed);
}
int64_t stream_gemm_count() {
  return calls().load(std::memory_order_relaxed);
}

}  // namespace ringlm::cuda
