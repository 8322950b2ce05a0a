// The KV precision transition (--kv-quant-start S) at the layer level: a one-layer paged cache
// whose quantized group has a bf16 companion, written and read exactly as the decoder does
// (kv_write into both, attention over the quantized view for queries >= S and over the bf16 view
// for queries < S), against an explicit per-query oracle computed from the raw f32 K/V: the query
// at p reads every key as bf16(k) when p < S and as dequantize(quantize(k)) when p >= S — across
// S inside a prefill chunk, at a chunk boundary and in decode, with and without a sliding window
// with sinks, for affine and TurboQuant formats.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "kv/affine_codec.h"
#include "kv/paged_kv_cache.h"
#include "kv/step_plan.h"
#include "kv/turbo_codec.h"
#include "ops/ops.h"

namespace ringlm {
namespace {

constexpr int kHeads = 4, kKvHeads = 2, kDim = 64;

// One K or V row as the quantized format stores and reads it (f32).
std::vector<float> round_trip(const kv::KvFormat& f, const float* x, bool value) {
  std::vector<float> out(kDim);
  if (f.is_turbo()) {
    const int bits = value ? f.value_bits : f.bits;
    std::vector<uint8_t> codes(static_cast<size_t>(kv::turbo_code_bytes(kDim, bits)));
    std::vector<f16_t> scales(kDim / kv::kTurboGroup), zeros(scales.size());
    if (value) {
      kv::turbo_value_quantize(x, kDim, bits, codes.data(), scales.data());
      kv::turbo_value_dequantize(codes.data(), scales.data(), kDim, bits, out.data());
    } else {
      kv::turbo_key_quantize(x, kDim, bits, codes.data(), scales.data(), zeros.data());
      kv::turbo_key_dequantize(codes.data(), scales.data(), zeros.data(), kDim, bits, out.data());
    }
    return out;
  }
  const kv::AffineFormat af{f.bits, f.group_size};
  std::vector<uint32_t> codes(static_cast<size_t>(kDim * f.bits / 32));
  std::vector<float> scales(static_cast<size_t>(kDim / f.group_size)), biases(scales.size());
  kv::affine_quantize(x, kDim, af, codes.data(), scales.data(), biases.data());
  for (size_t g = 0; g < scales.size(); ++g) {  // stored in bf16
    scales[g] = bf16_to_f32(f32_to_bf16(scales[g]));
    biases[g] = bf16_to_f32(f32_to_bf16(biases[g]));
  }
  kv::affine_dequantize(codes.data(), scales.data(), biases.data(), kDim, af, out.data());
  return out;
}

struct Case {
  std::string format;
  int window = 0, sinks = 0;
};

// One sequence's raw K/V and queries, per position: [kv_heads · D] and [heads · D].
struct Stream {
  std::vector<std::vector<float>> k, v, q;
};

// Explicit dense attention in double of the query at `pos` (head h) under the per-query rule.
std::vector<double> oracle(const Case& c, const kv::KvFormat& f, int64_t S, const Stream& s,
                           int64_t pos, int h) {
  const int g = h / (kHeads / kKvHeads);
  const float* qv = s.q[static_cast<size_t>(pos)].data() + h * kDim;
  std::vector<double> scores, acc(kDim, 0.0);
  std::vector<std::vector<float>> vals;
  double mx = -INFINITY;
  for (int64_t j = 0; j <= pos; ++j) {
    const bool seen = c.window == 0 || j > pos - c.window || j < c.sinks;
    if (!seen) continue;
    const float* kr = s.k[static_cast<size_t>(j)].data() + g * kDim;
    const float* vr = s.v[static_cast<size_t>(j)].data() + g * kDim;
    std::vector<float> kk(kDim), vv(kDim);
    if (pos < S) {
      for (int d = 0; d < kDim; ++d) {
        kk[static_cast<size_t>(d)] = bf16_to_f32(f32_to_bf16(kr[d]));
        vv[static_cast<size_t>(d)] = bf16_to_f32(f32_to_bf16(vr[d]));
      }
    } else {
      kk = round_trip(f, kr, false);
      vv = round_trip(f, vr, true);
    }
    double dot = 0;
    for (int d = 0; d < kDim; ++d) dot += double{qv[d]} * kk[static_cast<size_t>(d)];
    scores.push_back(dot / std::sqrt(double{kDim}));
    mx = std::max(mx, scores.back());
    vals.push_back(vv);
  }
  double sum = 0;
  for (size_t i = 0; i < scores.size(); ++i) {
    const double p = std::exp(scores[i] - mx);
    sum += p;
    for (int d = 0; d < kDim; ++d)
      acc[static_cast<size_t>(d)] += p * vals[i][static_cast<size_t>(d)];
  }
  for (double& a : acc) a /= sum;
  return acc;
}

class QuantStartAttention : public ::testing::TestWithParam<Case> {};

// Three rows, S = 37 (inside a block of 8): A prefills [0, 50) in one chunk (S inside it), B
// prefills [0, 37) then [37, 60) (S at a chunk boundary), C prefills 30 and decodes one token per
// step to 60 (S in decode); the rows share steps. Every query's output matches the oracle, and
// the two oracles (bf16 and quantized) differ by far more than the tolerance, so a query reading
// the wrong side fails.
TEST_P(QuantStartAttention, PagedKernelEqualsPerQueryOracle) {
  const Case& c = GetParam();
  const int64_t S = 37;
  kv::KvCacheConfig cfg;
  kv::LayerKvSpec spec{kKvHeads, kDim, c.window, c.sinks, -1, kv::KvFormat::parse(c.format), S};
  cfg.layers = {spec};
  cfg.block_tokens = 8;
  cfg.memory_bytes = size_t{8} << 20;
  cfg.max_step_tokens = 128;
  kv::PagedKvCache cache(cfg);
  ASSERT_EQ(cache.num_groups(), 2);
  ASSERT_EQ(cache.group(0).dense_group, 1);
  ASSERT_TRUE(cache.group(1).is_dense_companion());
  ASSERT_EQ(cache.group(1).format, kv::KvFormat::dense(DType::BF16));
  const kv::KvFormat f = cache.group(0).format;

  std::mt19937 rng(11);
  std::uniform_real_distribution<float> uni(-2.0f, 2.0f);
  const auto row_of = [&](int n) {
    std::vector<float> r(static_cast<size_t>(n * kDim));
    for (float& x : r) x = uni(rng);
    return r;
  };
  const int64_t lengths[3] = {50, 60, 60};
  std::vector<Stream> streams(3);
  for (int r = 0; r < 3; ++r) {
    for (int64_t p = 0; p < lengths[r]; ++p) {
      streams[static_cast<size_t>(r)].k.push_back(row_of(kKvHeads));
      streams[static_cast<size_t>(r)].v.push_back(row_of(kKvHeads));
      streams[static_cast<size_t>(r)].q.push_back(row_of(kHeads));
    }
  }
  // Per step, per row: how many tokens (0 = sits out).
  const std::vector<std::vector<int>> steps = {{50, 37, 30}, {0, 23, 1}, {0, 0, 1}};
  std::vector<kv::SequenceId> seqs;
  std::vector<int64_t> done(3, 0);
  for (int r = 0; r < 3; ++r) {
    seqs.push_back(cache.add_sequence());
    ASSERT_TRUE(cache.reserve(seqs.back(), lengths[r]));
  }
  double worst = 0, separation = 0;
  int64_t checked_low = 0, checked_high = 0;
  for (int step = 0;; ++step) {
    std::vector<int> plan_n(3, 0);
    if (step < static_cast<int>(steps.size())) {
      for (int r = 0; r < 3; ++r)
        plan_n[static_cast<size_t>(r)] = steps[static_cast<size_t>(step)][static_cast<size_t>(r)];
    } else {
      if (done[2] == lengths[2]) break;
      plan_n[2] = 1;
    }
    std::vector<kv::RowRequest> rows;
    std::vector<int> row_of_req;
    for (int r = 0; r < 3; ++r) {
      const int n = plan_n[static_cast<size_t>(r)];
      if (n == 0) continue;
      ASSERT_TRUE(cache.append(seqs[static_cast<size_t>(r)], n));
      rows.push_back({seqs[static_cast<size_t>(r)], std::vector<int32_t>(static_cast<size_t>(n), 1),
                      done[static_cast<size_t>(r)], true, true});
      row_of_req.push_back(r);
    }
    kv::StepPlan plan(rows, cache);
    const int64_t T = plan.num_tokens();
    std::vector<float> k(static_cast<size_t>(T * kKvHeads * kDim)), v(k.size()),
        q(static_cast<size_t>(T * kHeads * kDim)), out(q.size(), NAN);
    int64_t t = 0;
    for (size_t i = 0; i < rows.size(); ++i) {
      const Stream& s = streams[static_cast<size_t>(row_of_req[i])];
      for (size_t j = 0; j < rows[i].tokens.size(); ++j, ++t) {
        const auto p = static_cast<size_t>(rows[i].start_position) + j;
        std::copy(s.k[p].begin(), s.k[p].end(), k.begin() + t * kKvHeads * kDim);
        std::copy(s.v[p].begin(), s.v[p].end(), v.begin() + t * kKvHeads * kDim);
        std::copy(s.q[p].begin(), s.q[p].end(), q.begin() + t * kHeads * kDim);
      }
    }
    Tensor kt(k.data(), DType::F32, {T, kKvHeads, kDim}),
        vt(v.data(), DType::F32, {T, kKvHeads, kDim});
    Tensor qt(q.data(), DType::F32, {T, kHeads, kDim}),
        ot(out.data(), DType::F32, {T, kHeads, kDim});
    // What decoder.cc does for a transitioning layer.
    const kv::StepPlan::Layer layer = plan.layer(0);
    ASSERT_NE(layer.dense_rows, nullptr);
    ops::KvLayerView view = cache.layer_view(0), dense = cache.dense_layer_view(0);
    ops::kv_write(kt, vt, layer.slots, view);
    for (const kv::StepPlan::TokenRange& w : *layer.dense_writes) {
      ops::kv_write(kt.slice_rows(w.begin, w.end), vt.slice_rows(w.begin, w.end),
                    layer.dense_slots.slice_rows(w.begin, w.end), dense);
    }
    ops::AttentionParams params;
    params.scale = 1.0f / std::sqrt(static_cast<float>(kDim));
    params.window = c.window;
    params.sink_tokens = c.sinks;
    ops::attention(qt, view, *layer.rows, params, ot);
    ops::attention(qt, dense, *layer.dense_rows, params, ot);
    t = 0;
    for (size_t i = 0; i < rows.size(); ++i) {
      const Stream& s = streams[static_cast<size_t>(row_of_req[i])];
      for (size_t j = 0; j < rows[i].tokens.size(); ++j, ++t) {
        const int64_t p = rows[i].start_position + static_cast<int64_t>(j);
        (p < S ? checked_low : checked_high)++;
        for (int h = 0; h < kHeads; ++h) {
          const std::vector<double> want = oracle(c, f, S, s, p, h);
          // The other side of the rule: what a query reading the wrong keys would get.
          const std::vector<double> other = oracle(c, f, p < S ? 0 : p + 1, s, p, h);
          for (int d = 0; d < kDim; ++d) {
            const double got = out[static_cast<size_t>((t * kHeads + h) * kDim + d)];
            worst = std::max(worst, std::fabs(got - want[static_cast<size_t>(d)]));
            separation = std::max(separation, std::fabs(want[static_cast<size_t>(d)] -
                                                        other[static_cast<size_t>(d)]));
          }
        }
      }
    }
    for (size_t i = 0; i < rows.size(); ++i)
      done[static_cast<size_t>(row_of_req[i])] += static_cast<int64_t>(rows[i].tokens.size());
  }
  EXPECT_GT(checked_low, 60);
  EXPECT_GT(checked_high, 40);
  // f32 kernel vs double oracle over the same f32 K/V (turbo: the deferred rotation's f32
  // transforms too): far below the bf16-vs-quantized gap.
  EXPECT_LT(worst, 2e-4) << c.format;
  EXPECT_GT(separation, 20 * 2e-4) << c.format;
  for (kv::SequenceId s : seqs) {
    ASSERT_TRUE(cache.append(s, 1));  // past S + lookahead: the bf16 blocks go
    for (int32_t b : cache.block_table(s, 1)) EXPECT_EQ(b, 0);
    cache.release(s);
  }
  EXPECT_EQ(cache.used_blocks(), 0);
}

INSTANTIATE_TEST_SUITE_P(Formats, QuantStartAttention,
                         ::testing::Values(Case{"int8-g32"}, Case{"int4-g64"}, Case{"turbo"},
                                           Case{"int8-g64", 24, 4}, Case{"turbo:k4v3", 20, 3}),
                         [](const auto& param_info) {
                           std::string name = param_info.param.format;
                           for (char& ch : name)
                             if (ch == '-' || ch == ':') ch = '_';
                           if (param_info.param.window > 0) name += "_window";
                           return name;
                         });

// A narrowed query range leaves the other rows untouched and computes the others bitwise as the
// full call does (the transition's two calls reassemble exactly the plain kernels' outputs).
TEST(QuantStartAttention, NarrowedRangeComputesExactlyItsQueries) {
  kv::KvCacheConfig cfg;
  cfg.layers = {{kKvHeads, kDim, 0, 0, -1, kv::KvFormat::dense(DType::BF16)}};
  cfg.block_tokens = 8;
  cfg.memory_bytes = size_t{4} << 20;
  kv::PagedKvCache cache(cfg);
  const auto s = cache.add_sequence();
  ASSERT_TRUE(cache.append(s, 40));
  kv::StepPlan plan({{s, std::vector<int32_t>(40, 1), 0, true, true}}, cache);
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> uni(-1.0f, 1.0f);
  std::vector<float> k(40 * kKvHeads * kDim), v(k.size()), q(40 * kHeads * kDim);
  for (auto* x : {&k, &v, &q})
    for (float& e : *x) e = uni(rng);
  Tensor kt(k.data(), DType::F32, {40, kKvHeads, kDim}),
      vt(v.data(), DType::F32, {40, kKvHeads, kDim});
  Tensor qt(q.data(), DType::F32, {40, kHeads, kDim});
  ops::KvLayerView view = cache.layer_view(0);
  ops::kv_write(kt, vt, plan.slots(0), view);
  std::vector<float> full(q.size()), part(q.size(), 7.0f);
  Tensor ft(full.data(), DType::F32, {40, kHeads, kDim}),
      pt(part.data(), DType::F32, {40, kHeads, kDim});
  ops::AttentionParams params;
  params.scale = 0.125f;
  ops::attention(qt, view, plan.attention_rows(0), params, ft);
  ops::AttentionRows narrowed = plan.attention_rows(0);
  narrowed.query_pos_begin = 13;
  narrowed.query_pos_end = 29;
  ops::attention(qt, view, narrowed, params, pt);
  for (int64_t t = 0; t < 40; ++t) {
    const size_t at = static_cast<size_t>(t * kHeads * kDim);
    if (t >= 13 && t < 29) {
      EXPECT_EQ(std::memcmp(part.data() + at, full.data() + at, kHeads * kDim * sizeof(float)), 0)
          << t;
    } else {
      EXPECT_EQ(part[at], 7.0f) << t;
    }
  }
  cache.release(s);
}

}  // namespace
}  // namespace ringlm
