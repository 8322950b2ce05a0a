// GPU prepare_attention (q/k norm, rope, K/V write in one kernel) against the separate GPU ops it
// stands for — rms_norm per head, rope, kv_write — bit for bit, and its device-side checks.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "cuda_test_util.h"
#include "ops/ops.h"

namespace ringlm::ops {
namespace {

using testing::OnDevice;
using testing::Owned;

struct Case {
  int64_t T, heads, kv_heads, D;
  int rotary_dim;
  bool norms, unit_offset, writes_kv;
  DType norm_dtype, cache_dtype;
};

std::string label(const Case& c) {
  return "T=" + std::to_string(c.T) + " heads=" + std::to_string(c.heads) + "/" +
         std::to_string(c.kv_heads) + " D=" + std::to_string(c.D) +
         " rot=" + std::to_string(c.rotary_dim) + (c.norms ? " norms" : "") +
         (c.unit_offset ? " unit_offset" : "") + (c.writes_kv ? "" : " no-kv") + " norm " +
         testing::dtype_label(c.norm_dtype) + " cache " + testing::dtype_label(c.cache_dtype);
}

void check_case(const Case& c) {
  SCOPED_TRACE(label(c));
  const RopeTable table = testing::make_rope_table(c.rotary_dim, 1.1f, 1e6);
  const int64_t blocks = 7, bt = 4;
  Owned q(DType::F32, {c.T, c.heads, c.D}), k(DType::F32, {c.T, c.kv_heads, c.D}),
      v(DType::F32, {c.T, c.kv_heads, c.D}), pos(DType::I32, {c.T}), slots(DType::I32, {c.T}),
      q_norm(c.norm_dtype, {c.D}), k_norm(c.norm_dtype, {c.D}),
      cache_k(c.cache_dtype, {blocks, bt, c.kv_heads, c.D}),
      cache_v(c.cache_dtype, {blocks, bt, c.kv_heads, c.D});
  testing::fill_uniform(q, 60, -3.0f, 3.0f);
  testing::fill_uniform(k, 61, -3.0f, 3.0f);
  testing::fill_uniform(v, 62, -3.0f, 3.0f);
  testing::fill_uniform(q_norm, 63, 0.5f, 1.5f);
  testing::fill_uniform(k_norm, 64, -0.5f, 0.5f);
  testing::fill_uniform(cache_k, 65);
  testing::fill_uniform(cache_v, 66);
  std::vector<int32_t> perm(static_cast<size_t>(blocks * bt));
  for (size_t i = 0; i < perm.size(); ++i) perm[i] = static_cast<int32_t>(i);
  std::shuffle(perm.begin(), perm.end(), std::mt19937(67));
  std::mt19937 rng(68);
  for (int64_t t = 0; t < c.T; ++t) {
    pos.p<int32_t>()[t] = static_cast<int32_t>(rng() % 100000);
    slots.p<int32_t>()[t] = perm[static_cast<size_t>(t)];
  }
  const RmsNormConfig norm{1e-6f, c.unit_offset};
  // The fused op.
  OnDevice fq(q), fk(k), fv(v), dpos(pos), dslots(slots), dqn(q_norm), dkn(k_norm), fck(cache_k),
      fcv(cache_v);
  KvLayerView fused_view{fck.t(), fcv.t()};
  AttentionInputs in{fq.t(), c.writes_kv ? fk.t() : Tensor(), c.writes_kv ? fv.t() : Tensor(),
                     dpos.t(), dslots.t()};
  const QkTransform transform{c.norms ? &dqn.t() : nullptr, c.norms ? &dkn.t() : nullptr, norm,
                              &table};
  prepare_attention(in, transform, c.writes_kv ? &fused_view : nullptr);
  // The separate ops.
  OnDevice sq(q), sk(k), sv(v), sck(cache_k), scv(cache_v);
  KvLayerView separate_view{sck.t(), scv.t()};
  Tensor q_rows = sq.t().reshape({c.T * c.heads, c.D}),
         k_rows = sk.t().reshape({c.T * c.kv_heads, c.D});
  if (c.norms) rms_norm(q_rows, dqn.t(), norm, q_rows);
  rope(sq.t(), dpos.t(), table);
  if (c.writes_kv) {
    if (c.norms) rms_norm(k_rows, dkn.t(), norm, k_rows);
    rope(sk.t(), dpos.t(), table);
    kv_write(sk.t(), sv.t(), dslots.t(), separate_view);
  }
  cuda::synchronize();
  ASSERT_TRUE(testing::bitwise_equal(fq.to_host().t(), sq.to_host().t())) << "q";
  ASSERT_TRUE(testing::bitwise_equal(fk.to_host().t(), sk.to_host().t())) << "k";
  ASSERT_TRUE(testing::bitwise_equal(fck.to_host().t(), sck.to_host().t())) << "k cache";
  ASSERT_TRUE(testing::bitwise_equal(fcv.to_host().t(), scv.to_host().t())) << "v cache";
}

TEST(CudaPrepareAttention, EqualsSeparateOpsBitwise) {
  RINGLM_REQUIRE_GPU();
  const Case cases[] = {
      // Llama decode (no norms), Qwen3 (norms), Gemma (unit offset), odd GQA, partial rotary.
      {1, 32, 8, 128, 128, false, false, true, DType::BF16, DType::BF16},
      {5, 32, 8, 128, 128, true, false, true, DType::BF16, DType::BF16},
      {3, 8, 4, 256, 256, true, true, true, DType::BF16, DType::F16},
      {9, 5, 1, 64, 64, true, false, true, DType::F32, DType::F32},
      {4, 6, 2, 80, 40, true, true, true, DType::F16, DType::BF16},
      {2, 3, 3, 512, 512, false, false, true, DType::BF16, DType::BF16},
      {6, 12, 4, 128, 64, true, false, false, DType::BF16, DType::BF16},  // shared-KV layer
      // Shapes the kernel leaves to the separate ops (head_dim not a multiple of 4).
      {3, 4, 2, 6, 6, true, false, true, DType::F32, DType::BF16},
  };
  for (const Case& c : cases) check_case(c);
}

TEST(CudaPrepareAttention, BadPositionAndSlotAreReported) {
  RINGLM_REQUIRE_GPU();
  const RopeTable table = testing::make_rope_table(8, 1.0f, 1e6);
  Owned q(DType::F32, {2, 2, 8}), k(DType::F32, {2, 1, 8}), pos(DType::I32, {2}),
      slots(DType::I32, {2}), cache(DType::BF16, {2, 4, 1, 8});
  testing::fill_uniform(q, 70);
  testing::fill_uniform(k, 71);
  testing::fill_uniform(cache, 72);
  pos.p<int32_t>()[0] = 3;
  pos.p<int32_t>()[1] = -2;
  slots.p<int32_t>()[0] = 1;
  slots.p<int32_t>()[1] = 2;
  {
    OnDevice dq(q), dk(k), dpos(pos), dslots(slots), dck(cache), dcv(cache);
    KvLayerView view{dck.t(), dcv.t()};
    AttentionInputs in{dq.t(), dk.t(), dk.t(), dpos.t(), dslots.t()};
    prepare_attention(in, QkTransform{nullptr, nullptr, {}, &table}, &view);
    testing::expect_sync_error("position -2 at index 1");
    const Owned out = dq.to_host();
    for (int d = 0; d < 16; ++d) EXPECT_EQ(out.f(16 + d), q.f(16 + d));  // token 1 as it was
  }
  pos.p<int32_t>()[1] = 5;
  slots.p<int32_t>()[1] = 8;  // capacity 2 · 4
  OnDevice dq(q), dk(k), dpos(pos), dslots(slots), dck(cache), dcv(cache);
  KvLayerView view{dck.t(), dcv.t()};
  AttentionInputs in{dq.t(), dk.t(), dk.t(), dpos.t(), dslots.t()};
  prepare_attention(in, QkTransform{nullptr, nullptr, {}, &table}, &view);
  testing::expect_sync_error("slot 8 of token 1");
}

}  // namespace
}  // namespace ringlm::ops
