// Dispatch for attention and kv_write: shapes, dtypes and the row layout (query ranges, context
// lengths, block tables) are checked here once, so kernels can trust every index they follow.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "backends/cpu/cpu_ops.h"
#ifdef RINGLM_HAS_CUDA
#include "backends/cuda/cuda_ops.h"
#endif
#include "kv/turbo_codec.h"
#include "ops/check.h"
#include "ops/ops.h"

namespace ringlm::ops {

namespace {
// TurboQuant planes (ops.h): byte codes, f16 key scales / zero points and value scales.
void check_turbo_view(const KvLayerView& kv, const char* op) {
  const std::string k_what = std::string(op) + " kv.k", v_what = std::string(op) + " kv.v";
  check_dtype(kv.k, DType::U8, k_what.c_str());
  check_shape(kv.k, {-1, -1, -1, -1}, k_what.c_str());
  detail::check_contiguous(kv.k, k_what.c_str());
  RINGLM_CHECK(kv.k.shape[1] > 0 && kv.k.shape[2] > 0 && kv.k.shape[3] > 0, op,
               ": empty K/V block layout ", kv.k.describe());
  RINGLM_CHECK(kv.group_size == kv::kTurboGroup && kv.k.shape[3] * 8 % kv.bits == 0, op,
               ": turbo KV view with group_size ", kv.group_size, " and key rows of ",
               kv.k.shape[3], " bytes at ", kv.bits, " bits");
  const int D = kv.head_dim();
  kv::validate_turbo(kv.bits, kv.value_bits, D);
  check_dtype(kv.v, DType::U8, v_what.c_str());
  check_shape(kv.v, {kv.k.shape[0], kv.k.shape[1], kv.k.shape[2], D * kv.value_bits / 8},
              v_what.c_str());
  detail::check_contiguous(kv.v, v_what.c_str());
  for (const auto& [plane, name] : {std::pair{&kv.k_scales, "k_scales"},
                                    {&kv.k_biases, "k_biases (zero points)"},
                                    {&kv.v_scales, "v_scales"}}) {
    const std::string what = std::string(op) + " kv." + name;
    check_dtype(*plane, DType::F16, what.c_str());
    check_shape(*plane, {kv.k.shape[0], kv.k.shape[1], kv.k.shape[2], D / kv::kTurboGroup},
                what.c_str());
    detail::check_contiguous(*plane, what.c_str());
  }
}

void check_kv_view(const KvLayerView& kv, const char* op) {
  const std::string k_what = std::string(op) + " kv.k", v_what = std::string(op) + " kv.v";
  if (kv.turbo()) {
    check_turbo_view(kv, op);
    return;
  }
  if (kv.affine()) {
    RINGLM_CHECK((kv.bits == 4 || kv.bits == 8) && (kv.group_size == 32 || kv.group_size == 64), op,
                 ": affine KV view with bits ", kv.bits, " and group_size ", kv.group_size,
                 " (supported: 4 or 8 bits, groups of 32 or 64)");
    check_dtype(kv.k, DType::U32, k_what.c_str());
  } else {
    detail::check_float_storage(kv.k, k_what.c_str());
  }
  check_shape(kv.k, {-1, -1, -1, -1}, k_what.c_str());
  detail::check_contiguous(kv.k, k_what.c_str());
  check_dtype(kv.v, kv.k.dtype, v_what.c_str());
  check_shape(kv.v, {kv.k.shape[0], kv.k.shape[1], kv.k.shape[2], kv.k.shape[3]}, v_what.c_str());
  detail::check_contiguous(kv.v, v_what.c_str());
  RINGLM_CHECK(kv.k.shape[1] > 0 && kv.k.shape[2] > 0 && kv.k.shape[3] > 0, op,
               ": empty K/V block layout ", kv.k.describe());
  if (!kv.affine()) return;
  RINGLM_CHECK(kv.head_dim() % kv.group_size == 0, op, ": head_dim ", kv.head_dim(),
               " is not a multiple of the group size ", kv.group_size);
  const int64_t groups = kv.head_dim() / kv.group_size;
  for (const auto& [plane, name] : {std::pair{&kv.k_scales, "k_scales"},
                                    {&kv.k_biases, "k_biases"},
                                    {&kv.v_scales, "v_scales"},
                                    {&kv.v_biases, "v_biases"}}) {
    const std::string what = std::string(op) + " kv." + name;
    check_dtype(*plane, DType::BF16, what.c_str());
    check_shape(*plane, {kv.k.shape[0], kv.k.shape[1], kv.k.shape[2], groups}, what.c_str());
    detail::check_contiguous(*plane, what.c_str());
  }
}

}  // namespace

// Query ranges cover [0, T) in order; every row fits its queries in its context, and the blocks
// its context needs are valid block ids.
void check_attention_rows(const AttentionRows& rows, int64_t T, int64_t num_blocks,
                          int block_tokens) {
  RINGLM_CHECK(rows.num_rows >= 0, "attention: num_rows ", rows.num_rows, " is negative");
  if (rows.num_rows == 0) {
    RINGLM_CHECK(T == 0, "attention: ", T, " query tokens but no rows");
    return;
  }
  RINGLM_CHECK(
      rows.query_start != nullptr && rows.context_len != nullptr && rows.block_table != nullptr,
      "attention: rows.query_start, context_len and block_table must be set");
  RINGLM_CHECK(rows.query_pos_begin >= 0 && rows.query_pos_begin <= rows.query_pos_end,
               "attention: query positions [", rows.query_pos_begin, ", ", rows.query_pos_end,
               ") are not a range");
  RINGLM_CHECK(rows.query_start[0] == 0, "attention: query_start[0] is ", rows.query_start[0],
               ", expected 0");
  RINGLM_CHECK(rows.query_start[rows.num_rows] == T, "attention: query_start[num_rows] is ",
               rows.query_start[rows.num_rows], " but q has ", T, " tokens");
  for (int r = 0; r < rows.num_rows; ++r) {
    const int64_t n = int64_t{rows.query_start[r + 1]} - rows.query_start[r];
    const int64_t ctx = rows.context_len[r];
    RINGLM_CHECK(n >= 0, "attention: row ", r, " has query_start decreasing (", rows.query_start[r],
                 " -> ", rows.query_start[r + 1], ")");
    RINGLM_CHECK(ctx >= n, "attention: row ", r, " has context_len ", ctx, " < its ", n,
                 " queries");
    // Keys past the last computed query are never read.
    const int64_t read = std::min<int64_t>(ctx, rows.query_pos_end);
    const int64_t blocks = (read + block_tokens - 1) / block_tokens;
    // A row none of whose queries is in [query_pos_begin, query_pos_end) reads nothing.
    const bool computed = n > 0 && ctx - n < rows.query_pos_end && ctx > rows.query_pos_begin;
    RINGLM_CHECK(!computed || blocks <= rows.max_blocks, "attention: row ", r, " needs ", blocks,
                 " blocks for ", read, " tokens but max_blocks is ", rows.max_blocks);
    if (!computed || rows.tables_checked) continue;
    const int32_t* table = rows.block_table + static_cast<int64_t>(r) * rows.max_blocks;
    for (int64_t b = 0; b < blocks; ++b) {
      RINGLM_CHECK(table[b] >= 0 && table[b] < num_blocks, "attention: row ", r, " block_table[", b,
                   "] = ", table[b], " is outside [0, ", num_blocks, ")");
    }
  }
}

void attention(const Tensor& q, const KvLayerView& kv, const AttentionRows& rows,
               const AttentionParams& params, Tensor& out) {
  [[maybe_unused]] const Device dev = detail::device_of(
      "attention",
      {&q, &kv.k, &kv.v, &kv.k_scales, &kv.k_biases, &kv.v_scales, &kv.v_biases, &out});
  check_dtype(q, DType::F32, "attention q");
  check_shape(q, {-1, -1, -1}, "attention q");
  detail::check_contiguous(q, "attention q");
  check_kv_view(kv, "attention");
  check_shape(q, {-1, -1, kv.head_dim()}, "attention q (head_dim of the K/V cache)");
  RINGLM_CHECK(q.shape[1] > 0 && q.shape[1] % kv.kv_heads() == 0, "attention: ", q.shape[1],
               " query heads are not a positive multiple of ", kv.kv_heads(), " kv heads");
  // A 16-bit out (CUDA): the output rounded for a matmul that takes it as its input.
  if (dev == Device::CUDA && out.dtype != DType::F32) {
    RINGLM_CHECK(out.dtype == DType::BF16 || out.dtype == DType::F16, "attention out ",
                 out.describe(), " must be F32, BF16 or F16");
    detail::check_no_overlap(out, q, "attention out");
    // Rounded whole: queries outside a range would not be left alone.
    RINGLM_CHECK(rows.all_queries(), "attention: a ", dtype_name(out.dtype),
                 " out needs every query computed (no query position range)");
  } else {
    check_dtype(out, DType::F32, "attention out");
    detail::check_same_or_disjoint(out, q, "attention out");
  }
  check_shape(out, {q.shape[0], q.shape[1], q.shape[2]}, "attention out");
  detail::check_contiguous(out, "attention out");
  RINGLM_CHECK(std::isfinite(params.scale), "attention: scale is not finite");
  RINGLM_CHECK(params.softcap >= 0.0f && std::isfinite(params.softcap), "attention: softcap ",
               params.softcap, " must be finite and >= 0");
  RINGLM_CHECK(params.window >= 0, "attention: window ", params.window, " is negative");
  RINGLM_CHECK(params.sink_tokens >= 0, "attention: sink_tokens ", params.sink_tokens,
               " is negative");
  check_attention_rows(rows, q.shape[0], kv.k.shape[0], kv.block_tokens());
#ifdef RINGLM_HAS_CUDA
  if (dev == Device::CUDA) {
    if (rows.device_mirror != nullptr)
      return cuda::attention(q, kv, *static_cast<const cuda::DeviceRows*>(rows.device_mirror),
                             params, out, rows.query_pos_begin, rows.query_pos_end);
    return cuda::attention(q, kv, rows, params, out);
  }
#endif
  cpu::attention(q, kv, rows, params, out);
}

namespace detail {
void check_kv_write(const Tensor& k, const Tensor& v, const Tensor& slots, const KvLayerView& kv) {
  check_kv_view(kv, "kv_write");
  check_dtype(k, DType::F32, "kv_write k");
  check_shape(k, {-1, kv.kv_heads(), kv.head_dim()}, "kv_write k");
  detail::check_contiguous(k, "kv_write k");
  check_dtype(v, DType::F32, "kv_write v");
  check_shape(v, {k.shape[0], kv.kv_heads(), kv.head_dim()}, "kv_write v");
  detail::check_contiguous(v, "kv_write v");
  check_dtype(slots, DType::I32, "kv_write slots");
  check_shape(slots, {k.shape[0]}, "kv_write slots");
  detail::check_contiguous(slots, "kv_write slots");
}
}  // namespace detail

void kv_write(const Tensor& k, const Tensor& v, const Tensor& slots, KvLayerView& kv) {
  [[maybe_unused]] const Device dev = detail::device_of(
      "kv_write",
      {&k, &v, &slots, &kv.k, &kv.v, &kv.k_scales, &kv.k_biases, &kv.v_scales, &kv.v_biases});
  detail::check_kv_write(k, v, slots, kv);
  const int64_t capacity = kv.k.shape[0] * kv.k.shape[1];
#ifdef RINGLM_HAS_CUDA
  // CUDA slots live on the device: the kernel checks them (reported by cuda::synchronize()).
  if (dev == Device::CUDA) {
    return cuda::kv_write(k, v, slots, kv);
  }
#endif
  std::vector<int32_t> sorted(static_cast<size_t>(slots.shape[0]));
  for (int64_t t = 0; t < slots.shape[0]; ++t) {
    const int32_t s = slots.ptr<const int32_t>()[t];
    RINGLM_CHECK(s >= 0 && s < capacity, "kv_write: slot ", s, " of token ", t,
                 " is outside the cache [0, ", capacity, ")");
    sorted[static_cast<size_t>(t)] = s;
  }
  // Two tokens of one step in one slot is a planning bug (and a data race between threads).
  std::sort(sorted.begin(), sorted.end());
  const auto dup = std::adjacent_find(sorted.begin(), sorted.end());
  RINGLM_CHECK(dup == sorted.end(), "kv_write: slot ", dup == sorted.end() ? 0 : *dup,
               " is written by two tokens");
  cpu::kv_write(k, v, slots, kv);
}

}  // namespace ringlm::ops
