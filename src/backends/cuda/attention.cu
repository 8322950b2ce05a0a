// Causal GQA attention over paged K/V on the GPU, online softmax in f32. K/V are read through a
// format reader (device/kv_load.cuh: f32/bf16/f16; device/kv_readers.cuh picks affine or
// TurboQuant readers that decode codes in registers), so one kernel body serves every KV format.
//
// Core: a block of kWarps warps runs one (query token, query head) over a range of its visible
// keys (device::VisibleKeys: causal, window, attention sinks). Warp w walks keys i = begin + w,
// begin + w + kWarps, ... < end, finding each through the row's block table; lane l holds dims
// l, l + 32, ... of q, of the running output and of each K/V row. Per key: s = (q·k) · scale
// (soft-capped: cap · tanh(s / cap)); m' = max(m, s); l = l·e^(m−m') + e^(s−m');
// acc = acc·e^(m−m') + e^(s−m')·v. The warps' (m, l, acc) merge in shared memory in warp order.
//
// Kernels, chosen per row (never per batch):
// - rows with several queries (prefill chunks): one block per (token, head) over all its keys;
//   out = acc / l.
// - rows with one query (decode): split-K (flash decoding) over parts of split_rule.split(count)
//   visible keys. 16-bit and quantized K/V with head_dim 64/128/256 go to the tensor-core kernel
//   (device/attention_decode_tc.cuh), other usual shapes to the GQA-grouped CUDA-core kernel
//   (device/attention_decode.cuh: one block per (row, kv head, part) for all the kv head's query
//   heads), the rest to attention_split_kernel here (one block per (row, head, part)). Both leave
//   (m, l, acc) per part and device::decode_merge_kernel merges the parts in order.
// Each query's output is a fixed sequence of operations on its own position, window and keys,
// whatever else is in the step: a row's bits are the same alone or batched.
//
// Translation units: this file (the entry points, tables, the format dispatch), the kernels and
// the per-format launch in device/attention_core.cuh, instantiated per KV format in
// attention_dense.cu, attention_affine.cu and attention_turbo.cu.
#include <atomic>
#include <bit>
#include <cstdint>
#include <cstdlib>
#include <limits>

#include "backends/cuda/attention_launch.h"
#include "backends/cuda/cuda_ops.h"
#include "backends/cuda/device/attention_common.cuh"
#include "backends/cuda/device/kv_readers.cuh"
#include "backends/cuda/device_rows.h"
#include "backends/cuda/quantized_kv.h"

namespace ringlm::cuda {

namespace {

using device::AttnArgs;

std::atomic<int> g_decode_part_limit{0};  // 0: split_rule_for's per-format choice
// Decode rows from which a step takes wide parts (split_rule_for); RINGLM_CUDA_DECODE_WIDE_ROWS
// sets it at start-up (0: never; for same-binary A/B runs).
std::atomic<int> g_wide_decode_rows{[] {
  const char* v = std::getenv("RINGLM_CUDA_DECODE_WIDE_ROWS");
  const int rows = v == nullptr ? 17 : std::atoi(v);
  return rows >= 3 ? rows : 0;  // below 3: never
}()};
// Warps per block of the 16-bit and k8v3 tensor-core decode kernels in steps of fewer decode rows
// than wide_decode_rows() (wide steps keep 4: their grid fills the SMs anyway).
// RINGLM_CUDA_DECODE_WARPS=8 sets 8 at start-up (for same-binary A/B runs).
std::atomic<int> g_narrow_decode_warps{[] {
  const char* v = std::getenv("RINGLM_CUDA_DECODE_WARPS");
  return v != nullptr && std::atoi(v) == 8 ? 8 : 4;
}()};
// Rows of at most this many keys decode in one part; 0: none (cuda::set_decode_single_part).
// RINGLM_CUDA_DECODE_SINGLE_PART sets it at start-up (for same-binary A/B runs).
std::atomic<int> g_decode_single_part{[] {
  const char* v = std::getenv("RINGLM_CUDA_DECODE_SINGLE_PART");
  const int keys = v == nullptr ? 0 : std::atoi(v);
  return keys >= 64 && keys <= 8192 && keys % 64 == 0 ? keys : 0;  // else ignored
}()};
// Fewest keys per decode part; 0: split_rule_for's choice. RINGLM_CUDA_DECODE_MIN_SPLIT sets it
// at start-up (for same-binary A/B runs).
std::atomic<int> g_decode_min_split{[] {
  const char* v = std::getenv("RINGLM_CUDA_DECODE_MIN_SPLIT");
  const int keys = v == nullptr ? 0 : std::atoi(v);
  return keys >= 64 && keys <= 8192 && keys % 64 == 0 ? keys : 0;  // else ignored
}()};

// The decode split for K/V stored like `kv` (H200, Llama-3.1-8B shape, docs/benchmarks.md,
// "Decode parts per query"): long parts amortize a block's set-up and merge, more parts keep the
// SMs busy. Part limit for 16-bit K/V: 17 (their decode streams near the bandwidth with about
// one block per SM at batch 1; at 32k 17 parts beat 5, 9, 33 and 65, at 4k 65). TurboQuant k8v3:
// 33 parts (beat 17, 47 and 65). Others: 65, the part counts they were measured with. At least
// 256 keys per part for every tensor-core format: at 512 context 64-key parts left each warp one
// tile (bf16: +23 % at batch 256, +5 % at 32, -0.8 % at 1; k8v3: +25 % at 128, -1.9 % at 1; 512
// keys gained 1-3 % more at batches >= 64 and lost 2-5 % at batch 1). f32 K/V (the CUDA-core
// kernel): 64. In steps of 1-16 decode rows the rule depends only on the format: a row's bits are
// independent of the batch.
// Parts are balanced (DecodeSplit::balanced) unless RINGLM_CUDA_DECODE_BALANCED=0 (A/B runs).
// Wide steps (decode_rows >= wide_decode_rows(), 17 by default) take parts of at least
// kWideMinKeys keys for every tensor-core format: with that many rows the grid fills the GPU
// anyway, and twice the tiles per warp halve the blocks' set-ups, partials and merge reads (the
// short-context decode kernel is bound by its per-warp prologue). H100, same binary, against 256
// keys at every batch: bf16 512 × 16 / 64 / 128 / 256 1.000 / 1.003 / 1.008 / 1.016, 4k × 16 /
// 64 1.009 / 1.013; k8v3 512 × 64 / 128 1.015 / 1.028, 4k × 16 / 64 1.044 / 1.094; at 8 rows
// it lost 1.2 % (docs/benchmarks.md, nineteenth session). Batch invariance: steps of 3+ rows
// already run cuBLAS matmuls that pick their algorithm by M (a row equals its serial run within
// f32 rounding there, not bitwise); steps of up to 16 rows, whose matmuls may be bitwise
// M-independent (the GEMV's 1-2 rows, quant_mma's up to 16 of quantized weights), never take the
// wide rule, and a step's rule depends only on its shape (CUDA graphs keep it).
constexpr int kWideMinKeys = 512;
device::DecodeSplit split_rule_for(const ops::KvLayerView& kv, int decode_rows) {
  static const bool balanced = env_switch_on("RINGLM_CUDA_DECODE_BALANCED");
  device::DecodeSplit rule{65, 256, balanced};
  if (kv.dense() && kv.k.dtype == DType::F32) rule.min_keys = 64;
  if (kv.dense() && kv.k.dtype != DType::F32) rule.part_limit = 17;
  if (kv.turbo() && kv.bits == 8 && kv.value_bits == 3) rule.part_limit = 33;
  if (rule.min_keys == 256 && decode_rows >= wide_decode_rows()) rule.min_keys = kWideMinKeys;
  if (const int forced = g_decode_part_limit.load(); forced > 0) rule.part_limit = forced;
  if (const int forced = g_decode_min_split.load(); forced > 0) rule.min_keys = forced;
  rule.single_part_keys = g_decode_single_part.load();
  return rule;
}

// drows: device tables; its query_pos_begin / end choose the queries computed. A 16-bit out (the
// o projection's input, ops::matmul_input_dtype): in a decode-only step over every query the
// merges write it rounded (no conversion pass); any other step runs into f32 scratch and rounds
// that after — the same bits either way.
void run_attention(const Tensor& q, const ops::KvLayerView& kv, const ops::AttentionRows& drows,
                   const RowsSummary& summary, const ops::AttentionParams& params, Tensor& out) {
  const int64_t T = q.shape[0], QH = q.shape[1], D = q.shape[2];
  if (T == 0) return;
  const bool rounded = out.dtype != DType::F32;
  if (rounded && (summary.other_rows > 0 || summary.decode_rows == 0 || !drows.all_queries() ||
                  !merge_rounded())) {
    Tensor f32(Context::get().scratch(Scratch::AttentionOutput,
                                      static_cast<size_t>(T * QH * D) * sizeof(float)),
               DType::F32, {T, QH, D}, Device::CUDA);
    run_attention(q, kv, drows, summary, params, f32);
    Tensor rows = f32.reshape({T, QH * D}), out_rows = out.reshape({T, QH * D});
    return round_rows(rows, out_rows);
  }
  RINGLM_CHECK(D <= kMaxHeadDim, "attention: head_dim ", D,
               " is above the CUDA backend's limit of ", kMaxHeadDim);
  RINGLM_CHECK(T * QH <= INT32_MAX && int64_t{drows.num_rows} * QH <= INT32_MAX,
               "attention: ", q.describe(), " has too many (token, head) pairs");
  Context& ctx = Context::get();
  AttnArgs args{};
  args.q = q.ptr<const float>();
  args.out = rounded ? nullptr : out.ptr<float>();
  args.out_rounded = rounded ? out.data : nullptr;
  args.out_rounded_dtype = out.dtype;
  args.query_start = drows.query_start;
  args.context_len = drows.context_len;
  args.block_table = drows.block_table;
  args.num_rows = drows.num_rows;
  args.max_blocks = drows.max_blocks;
  args.q_heads = static_cast<int>(QH);
  args.kv_heads = kv.kv_heads();
  args.head_dim = static_cast<int>(D);
  args.block_tokens = kv.block_tokens();
  args.block_shift = std::has_single_bit(static_cast<unsigned>(args.block_tokens))
                         ? std::countr_zero(static_cast<unsigned>(args.block_tokens))
                         : -1;
  args.scale = params.scale;
  args.softcap = params.softcap;
  args.window = params.window;
  args.sink_tokens = params.sink_tokens;
  args.query_pos_begin = drows.query_pos_begin;
  args.query_pos_end = drows.query_pos_end;
  args.split_decode = true;
  args.split_rule = split_rule_for(kv, summary.decode_rows);
  args.max_parts = args.split_rule.parts_bound(summary.max_decode_context);
  args.decode_warps = summary.decode_rows < wide_decode_rows() ? g_narrow_decode_warps.load() : 4;
  args.early_fetch = decode_early_fetch();
  args.affine_prefetch = decode_affine_prefetch();
  if (summary.decode_rows > 0) {
    // Partials of every (row, head, part); rows that are not decode rows leave theirs unused.
    const int64_t slots = int64_t{drows.num_rows} * QH * args.max_parts;
    auto* scratch = static_cast<float*>(ctx.scratch(
        Scratch::AttentionPartials, static_cast<size_t>(slots * (2 + D)) * sizeof(float)));
    args.part_ml = scratch;
    args.part_acc = scratch + 2 * slots;
  }
  // TurboQuant: the kernels accumulate rotated values. In a step of decode rows only, the merge
  // of the split-K parts un-rotates each row it writes; otherwise a pass over the output does.
  const bool merge_unrotates = kv.turbo() && summary.other_rows == 0 && summary.decode_rows > 0;
  if (merge_unrotates) args.merge_unrotate_signs = turbo_signs_on_device(static_cast<int>(D));
  device::with_kv_reader(kv, [&](const auto& reader) {
    attention_detail::launch_for_format(args, reader, summary, T, ctx.stream());
  });
  if (kv.turbo() && !merge_unrotates) {
    TokenPositions only;
    if (!drows.all_queries()) {
      only.query_start = drows.query_start;
      only.context_len = drows.context_len;
      only.num_rows = drows.num_rows;
      only.begin = drows.query_pos_begin;
      only.end = drows.query_pos_end;
    }
    turbo_unrotate_rows(out, only);
  }
}

}  // namespace

void set_decode_part_limit(int parts) {
  RINGLM_USER_CHECK(parts >= 1 && parts <= 1024, "decode part limit ", parts,
                    " must be in [1, 1024]");
  g_decode_part_limit.store(parts);
}

int decode_part_limit() {
  return g_decode_part_limit.load();
}

void set_narrow_decode_warps(int warps) {
  RINGLM_USER_CHECK(warps == 4 || warps == 8, "decode warps per block ", warps, " must be 4 or 8");
  g_narrow_decode_warps.store(warps);
}

int narrow_decode_warps() {
  return g_narrow_decode_warps.load();
}

void set_wide_decode_rows(int rows) {
  g_wide_decode_rows.store(rows >= 3 ? rows : 0);
}

int wide_decode_rows() {
  const int rows = g_wide_decode_rows.load();
  return rows > 0 ? rows : std::numeric_limits<int>::max();
}

void set_decode_single_part(int keys) {
  RINGLM_USER_CHECK(keys == 0 || (keys >= 64 && keys <= 8192 && keys % 64 == 0),
                    "single-part decode rows of up to ", keys,
                    " keys: 0 or a multiple of 64 in [64, 8192]");
  g_decode_single_part.store(keys);
}

void set_decode_min_split(int keys) {
  RINGLM_USER_CHECK(keys >= 64 && keys <= 8192 && keys % 64 == 0, "decode part size ", keys,
                    " must be a multiple of 64 in [64, 8192]");
  g_decode_min_split.store(keys);
}

namespace {
std::atomic<bool>& merge_rounded_flag() {
  static std::atomic<bool> enabled{env_switch_on("RINGLM_CUDA_MERGE_ROUNDED")};
  return enabled;
}
}  // namespace

void set_merge_rounded(bool enabled) {
  merge_rounded_flag().store(enabled);
}

bool merge_rounded() {
  return merge_rounded_flag().load();
}

namespace {
std::atomic<bool>& merge_in_kernel_flag() {
  static std::atomic<bool> enabled{env_switch_on("RINGLM_CUDA_MERGE_IN_KERNEL")};
  return enabled;
}
std::atomic<bool>& decode_direct_flag() {  // off by default
  static std::atomic<bool> enabled{env_switch_on("RINGLM_CUDA_DECODE_DIRECT", false)};
  return enabled;
}
std::atomic<int64_t> g_direct_decodes{0};
}  // namespace

namespace attention_detail {
bool take_direct_decode(const device::AttnArgs& args) {
  if (!decode_direct_flag().load() || args.max_parts != 1) return false;
  g_direct_decodes.fetch_add(1, std::memory_order_relaxed);
  return true;
}
}  // namespace attention_detail

void set_decode_direct(bool enabled) {
  decode_direct_flag().store(enabled);
}

bool decode_direct() {
  return decode_direct_flag().load();
}

int64_t decode_direct_count() {
  return g_direct_decodes.load(std::memory_order_relaxed);
}

namespace {
std::atomic<bool>& early_fetch_flag() {
  static std::atomic<bool> enabled{env_switch_on("RINGLM_CUDA_DECODE_EARLY")};
  return enabled;
}

std::atomic<bool>& affine_prefetch_flag() {
  static std::atomic<bool> enabled{env_switch_on("RINGLM_CUDA_AFFINE_PREFETCH")};
  return enabled;
}

std::atomic<bool>& prefill_tc_extended_flag() {
  static std::atomic<bool> enabled{env_switch_on("RINGLM_CUDA_PREFILL_TC_EXTENDED")};
  return enabled;
}
}  // namespace

void set_decode_early_fetch(bool enabled) {
  early_fetch_flag().store(enabled);
}

bool decode_early_fetch() {
  return early_fetch_flag().load();
}

void set_decode_affine_prefetch(bool enabled) {
  affine_prefetch_flag().store(enabled);
}

bool decode_affine_prefetch() {
  return affine_prefetch_flag().load();
}

void set_decode_merge_in_kernel(bool enabled) {
  merge_in_kernel_flag().store(enabled);
}

bool decode_merge_in_kernel() {
  return merge_in_kernel_flag().load();
}

void set_prefill_tc_extended(bool enabled) {
  prefill_tc_extended_flag().store(enabled);
}

bool prefill_tc_extended() {
  return prefill_tc_extended_flag().load();
}

void attention(const Tensor& q, const ops::KvLayerView& kv, const ops::AttentionRows& rows,
               const ops::AttentionParams& params, Tensor& out) {
  if (q.shape[0] == 0) return;
  void* dst = Context::get().scratch(Scratch::Rows, packed_rows_bytes(rows));
  ops::AttentionRows view = upload_rows(rows, dst);
  view.query_pos_begin = rows.query_pos_begin;
  view.query_pos_end = rows.query_pos_end;
  run_attention(q, kv, view, summarize_rows(rows), params, out);
}

void attention(const Tensor& q, const ops::KvLayerView& kv, const DeviceRows& device_rows,
               const ops::AttentionParams& params, Tensor& out, int32_t query_pos_begin,
               int32_t query_pos_end) {
  ops::AttentionRows view = device_rows.view();
  view.query_pos_begin = query_pos_begin;
  view.query_pos_end = query_pos_end;
  run_attention(q, kv, view, device_rows.summary(), params, out);
}

}  // namespace ringlm::cuda
