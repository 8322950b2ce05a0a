// The tensor-core decode GEMM for MLX-quantized weights (quant_mma.h): the host side — the
// splits of K planned from the shape, the launch of the kernel variant for the rows (the kernel
// and what it computes: device/quant_mma_kernel.cuh), the switches.
#include "backends/cuda/quant_mma.h"

#include <algorithm>
#include <atomic>
#include <climits>
#include <cstdint>

#include "backends/cuda/cuda_ops.h"
#include "backends/cuda/device/pdl.cuh"
#include "backends/cuda/device/quant_mma_kernel.cuh"
#include "backends/cuda/gemv.h"
#include "backends/cuda/runtime.h"

namespace ringlm::cuda {

namespace {

using namespace quant_mma_detail;  // NOLINT: the kernel's constants and types

// The switches (quant_mma.h says what each does), one environment name each.
constexpr char kEnabledEnv[] = "RINGLM_CUDA_QUANT_MMA";
constexpr char kStagedEnv[] = "RINGLM_CUDA_QUANT_MMA_STAGED_SCALES";
constexpr char kRowGroupsEnv[] = "RINGLM_CUDA_QUANT_MMA_ROW_GROUPS";
constexpr char kWideGroupsEnv[] = "RINGLM_CUDA_QUANT_MMA_WIDE_GROUPS";
constexpr char kSubnormalCodesEnv[] = "RINGLM_CUDA_QUANT_MMA_SUBNORMAL_CODES";
constexpr char kHalfXEnv[] = "RINGLM_CUDA_QUANT_MMA_HALF_X";
constexpr char kWarpXEnv[] = "RINGLM_CUDA_QUANT_MMA_WARP_X";
constexpr char kWarpScalesEnv[] = "RINGLM_CUDA_QUANT_MMA_WARP_SCALES";
std::atomic<bool>& warp_scales_flag() {  // off by default, said once
  return switch_flag<kWarpScalesEnv, false>();
}
constexpr char kSmemCodesEnv[] = "RINGLM_CUDA_QUANT_MMA_SMEM_CODES";
std::atomic<bool>& smem_codes_flag() {  // off by default, said once
  return switch_flag<kSmemCodesEnv, false>();
}

std::atomic<int64_t> g_count{0}, g_warp_x_count{0}, g_wide_group_count{0}, g_half_x_count{0},
    g_smem_codes_count{0};

// Blocks per SM the split rule aims for (4 fit by the launch bounds): 4, or
// RINGLM_CUDA_QUANT_MMA_BLOCKS_PER_SM (1..8) read at start-up, for same-binary A/B runs.
int blocks_per_sm() {
  static const int blocks = [] {
    const int64_t n = env_positive_int("RINGLM_CUDA_QUANT_MMA_BLOCKS_PER_SM", 4);
    return n <= 8 ? static_cast<int>(n) : 4;
  }();
  return blocks;
}

// Splits of K (whole pages) for an N × K weight: about blocks_per_sm() blocks per SM. A function
// of the shape (and the GPU) only, never of M.
struct SplitPlan {
  int tiles, pages_per_split, splits;
};
SplitPlan plan_splits(int64_t N, int64_t K) {
  const int tiles = static_cast<int>((N + kTileCols - 1) / kTileCols);
  const int pages = static_cast<int>(K / kPageK);
  const int wanted = (blocks_per_sm() * sm_count() + tiles / 2) / tiles;
  const int splits = std::clamp(wanted, 1, pages);
  const int per_split = (pages + splits - 1) / splits;
  return {tiles, per_split, (pages + per_split - 1) / per_split};
}

template <int BITS, int MT, bool kStaged, bool kWarpX = false, bool kRowGroups = false,
          bool kHalfX = false, bool kWarpScales = false, bool kSmemCodes = false>
void launch_variant(const MmaArgs& args, int blocks, cudaStream_t stream) {
  constexpr auto kKernel =
      quant_mma_kernel<BITS, MT, kStaged, kWarpX, kRowGroups, kHalfX, kWarpScales, kSmemCodes>;
  constexpr int kStages = x_stages<MT, kHalfX>();
  constexpr size_t kSmem =
      kWarpX ? sizeof(float4) * kWarps * warp_x_units<BITS, kWarpScales, kSmemCodes>()
             : sizeof(float4) * kStages * 8 * MT * row_units<kHalfX>() +
                   (kStaged ? sizeof(uint32_t) * kStages * kScaleStageWords : 0);
  static const bool sized = [] {
    RINGLM_CUDA_CHECK(cudaFuncSetAttribute(kKernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                           static_cast<int>(kSmem)));
    // 4-bit code rings: 4 blocks of 55.8 KB fit only the largest carveout (228 KB).
    if constexpr (kSmemCodes) {
      RINGLM_CUDA_CHECK(cudaFuncSetAttribute(kKernel,
                                             cudaFuncAttributePreferredSharedMemoryCarveout,
                                             static_cast<int>(cudaSharedmemCarveoutMaxShared)));
    }
    return true;
  }();
  (void)sized;
  launch_pdl(kKernel, dim3(static_cast<unsigned>(blocks)), dim3(kThreads), kSmem, stream, args);
}

// Scales and biases through shared memory at 9-16 rows (MT = 2), when every target's are 4-byte
// aligned; per-lane loads at 1-8 rows. H200, 8B shape (docs/benchmarks.md, "GPU decode with
// MLX-quantized weights", ninth session): staged, 16 rows ran 1.08x (mlx4) and 1.29x (mlx8);
// 1-4 rows 0.95-0.98x (mlx8 1 row 1.03x), 8 rows 0.99x / 1.04x. The same bits either way.
// MT = 4: 32-row groups (quant_mma_wide_groups()), row-group kernels only. bf16 x (9+ rows,
// aligned scales: quant_mma_applies) takes the staged kernels whatever the switch says.
template <int BITS, int MT>
void launch(const MmaArgs& args, int blocks, bool scales_aligned, bool half_x,
            cudaStream_t stream) {
  if constexpr (MT >= 2) {
    if (half_x) {
      g_half_x_count.fetch_add(1, std::memory_order_relaxed);
      if constexpr (MT == 2) {
        if (args.row_groups == 1)
          return launch_variant<BITS, MT, true, false, false, true>(args, blocks, stream);
      }
      return launch_variant<BITS, MT, true, false, true, true>(args, blocks, stream);
    }
  }
  const bool staged = scales_aligned && switch_flag<kStagedEnv>().load(std::memory_order_relaxed);
  if constexpr (MT == 4) {
    staged ? launch_variant<BITS, MT, true, false, true>(args, blocks, stream)
           : launch_variant<BITS, MT, false, false, true>(args, blocks, stream);
  } else {
    if constexpr (MT == 2) {
      if (args.row_groups > 1) {
        return staged ? launch_variant<BITS, MT, true, false, true>(args, blocks, stream)
                      : launch_variant<BITS, MT, false, false, true>(args, blocks, stream);
      }
      if (staged) return launch_variant<BITS, MT, true>(args, blocks, stream);
    } else {
      if (args.M == 1 && switch_flag<kWarpXEnv>().load(std::memory_order_relaxed)) {
        g_warp_x_count.fetch_add(1, std::memory_order_relaxed);
        const bool warp_scales =
            scales_aligned && warp_scales_flag().load(std::memory_order_relaxed);
        if (smem_codes_flag().load(std::memory_order_relaxed)) {
          g_smem_codes_count.fetch_add(1, std::memory_order_relaxed);
          return warp_scales ? launch_variant<BITS, MT, false, true, false, false, true, true>(
                                   args, blocks, stream)
                             : launch_variant<BITS, MT, false, true, false, false, false, true>(
                                   args, blocks, stream);
        }
        if (warp_scales)
          return launch_variant<BITS, MT, false, true, false, false, true>(args, blocks, stream);
        return launch_variant<BITS, MT, false, true>(args, blocks, stream);
      }
    }
    launch_variant<BITS, MT, false>(args, blocks, stream);
  }
}

// Whether M rows run faster as 32-row groups than as 16-row ones: a 32-row group costs ~1.6 16-row
// groups (H100, 8B mlx4 at 512 context: 48 rows as two 32-row groups ran 0.93x three 16-row ones,
// 40 rows 0.93x; 24 / 56 / 64 / 80 rows 1.08 / 1.13 / 1.15 / 1.07x; docs/benchmarks.md,
// twenty-seventh session). A row's bits do not depend on its group, so the choice may follow M.
bool wide_groups_pay(int64_t M) {
  const int64_t wide = (M + 2 * kGroupRows - 1) / (2 * kGroupRows);
  const int64_t narrow = (M + kGroupRows - 1) / kGroupRows;
  return 8 * wide < 5 * narrow;
}

bool aligned16(const void* p) {
  return reinterpret_cast<uintptr_t>(p) % 16 == 0;
}

bool scales_aligned4(const ops::QuantizedMatrix& q) {
  return reinterpret_cast<uintptr_t>(q.scales.data) % 4 == 0 &&
         reinterpret_cast<uintptr_t>(q.biases.data) % 4 == 0;
}

}  // namespace

bool quant_mma_applies(const QuantMma& g) {
  const ops::QuantizedMatrix& q = *g.w;
  const int64_t M = g.x->shape[0], K = q.cols(), N = q.rows();
  if (!switch_flag<kEnabledEnv>().load(std::memory_order_relaxed)) return false;
  if (q.bits != 4 && q.bits != 8) return false;
  if (q.scales.dtype != DType::BF16 || q.biases.dtype != DType::BF16) return false;
  const bool half_x = g.x->dtype == DType::BF16;
  if (g.x->dtype != DType::F32 && !half_x) return false;
  // bf16 x: the staged kernels of 9+ rows (n-tiles of 8 rows: two or four).
  if (half_x && (M <= kQuantMmaMaxRows / 2 || !scales_aligned4(q))) return false;
  const int64_t max_rows = switch_flag<kRowGroupsEnv>().load(std::memory_order_relaxed)
                               ? quant_mma_grouped_rows()
                               : kQuantMmaMaxRows;
  if (M < 1 || M > max_rows || N == 0 || N > INT32_MAX / 2) return false;
  if (K <= 0 || K % kPageK != 0 || K > INT32_MAX / 2) return false;
  const int64_t ldx = leading_dim(*g.x);
  return aligned16(q.codes.data) && aligned16(g.x->data) && ldx % (half_x ? 8 : 4) == 0;
}

bool quant_mma_many_applies(std::span<const QuantMma> targets) {
  if (targets.size() < 2 || targets.size() > static_cast<size_t>(kMaxTargets)) return false;
  const QuantMma& first = targets[0];
  for (const QuantMma& t : targets) {
    if (!quant_mma_applies(t) || t.x != first.x || t.w->bits != first.w->bits ||
        t.w->group_size != first.w->group_size)
      return false;
  }
  return true;
}

bool quantized_matmul_takes_half_x(const ops::QuantizedMatrix& q, int64_t rows) {
  return switch_flag<kHalfXEnv>().load(std::memory_order_relaxed) &&
         q.scales.dtype == DType::BF16 && q.biases.dtype == DType::BF16 &&
         rows > kQuantMmaMaxRows / 2 && scales_aligned4(q);
}

void quant_mma(const QuantMma& g) {
  quant_mma_many(std::span<const QuantMma>(&g, 1));
}

void quant_mma_many(std::span<const QuantMma> targets) {
  RINGLM_CHECK(!targets.empty() && targets.size() <= static_cast<size_t>(kMaxTargets),
               "quant_mma_many: ", targets.size(), " targets");
  const ops::QuantizedMatrix& q0 = *targets[0].w;
  const Tensor& x = *targets[0].x;
  const int64_t M = x.shape[0], K = q0.cols();
  int shift = 0;
  while ((1 << shift) < q0.group_size) ++shift;
  MmaArgs args{};
  args.x = x.data;
  args.ldx = leading_dim(x);
  args.row_words = q0.codes.shape[1];
  args.groups = static_cast<int>(q0.scales.shape[1]);
  args.group_shift = shift;
  args.M = static_cast<int>(M);
  args.K = static_cast<int>(K);
  args.subnormal_codes = switch_flag<kSubnormalCodesEnv>().load(std::memory_order_relaxed);
  // Rows past 16: groups of 16 rows, or of 32 (MT = 4) where they pay (wide_groups_pay).
  const bool wide_groups = M > kGroupRows &&
                           switch_flag<kWideGroupsEnv>().load(std::memory_order_relaxed) &&
                           wide_groups_pay(M);
  const int64_t group_rows = wide_groups ? 2 * kGroupRows : kGroupRows;
  args.row_groups = static_cast<int>((M + group_rows - 1) / group_rows);
  MmaTarget* slots[kMaxTargets] = {&args.t0, &args.t1, &args.t2};
  size_t partial_offsets[kMaxTargets] = {};
  size_t partial_floats = 0;
  int blocks = 0, tickets = 0;
  for (size_t i = 0; i < static_cast<size_t>(kMaxTargets); ++i) {
    MmaTarget& t = *slots[i];
    if (i >= targets.size()) {
      t = *slots[0];
      t.block_begin = INT_MAX;
      continue;
    }
    const QuantMma& g = targets[i];
    const ops::QuantizedMatrix& q = *g.w;
    const SplitPlan plan = plan_splits(q.rows(), K);
    t.codes = q.codes.ptr<const uint32_t>();
    t.scales = static_cast<const uint16_t*>(q.scales.data);
    t.biases = static_cast<const uint16_t*>(q.biases.data);
    t.bias = {g.bias->empty() ? nullptr : g.bias->data, g.bias->dtype};
    t.y = g.y->ptr<float>();
    t.ldy = leading_dim(*g.y);
    t.N = static_cast<int>(q.rows());
    t.tiles = plan.tiles;
    t.splits = plan.splits;
    t.pages_per_split = plan.pages_per_split;
    t.block_begin = blocks;
    t.ticket_begin = tickets;
    blocks += plan.tiles * plan.splits;
    if (plan.splits > 1) {
      tickets += plan.tiles;
      partial_offsets[i] = partial_floats;
      partial_floats += static_cast<size_t>(plan.splits) * M * q.rows();
    }
  }
  Context& ctx = Context::get();
  if (partial_floats > 0) {
    auto* partials =
        static_cast<float*>(ctx.scratch(Scratch::QuantPartials, partial_floats * sizeof(float)));
    for (size_t i = 0; i < targets.size(); ++i) slots[i]->partials = partials + partial_offsets[i];
    args.tickets_per_group = tickets;
    args.tickets = static_cast<unsigned*>(ctx.scratch(
        Scratch::QuantTickets, static_cast<size_t>(tickets) * args.row_groups * sizeof(unsigned),
        /*zeroed=*/true));
  }
  blocks *= args.row_groups;   // each group of rows: every target's blocks again
  bool scales_aligned = true;  // the staged copies move 4 bytes (two groups) at a time
  for (const QuantMma& g : targets) scales_aligned = scales_aligned && scales_aligned4(*g.w);
  const bool half_x = x.dtype == DType::BF16;
  const bool wide = M > 8;
  cudaStream_t stream = ctx.stream();
  if (wide_groups) g_wide_group_count.fetch_add(1, std::memory_order_relaxed);
  if (q0.bits == 4) {
    wide_groups ? launch<4, 4>(args, blocks, scales_aligned, half_x, stream)
    : wide      ? launch<4, 2>(args, blocks, scales_aligned, half_x, stream)
                : launch<4, 1>(args, blocks, scales_aligned, half_x, stream);
  } else {
    wide_groups ? launch<8, 4>(args, blocks, scales_aligned, half_x, stream)
    : wide      ? launch<8, 2>(args, blocks, scales_aligned, half_x, stream)
                : launch<8, 1>(args, blocks, scales_aligned, half_x, stream);
  }
  check_launch("quant_mma_kernel");
  g_count.fetch_add(1, std::memory_order_relaxed);
}

bool quant_mma_enabled() {
  return switch_flag<kEnabledEnv>().load(std::memory_order_relaxed);
}

void set_quant_mma(bool enabled) {
  switch_flag<kEnabledEnv>().store(enabled, std::memory_order_relaxed);
}

bool quant_mma_staged_scales() {
  return switch_flag<kStagedEnv>().load(std::memory_order_relaxed);
}

void set_quant_mma_staged_scales(bool enabled) {
  switch_flag<kStagedEnv>().store(enabled, std::memory_order_relaxed);
}

bool quant_mma_row_groups() {
  return switch_flag<kRowGroupsEnv>().load(std::memory_order_relaxed);
}

void set_quant_mma_row_groups(bool enabled) {
  switch_flag<kRowGroupsEnv>().store(enabled, std::memory_order_relaxed);
}

bool quant_mma_wide_groups() {
  return switch_flag<kWideGroupsEnv>().load(std::memory_order_relaxed);
}

void set_quant_mma_wide_groups(bool enabled) {
  switch_flag<kWideGroupsEnv>().store(enabled, std::memory_order_relaxed);
}

namespace {
int64_t valid_grouped_rows(int64_t n) {
  return n > kQuantMmaMaxRows && n <= kQuantMmaMaxGroupedRows ? n : int64_t{0};
}
std::atomic<int64_t>& grouped_rows_setting() {
  static std::atomic<int64_t> rows{
      valid_grouped_rows(env_positive_int("RINGLM_CUDA_QUANT_MMA_GROUPED_ROWS", 0))};
  return rows;
}
}  // namespace

int64_t quant_mma_grouped_rows() {
  const int64_t rows = grouped_rows_setting().load(std::memory_order_relaxed);
  if (rows > 0) return rows;
  if (!quant_mma_wide_groups()) return kQuantMmaDefaultGroupedRows;
  static const bool slow_dram = dram_peak_gbps() < kQuantMmaWideGroupsMaxGbps;
  return slow_dram ? kQuantMmaDefaultWideGroupedRows : kQuantMmaDefaultGroupedRows;
}

void set_quant_mma_grouped_rows(int64_t rows) {
  grouped_rows_setting().store(valid_grouped_rows(rows), std::memory_order_relaxed);
}

bool quant_mma_subnormal_codes() {
  return switch_flag<kSubnormalCodesEnv>().load(std::memory_order_relaxed);
}

void set_quant_mma_subnormal_codes(bool enabled) {
  switch_flag<kSubnormalCodesEnv>().store(enabled, std::memory_order_relaxed);
}

bool quant_mma_half_x() {
  return switch_flag<kHalfXEnv>().load(std::memory_order_relaxed);
}

void set_quant_mma_half_x(bool enabled) {
  switch_flag<kHalfXEnv>().store(enabled, std::memory_order_relaxed);
}

bool quant_mma_warp_scales() {
  return warp_scales_flag().load(std::memory_order_relaxed);
}

void set_quant_mma_warp_scales(bool enabled) {
  warp_scales_flag().store(enabled, std::memory_order_relaxed);
}

bool quant_mma_smem_codes() {
  return smem_codes_flag().load(std::memory_order_relaxed);
}

void set_quant_mma_smem_codes(bool enabled) {
  smem_codes_flag().store(enabled, std::memory_order_relaxed);
}

int64_t quant_mma_smem_codes_count() {
  return g_smem_codes_count.load(std::memory_order_relaxed);
}

bool quant_mma_warp_x() {
  return switch_flag<kWarpXEnv>().load(std::memory_order_relaxed);
}

void set_quant_mma_warp_x(bool enabled) {
  switch_flag<kWarpXEnv>().store(enabled, std::memory_order_relaxed);
}

int64_t quant_mma_count() {
  return g_count.load(std::memory_order_relaxed);
}

int64_t quant_mma_wide_group_count() {
  return g_wide_group_count.load(std::memory_order_relaxed);
}

int64_t quant_mma_half_x_count() {
  return g_half_x_count.load(std::memory_order_relaxed);
}

int64_t quant_mma_warp_x_count() {
  return g_warp_x_count.load(std::memory_order_relaxed);
}

}  // namespace ringlm::cuda
