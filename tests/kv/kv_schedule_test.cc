// The KV block layer under a real model, on every fixture: any schedule of joins, leaves, chunk
// sizes, batch compositions and speculative rollbacks gives each row bit-exactly the logits it
// gets alone (speculative tokens rolled back after up to `lookahead` of them, over one or several
// steps), through many window wraps (sequences up to 7x the fixtures' window of 16, and with
// --max-kv-size 20 / keep 4 so that full-attention fixtures slide too); sliding groups stay
// within their block cap and the pools end empty. Fork (copy-on-write) and save/load continue
// exactly like the straight run. The same under the affine KV formats (int8 / int4, groups of
// 32 on the fixtures whose head_dim allows it, groups of 64 on a random head_dim-64 Llama) and
// the TurboQuant formats (turbo = k8v3 on the head_dim-32 fixtures and the head_dim-64 Llama,
// turbo:k4v2 on the latter), and with the precision transition (--kv-quant-start: bf16 K/V for
// the queries before a position, quantized after).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <random>
#include <tuple>

#include "engine/runner.h"
#include "kv/step_plan.h"
#include "kv_run_util.h"
#include "kv_test_models.h"
#include "models/golden_util.h"
#include "models/model.h"

namespace ringlm {
namespace {

using testing::expect_same_logits;
using testing::Logits;

// `format` may end in "@S": the precision transition from bf16 at position S (--kv-quant-start).
engine::RunnerConfig runner_config(bool bounded, int lookahead, const std::string& format = "f32") {
  engine::RunnerConfig rc;
  const size_t at = format.find('@');
  rc.kv_format = kv::KvFormat::parse(format.substr(0, at));
  if (at != std::string::npos) rc.kv_quant_start = std::stoll(format.substr(at + 1));
  rc.kv_memory_bytes = size_t{32} << 20;
  rc.block_tokens = 8;
  rc.max_step_tokens = 96;
  rc.lookahead = lookahead;
  if (bounded) {
    rc.max_kv_size = 20;
    rc.kv_keep = 4;
  }
  return rc;
}

// A token sequence of `n` ids taken from the fixture's prompt, different for each `salt`.
std::vector<int32_t> tokens_for(const std::vector<int32_t>& prompt, size_t n, size_t salt) {
  std::vector<int32_t> out;
  for (size_t i = 0; out.size() < n; ++i) {
    const size_t k = (i * (2 * salt + 1) + 7 * salt) % prompt.size();
    out.push_back(prompt[k]);
  }
  return out;
}

// Runs one step of rows (already appended) and returns the runner's logits.
Tensor run_step(engine::Runner& runner, const std::vector<kv::RowRequest>& rows) {
  kv::StepPlan plan(rows, runner.cache());
  return runner.step(plan);
}

// Logits of every position of `tokens` run alone: `prefill` tokens in one chunk, then one token
// per step.
Logits alone(models::Model& model, const engine::RunnerConfig& rc,
             const std::vector<int32_t>& tokens, size_t prefill) {
  return testing::run_chunks(model, rc, tokens, {prefill, 1});
}

// Every sliding group of every live sequence holds at most its cap of blocks.
void expect_within_caps(const kv::PagedKvCache& cache) {
  for (kv::SequenceId s : cache.sequences()) {
    for (int g = 0; g < cache.num_groups(); ++g) {
      if (cache.group(g).kind != kv::GroupKind::Sliding) continue;
      int64_t held = 0;
      for (int32_t b : cache.block_table(s, g)) held += b != 0;
      ASSERT_LE(held, cache.cap_blocks(g)) << "sequence " << s << " group " << g;
    }
  }
}

// (model, --max-kv-size 20, KV format)
class KvSchedule : public ::testing::TestWithParam<std::tuple<std::string, bool, std::string>> {};

TEST_P(KvSchedule, AnyScheduleGivesEachRowItsSerialLogits) {
  const auto& [fixture, bounded, format] = GetParam();
  const std::vector<int32_t> prompt = testing::kv_model_prompt(fixture);
  auto model = models::load_model(testing::kv_model_dir(fixture));
  const int lookahead = 4;
  const engine::RunnerConfig rc = runner_config(bounded, lookahead, format);
  const std::vector<size_t> lengths = {112, 97, 64, 33, 120, 5};
  std::vector<std::vector<int32_t>> requests;
  std::vector<Logits> want;
  for (size_t i = 0; i < lengths.size(); ++i) {
    requests.push_back(tokens_for(prompt, lengths[i], i));
    want.push_back(alone(*model, rc, requests.back(), 20));
  }
  for (uint32_t seed : {1u, 2u}) {
    SCOPED_TRACE(::testing::Message() << fixture << (bounded ? " max-kv-size 20" : "") << " "
                                      << format << " seed " << seed);
    std::mt19937 rng(seed);
    engine::Runner runner(*model, rc);
    auto& cache = runner.cache();
    struct Live {
      kv::SequenceId seq = 0;
      size_t done = 0;
      int64_t pending = 0;  // speculative tokens after `done`, not rolled back yet
      int join_step = 0;
      bool finished = false;
    };
    std::vector<Live> live(requests.size());
    std::vector<Logits> got(requests.size());
    for (auto& l : live) l.join_step = static_cast<int>(rng() % 40);
    int64_t steps = 0, rollbacks = 0;
    for (int step = 0; std::any_of(live.begin(), live.end(), [](auto& l) { return !l.finished; });
         ++step) {
      std::vector<kv::RowRequest> rows;
      std::vector<size_t> row_req, row_real;
      for (size_t i = 0; i < requests.size(); ++i) {
        Live& l = live[i];
        if (l.finished || step < l.join_step) continue;
        if (l.seq == 0) {  // joins
          l.seq = cache.add_sequence();
          ASSERT_TRUE(cache.reserve(l.seq, static_cast<int64_t>(requests[i].size()) + lookahead));
        }
        if (rng() % 5 == 0) continue;  // sits this step out
        // Speculative tokens still in the cache: roll them back (at once, or after more draft
        // steps: a rollback may span several appends, up to the lookahead).
        if (l.pending > 0 && (rng() % 2 == 0 || l.pending == lookahead)) {
          cache.rollback(l.seq, l.pending);
          l.pending = 0;
          ++rollbacks;
        }
        const int64_t start = static_cast<int64_t>(l.done) + l.pending;
        size_t chunk = 0, draft = 1;  // a draft step: one more speculative token
        if (l.pending == 0) {
          const size_t left = requests[i].size() - l.done;
          chunk = std::min<size_t>(left, 1 + rng() % (rng() % 3 == 0 ? 12 : 2));
          draft = rng() % 4 == 0 ? 1 + rng() % lookahead : 0;
        }
        kv::RowRequest row{l.seq,
                           {requests[i].begin() + static_cast<int64_t>(l.done),
                            requests[i].begin() + static_cast<int64_t>(l.done + chunk)},
                           start,
                           true,
                           true};
        for (size_t d = 0; d < draft; ++d) row.tokens.push_back(static_cast<int32_t>(rng() % 512));
        ASSERT_TRUE(cache.append(l.seq, static_cast<int64_t>(row.tokens.size())));
        rows.push_back(std::move(row));
        row_req.push_back(i);
        row_real.push_back(chunk);
      }
      if (rows.empty()) continue;
      kv::StepPlan plan(rows, cache);
      Tensor logits = runner.step(plan);
      ++steps;
      expect_within_caps(cache);
      for (size_t r = 0; r < rows.size(); ++r) {
        Live& l = live[row_req[r]];
        const int32_t first = plan.logits_begin(static_cast<int>(r));
        for (size_t i = 0; i < row_real[r]; ++i) {
          const float* p = logits.row<float>(first + static_cast<int64_t>(i));
          got[row_req[r]].emplace_back(p, p + model->vocab_size());
        }
        l.pending += static_cast<int64_t>(rows[r].tokens.size() - row_real[r]);
        if (l.pending > 0 && l.pending <= lookahead && rng() % 2 == 0) {
          cache.rollback(l.seq, l.pending);
          l.pending = 0;
          ++rollbacks;
        }
        l.done += row_real[r];
        if (l.done == requests[row_req[r]].size()) {  // leaves
          cache.release(l.seq);
          l.finished = true;
        }
      }
    }
    EXPECT_GT(rollbacks, 10);
    EXPECT_GT(steps, 50);
    for (size_t i = 0; i < requests.size(); ++i)
      expect_same_logits(got[i], want[i], "request " + std::to_string(i));
    EXPECT_EQ(cache.used_blocks(), 0);
  }
}

// Fork after a prefix whose end is inside a block: both rows continue with different tokens in
// the same steps and each gets its straight run's logits (the shared partial block is copied).
TEST_P(KvSchedule, ForkedRowsContinueLikeTheirStraightRuns) {
  const auto& [fixture, bounded, format] = GetParam();
  const std::vector<int32_t> prompt = testing::kv_model_prompt(fixture);
  auto model = models::load_model(testing::kv_model_dir(fixture));
  const engine::RunnerConfig rc = runner_config(bounded, 0, format);
  const size_t prefix = 37, n = 90;
  const auto a = tokens_for(prompt, n, 1);
  auto b = tokens_for(prompt, n, 2);
  std::copy(a.begin(), a.begin() + prefix, b.begin());
  const Logits want_a = alone(*model, rc, a, 20), want_b = alone(*model, rc, b, 20);
  engine::Runner runner(*model, rc);
  auto& cache = runner.cache();
  const auto sa = cache.add_sequence();
  Logits got_a, got_b;
  for (size_t done = 0; done < prefix; done += 9) {
    const size_t c = std::min<size_t>(9, prefix - done);
    ASSERT_TRUE(cache.append(sa, static_cast<int64_t>(c)));
    testing::append_logits(run_step(runner, {testing::chunk_row(sa, a, done, c)}), c,
                           model->vocab_size(), got_a);
  }
  got_b = got_a;
  const int64_t used = cache.used_blocks();
  const auto sb = cache.fork(sa);
  EXPECT_EQ(cache.used_blocks(), used);
  for (size_t pos = prefix; pos < n; ++pos) {
    ASSERT_TRUE(cache.append(sa, 1));
    ASSERT_TRUE(cache.append(sb, 1));
    Tensor logits = run_step(runner, {{sb, {b[pos]}, static_cast<int64_t>(pos), true, true},
                                      {sa, {a[pos]}, static_cast<int64_t>(pos), true, true}});
    got_b.emplace_back(logits.row<float>(0), logits.row<float>(0) + model->vocab_size());
    got_a.emplace_back(logits.row<float>(1), logits.row<float>(1) + model->vocab_size());
    expect_within_caps(cache);
  }
  expect_same_logits(got_a, want_a, "parent");
  expect_same_logits(got_b, want_b, "fork");
  cache.release(sa);
  cache.release(sb);
  EXPECT_EQ(cache.used_blocks(), 0);
}

// Save after a prefix, load into another runner (and the same one), continue: the straight
// run's logits.
TEST_P(KvSchedule, SavedAndLoadedRowContinuesLikeTheStraightRun) {
  const auto& [fixture, bounded, format] = GetParam();
  const std::vector<int32_t> prompt = testing::kv_model_prompt(fixture);
  auto model = models::load_model(testing::kv_model_dir(fixture));
  const engine::RunnerConfig rc = runner_config(bounded, 2, format);
  const size_t prefix = 53, n = 84;
  const auto a = tokens_for(prompt, n, 3);
  const Logits want = alone(*model, rc, a, 20);
  std::string file = fixture + (bounded ? "_b_" : "_") + format;
  std::replace(file.begin(), file.end(), ':', '_');
  const std::string path = ::testing::TempDir() + "/kv_" + file + ".safetensors";
  {
    engine::Runner runner(*model, rc);
    auto& cache = runner.cache();
    const auto s = cache.add_sequence();
    ASSERT_TRUE(cache.append(s, static_cast<int64_t>(prefix)));
    run_step(runner, {{s, {a.begin(), a.begin() + static_cast<int64_t>(prefix)}, 0, false, true}});
    cache.save(s, path);
  }
  engine::Runner runner(*model, rc);
  auto& cache = runner.cache();
  const auto s = cache.load(path);
  ASSERT_EQ(cache.length(s), static_cast<int64_t>(prefix));
  Logits got(want.begin(), want.begin() + static_cast<int64_t>(prefix));
  for (size_t pos = prefix; pos < n; ++pos) {
    ASSERT_TRUE(cache.append(s, 1));
    Tensor logits = run_step(runner, {{s, {a[pos]}, static_cast<int64_t>(pos), true, true}});
    got.emplace_back(logits.row<float>(0), logits.row<float>(0) + model->vocab_size());
  }
  expect_same_logits(got, want, "loaded");
  cache.release(s);
  EXPECT_EQ(cache.used_blocks(), 0);
  std::remove(path.c_str());
}

// 50x the window of decode steps: sliding groups hold at most ceil((W + lookahead) / block) + 1
// blocks (+ the sink blocks) per sequence after every step, the logits are bit-exactly those of
// a run that keeps every block, and the pools end empty.
TEST(KvLongRun, SlidingBlocksStayBoundedAt50xTheWindow) {
  for (const auto& [fixture, bounded] : std::vector<std::tuple<std::string, bool>>{
           {"mistral_sw", false}, {"gemma3", false}, {"llama3", true}}) {
    SCOPED_TRACE(fixture);
    const testing::Golden golden = testing::load_golden(fixture);
    auto model = models::load_model(testing::fixture_model_dir(fixture));
    const engine::RunnerConfig rc = runner_config(bounded, 2);
    const size_t n = 50 * 16;
    const auto tokens = tokens_for(golden.prompt, n, 5);
    kv::KvCacheConfig kept_config = engine::kv_cache_config(*model, rc);
    kept_config.keep_all_blocks = true;
    kv::PagedKvCache kept(kept_config);
    Arena arena(model->activation_bytes(rc.max_step_tokens, rc.max_step_tokens));
    std::vector<float> kept_logits(static_cast<size_t>(rc.max_step_tokens * model->vocab_size()));
    engine::Runner runner(*model, rc);
    auto& cache = runner.cache();
    const auto s = cache.add_sequence(), k = kept.add_sequence();
    ASSERT_TRUE(cache.reserve(s, static_cast<int64_t>(n)));
    size_t done = 0;
    int64_t sliding_groups = 0;
    while (done < n) {
      const size_t c = done == 0 ? 20 : 1;
      const std::vector<int32_t> part(tokens.begin() + static_cast<int64_t>(done),
                                      tokens.begin() + static_cast<int64_t>(done + c));
      ASSERT_TRUE(cache.append(s, static_cast<int64_t>(c)));
      ASSERT_TRUE(kept.append(k, static_cast<int64_t>(c)));
      Tensor logits = run_step(runner, {{s, part, static_cast<int64_t>(done), true, true}});
      kv::StepPlan plan({{k, part, static_cast<int64_t>(done), true, true}}, kept);
      Tensor want(kept_logits.data(), DType::F32, {static_cast<int64_t>(c), model->vocab_size()});
      model->forward(plan, kept, arena, want);
      ASSERT_EQ(std::memcmp(logits.data, want.data, want.nbytes()), 0) << "position " << done;
      done += c;
      sliding_groups = 0;
      for (int g = 0; g < cache.num_groups(); ++g) {
        const kv::LayerGroup& grp = cache.group(g);
        if (grp.kind != kv::GroupKind::Sliding) continue;
        ++sliding_groups;
        const int64_t bt = cache.block_tokens();
        const int64_t bound =
            (grp.window + rc.lookahead + bt - 1) / bt + 1 + (grp.sink_tokens + bt - 1) / bt;
        int64_t held = 0;
        for (int32_t b : cache.block_table(s, g)) held += b != 0;
        if (c == 1) {
          ASSERT_LE(held, bound) << "group " << g << " position " << done;
          ASSERT_EQ(cache.used_blocks(g), held);  // the only sequence: all of the pool's use
          ASSERT_EQ(kept.used_blocks(g), (static_cast<int64_t>(done) + bt - 1) / bt);
        }
      }
    }
    EXPECT_GT(sliding_groups, 0);
    cache.release(s);
    kept.release(k);
    EXPECT_EQ(cache.used_blocks(), 0);
    EXPECT_EQ(kept.used_blocks(), 0);
  }
}

std::vector<std::tuple<std::string, bool, std::string>> cases() {
  std::vector<std::tuple<std::string, bool, std::string>> out;
  std::vector<std::string> models = testing::all_fixtures();
  models.push_back("random_d64");
  for (const auto& m : models) {
    for (const std::string format :
         {"f32", "int8-g32", "int4-g32", "int8-g64", "int4-g64", "turbo", "turbo:k4v2"}) {
      if (!testing::kv_format_fits(m, format)) continue;
      if (m == "random_d64" && format == "f32") continue;
      if (format == "turbo:k4v2" && m != "random_d64") continue;  // one model for the 2nd width
      out.emplace_back(m, false, format);
      out.emplace_back(m, true, format);
    }
    // The precision transition (bf16 before position S, quantized after): S = 40 inside the
    // requests (some end before it), rollbacks across it, fork before it, save after it; S = 13
    // off the block grid.
    for (const std::string format : {"int8-g32@40", "turbo@40", "int4-g64@13", "turbo:k4v3@13"}) {
      if (!testing::kv_format_fits(m, format.substr(0, format.find('@')))) continue;
      if (format.ends_with("@13") && m != "random_d64") continue;
      out.emplace_back(m, false, format);
      out.emplace_back(m, true, format);
    }
  }
  return out;
}

INSTANTIATE_TEST_SUITE_P(Fixtures, KvSchedule, ::testing::ValuesIn(cases()),
                         [](const auto& param_info) {
                           std::string name = std::get<0>(param_info.param) +
                                              (std::get<1>(param_info.param) ? "_max_kv_20" : "");
                           const std::string& spec = std::get<2>(param_info.param);
                           const size_t at = spec.find('@');
                           const std::string format = spec.substr(0, at);
                           if (at != std::string::npos) name += "_from_" + spec.substr(at + 1);
                           if (format.rfind("turbo", 0) == 0) {
                             name += "_turbo" + (format.size() > 5 ? "_" + format.substr(6) : "");
                           } else if (format != "f32") {
                             name += "_" + format.substr(0, 4) + format.substr(5);
                           }
                           return name;
                         });

}  // namespace
}  // namespace ringlm
