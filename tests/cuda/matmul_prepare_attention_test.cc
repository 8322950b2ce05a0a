// A block's q/k/v projections with rope and the K/V write in the decode GEMV's store
// (ops::matmul_prepare_attention, cuda::GemvRope) against the same op with that fusion switched
// off (the normalizing GEMV, then the prepare_attention kernel): q, k, v and both caches bit for
// bit, at 1 and 2 rows, bf16 and f16 weights, the GEMV's 2/4/8-column tiles, biases, each cache
// dtype, a layer without K/V, and the device errors of a bad position or slot.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "backends/cuda/cuda_ops.h"
#include "cuda_test_util.h"
#include "ops/ops.h"
#include "ops/residual_matmul.h"
#include "ops/weight.h"

namespace ringlm::ops {
namespace {

using testing::OnDevice;
using testing::Owned;

// Sets the fused-rope switch for its lifetime (it is off by default).
struct RopeSwitch {
  const bool before = cuda::gemv_fused_rope();
  explicit RopeSwitch(bool on) { cuda::set_gemv_fused_rope(on); }
  ~RopeSwitch() { cuda::set_gemv_fused_rope(before); }
  RopeSwitch(const RopeSwitch&) = delete;
  RopeSwitch& operator=(const RopeSwitch&) = delete;
};

struct Shape {
  int64_t M, K, heads, kv_heads, D;
  bool biases, writes_kv;
  DType weights, cache;
};

std::string label(const Shape& s) {
  return "M=" + std::to_string(s.M) + " K=" + std::to_string(s.K) +
         " heads=" + std::to_string(s.heads) + "/" + std::to_string(s.kv_heads) +
         " D=" + std::to_string(s.D) + (s.biases ? " biases" : "") + (s.writes_kv ? "" : " no-kv") +
         " w " + testing::dtype_label(s.weights) + " cache " + testing::dtype_label(s.cache);
}

// One layer's inputs on the host: the stream, its norm, q/k/v weights and biases, positions,
// slots and a cache filled with noise.
struct Layer {
  static constexpr int64_t kBlocks = 5, kBlockTokens = 4;
  Shape s;
  RopeTable table;
  Owned x, norm, pos, slots, cache;
  std::vector<Owned> w, bias;

  explicit Layer(const Shape& shape)
      : s(shape),
        table(testing::make_rope_table(static_cast<int>(shape.D), 1.05f, 5e5)),
        x(DType::F32, {s.M, s.K}),
        norm(s.weights, {s.K}),
        pos(DType::I32, {s.M}),
        slots(DType::I32, {s.M}),
        cache(s.cache, {kBlocks, kBlockTokens, s.kv_heads, s.D}) {
    const auto seed = static_cast<uint32_t>(s.K + s.heads * 7 + s.M);
    testing::fill_uniform(x, seed, -2.0f, 2.0f);
    testing::fill_uniform(norm, seed + 1, 0.5f, 1.5f);
    testing::fill_uniform(cache, seed + 2);
    const int64_t n[3] = {s.heads * s.D, s.kv_heads * s.D, s.kv_heads * s.D};
    for (int i = 0; i < 3; ++i) {
      w.emplace_back(s.weights, std::initializer_list<int64_t>{n[i], s.K});
      testing::fill_uniform(w.back(), seed + 3 + static_cast<uint32_t>(i));
      bias.emplace_back(DType::BF16, std::initializer_list<int64_t>{n[i]});
      testing::fill_uniform(bias.back(), seed + 6 + static_cast<uint32_t>(i));
    }
    std::mt19937 rng(seed + 9);
    std::vector<int32_t> perm(static_cast<size_t>(kBlocks * kBlockTokens));
    for (size_t i = 0; i < perm.size(); ++i) perm[i] = static_cast<int32_t>(i);
    std::shuffle(perm.begin(), perm.end(), rng);
    for (int64_t m = 0; m < s.M; ++m) {
      pos.p<int32_t>()[m] = static_cast<int32_t>(rng() % 100000);  // angles far from 0
      slots.p<int32_t>()[m] = perm[static_cast<size_t>(m)];
    }
  }
};

// q, k, v and the two caches after the op, whether the fused store applied, and the device
// error the op reported (empty: none).
struct Result {
  std::vector<Owned> out;  // q, k, v, k cache, v cache
  bool fused = false;
  std::string error;
};

Result run(const Layer& l) {
  const Shape& s = l.s;
  OnDevice dx(l.x), dnorm(l.norm), dpos(l.pos), dslots(l.slots), dck(l.cache), dcv(l.cache);
  std::vector<OnDevice> dw, db;
  for (int i = 0; i < 3; ++i) {
    dw.emplace_back(l.w[static_cast<size_t>(i)]);
    db.emplace_back(l.bias[static_cast<size_t>(i)]);
  }
  const Weight weights[3] = {Weight(dw[0].t()), Weight(dw[1].t()), Weight(dw[2].t())};
  const Tensor none;
  OnDevice q(DType::F32, {s.M, s.heads * s.D}), k(DType::F32, {s.M, s.kv_heads * s.D}),
      v(DType::F32, {s.M, s.kv_heads * s.D}), normed(DType::F32, {s.M, s.K});
  const MatmulTarget qkv[3] = {{&weights[0], s.biases ? &db[0].t() : &none, &q.t()},
                               {&weights[1], s.biases ? &db[1].t() : &none, &k.t()},
                               {&weights[2], s.biases ? &db[2].t() : &none, &v.t()}};
  AttentionInputs inputs{q.t().reshape({s.M, s.heads, s.D}), Tensor(), Tensor(), dpos.t(),
                         dslots.t()};
  KvLayerView view{dck.t(), dcv.t()};
  if (s.writes_kv) {
    inputs.k = k.t().reshape({s.M, s.kv_heads, s.D});
    inputs.v = v.t().reshape({s.M, s.kv_heads, s.D});
  }
  const NormedRows in{&dx.t(), &dnorm.t(), {1e-5f, false}};
  const QkTransform transform{nullptr, nullptr, {}, &l.table};
  KvLayerView* kv = s.writes_kv ? &view : nullptr;
  const std::span<const MatmulTarget> targets(qkv, s.writes_kv ? 3 : 1);
  Result r;
  std::vector<cuda::GemvTarget> gemv;
  for (const MatmulTarget& t : targets) gemv.push_back({&t.w->dense(), t.bias, t.y});
  const cuda::GemvNorm norm{&dnorm.t(), 1e-5f, false};
  const cuda::GemvRope rope{&l.table, &dpos.t(), &dslots.t(), kv, s.D};
  r.fused = cuda::gemv_rope_applies(dx.t(), gemv, norm, rope);
  matmul_prepare_attention(in, normed.t(), targets, inputs, transform, kv);
  try {
    cuda::synchronize();
  } catch (const Error& e) {
    r.error = e.what();
  }
  for (const OnDevice* t : {&q, &k, &v, &dck, &dcv}) r.out.push_back(t->to_host());
  return r;
}

void expect_same(const Result& fused, const Result& plain) {
  const char* names[] = {"q", "k", "v", "k cache", "v cache"};
  for (size_t i = 0; i < fused.out.size(); ++i)
    EXPECT_TRUE(testing::bitwise_equal(fused.out[i].t(), plain.out[i].t())) << names[i];
}

TEST(CudaMatmulPrepareAttention, FusedStoreEqualsGemvThenPrepareAttention) {
  RINGLM_REQUIRE_GPU();
  std::vector<Shape> shapes;
  for (DType wt : {DType::BF16, DType::F16}) {
    for (int64_t M = 1; M <= 2; ++M) {
      // Llama-3 GQA (8-column tiles), 4-column tiles, Qwen2's biases (2-column tiles), head_dim
      // 64 and 256, an f32 / f16 cache, a layer that reads a donor's K/V.
      shapes.push_back({M, 1024, 32, 8, 128, false, true, wt, DType::BF16});
      shapes.push_back({M, 520, 16, 4, 128, false, true, wt, DType::F16});
      shapes.push_back({M, 264, 14, 2, 64, true, true, wt, DType::BF16});
      shapes.push_back({M, 136, 8, 2, 256, true, true, wt, DType::F32});
      shapes.push_back({M, 520, 16, 4, 128, false, false, wt, DType::BF16});
    }
  }
  for (const Shape& s : shapes) {
    SCOPED_TRACE(label(s));
    const Layer layer(s);
    const RopeSwitch on(true);
    const Result fused = run(layer);
    EXPECT_TRUE(fused.fused) << "the fused store does not apply";
    Result plain;
    {
      const RopeSwitch off(false);
      plain = run(layer);
    }
    EXPECT_FALSE(plain.fused);
    EXPECT_EQ(fused.error, "");
    EXPECT_EQ(plain.error, "");
    expect_same(fused, plain);
  }
}

// A negative position leaves the row unrotated and out of the cache, a slot past the cache skips
// the cache: both reported as prepare_attention reports them, the rest of the step the same.
TEST(CudaMatmulPrepareAttention, BadPositionAndSlotAreReported) {
  RINGLM_REQUIRE_GPU();
  Layer layer({2, 264, 4, 2, 64, false, true, DType::BF16, DType::BF16});
  const int64_t capacity = Layer::kBlocks * Layer::kBlockTokens;
  struct Bad {
    int32_t pos, slot;
    const char* error;
  };
  for (const Bad& bad : {Bad{-2, 3, "position -2 at index 1"},
                         Bad{7, static_cast<int32_t>(capacity), "slot 20 of token 1"}}) {
    SCOPED_TRACE(bad.error);
    layer.pos.p<int32_t>()[1] = bad.pos;
    layer.slots.p<int32_t>()[1] = bad.slot;
    const RopeSwitch on(true);
    const Result fused = run(layer);
    EXPECT_TRUE(fused.fused);
    EXPECT_NE(fused.error.find(bad.error), std::string::npos) << fused.error;
    Result plain;
    {
      const RopeSwitch off(false);
      plain = run(layer);
    }
    EXPECT_NE(plain.error.find(bad.error), std::string::npos) << plain.error;
    expect_same(fused, plain);
  }
}

// Shapes the store cannot rotate — partial rotary, a head_dim not a multiple of 8, three rows —
// run as the GEMV (or cuBLAS) then prepare_attention.
TEST(CudaMatmulPrepareAttention, DeclinedShapesRunUnfused) {
  RINGLM_REQUIRE_GPU();
  const RopeSwitch on(true);
  const Shape base{1, 264, 4, 2, 64, false, true, DType::BF16, DType::BF16};
  Shape three_rows = base, odd_dim = base;
  three_rows.M = 3;
  odd_dim.D = 36;
  for (const Shape& s : {three_rows, odd_dim}) {
    SCOPED_TRACE(label(s));
    EXPECT_FALSE(run(Layer(s)).fused);
  }
  Layer partial(base);
  partial.table = testing::make_rope_table(32, 1.0f, 5e5);
  EXPECT_FALSE(run(partial).fused);
}

}  // namespace
}  // namespace ringlm::ops
