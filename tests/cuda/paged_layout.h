// Paged layouts for the GPU attention tests (dense and quantized KV): rows of a step with their
// blocks scattered through the pool, and the batch-invariance check (a row alone = the same row
// batched, bitwise).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <random>
#include <vector>

#include "backends/cuda/device_rows.h"
#include "cuda_test_util.h"
#include "ops/ops.h"

namespace ringlm::ops::testing {

struct RowSpec {
  int n;    // queries this step
  int ctx;  // tokens in the KV after the step
};

// A paged layout: each row's blocks are scattered through the pool in random order; block 0 is
// the null block (never used by a row) and tables are padded with it.
struct Layout {
  int block_tokens = 0, num_blocks = 0, max_blocks = 0;
  std::vector<int32_t> query_start, context_len, block_table;
  AttentionRows rows() const {
    AttentionRows r;
    r.num_rows = static_cast<int>(context_len.size());
    r.query_start = query_start.data();
    r.context_len = context_len.data();
    r.block_table = block_table.data();
    r.max_blocks = max_blocks;
    return r;
  }
  int tokens() const { return query_start.back(); }
};

inline Layout make_layout(const std::vector<RowSpec>& specs, int block_tokens, uint32_t seed) {
  Layout L;
  L.block_tokens = block_tokens;
  L.query_start.push_back(0);
  int total = 0;
  for (const RowSpec& s : specs) {
    const int blocks = (s.ctx + block_tokens - 1) / block_tokens;
    L.max_blocks = std::max(L.max_blocks, blocks);
    total += blocks;
    L.query_start.push_back(L.query_start.back() + s.n);
    L.context_len.push_back(s.ctx);
  }
  L.num_blocks = total + 3;  // + the null block and two that no row uses
  std::vector<int32_t> ids(static_cast<size_t>(L.num_blocks - 1));
  std::iota(ids.begin(), ids.end(), 1);
  std::shuffle(ids.begin(), ids.end(), std::mt19937(seed));
  L.block_table.assign(specs.size() * static_cast<size_t>(L.max_blocks), 0);
  size_t next = 0;
  for (size_t r = 0; r < specs.size(); ++r) {
    const int blocks = (specs[r].ctx + block_tokens - 1) / block_tokens;
    for (int b = 0; b < blocks; ++b)
      L.block_table[r * static_cast<size_t>(L.max_blocks) + static_cast<size_t>(b)] = ids[next++];
  }
  return L;
}

// Runs the whole step batched, then each row alone (its own one-row layout over the same cache),
// and checks that the row's outputs are the batched ones bit for bit: a row's output does not
// depend on what else is in the step. Use as ASSERT_TRUE(rows_alone_equal_batched(...)).
inline ::testing::AssertionResult rows_alone_equal_batched(
    const Tensor& q,  // F32[T, q_heads, head_dim], on the device
    const KvLayerView& view, const Layout& L, const AttentionParams& params) {
  const int64_t T = q.shape[0], heads = q.shape[1], D = q.shape[2];
  OnDevice dout(DType::F32, {T, heads, D});
  attention(q, view, L.rows(), params, dout.t());
  const Owned all = dout.to_host();
  for (size_t r = 0; r < L.context_len.size(); ++r) {
    const int q0 = L.query_start[r], n = L.query_start[r + 1] - q0;
    if (n == 0) continue;
    const int32_t qs[2] = {0, n};
    AttentionRows one;
    one.num_rows = 1;
    one.query_start = qs;
    one.context_len = &L.context_len[r];
    one.block_table = &L.block_table[r * static_cast<size_t>(L.max_blocks)];
    one.max_blocks = L.max_blocks;
    OnDevice alone(DType::F32, {n, heads, D});
    attention(q.slice_rows(q0, q0 + n), view, one, params, alone.t());
    if (!bitwise_equal(alone.to_host().t(), all.t().slice_rows(q0, q0 + n)))
      return ::testing::AssertionFailure() << "row " << r;
  }
  return ::testing::AssertionSuccess();
}

// The step into `out_dtype` with the decode kernels writing the outputs (cuda::set_decode_direct)
// and with the merge kernel: the same bits, and `expected_direct` steps (0 or 1) that took it.
inline ::testing::AssertionResult direct_write_changes_no_bits(
    const Tensor& q,  // F32[T, q_heads, head_dim], on the device
    const KvLayerView& view, const AttentionRows& rows, const AttentionParams& params,
    DType out_dtype, int64_t expected_direct) {
  const int64_t T = q.shape[0], heads = q.shape[1], D = q.shape[2];
  OnDevice merged(out_dtype, {T, heads, D}), direct(out_dtype, {T, heads, D});
  attention(q, view, rows, params, merged.t());
  cuda::set_decode_direct(true);
  const int64_t before = cuda::decode_direct_count();
  attention(q, view, rows, params, direct.t());
  const int64_t took = cuda::decode_direct_count() - before;
  cuda::set_decode_direct(false);
  if (took != expected_direct)
    return ::testing::AssertionFailure()
           << took << " direct steps, " << expected_direct << " expected";
  if (!bitwise_equal(direct.to_host().t(), merged.to_host().t()))
    return ::testing::AssertionFailure() << "the direct write's bits differ from the merge's";
  return ::testing::AssertionSuccess();
}

// `out` (F32[T, q_heads, head_dim]), the step's output, again through the tables uploaded once
// (DeviceRows) and in place (out aliases q): the same bits both ways. Overwrites q.
inline ::testing::AssertionResult device_rows_and_in_place_match(
    OnDevice& q,  // F32[T, q_heads, head_dim]
    const KvLayerView& view, const Layout& L, const AttentionParams& params, const Owned& out) {
  cuda::DeviceRows drows;
  drows.upload(L.rows());
  OnDevice again(DType::F32, {out.t().shape[0], out.t().shape[1], out.t().shape[2]});
  cuda::attention(q.t(), view, drows, params, again.t());
  if (!bitwise_equal(again.to_host().t(), out.t()))
    return ::testing::AssertionFailure() << "DeviceRows differ from the per-call upload";
  attention(q.t(), view, L.rows(), params, q.t());
  if (!bitwise_equal(q.to_host().t(), out.t()))
    return ::testing::AssertionFailure() << "in place differs";
  return ::testing::AssertionSuccess();
}

}  // namespace ringlm::ops::testing
