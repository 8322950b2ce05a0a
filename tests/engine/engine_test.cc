// Engine: greedy equals generate_greedy's; a request's tokens and logprobs are identical alone and
// among other requests joining and leaving (sampling with a seed, n > 1, preemption, prefix-cache
// hits) on every KV layout (full, sliding, mixed), and with steps overlapped or one at a time
// (stops found a step late); cancel, stops, validation, no KV leaks.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <random>
#include <thread>

#include "engine/engine.h"
#include "engine/engine_test_util.h"
#include "engine/runner.h"

namespace ringlm::engine {
namespace {

using testing::Collector;
using testing::fixture_model_dir;
using testing::fixture_tokenizer;

EngineConfig small_config(const std::string& kv_format = "f32") {
  EngineConfig c;
  c.runner.kv_format = kv::KvFormat::parse(kv_format);
  c.runner.kv_memory_bytes = size_t{8} << 20;
  c.runner.block_tokens = 16;
  c.runner.max_step_tokens = 64;
  c.max_batch = 8;
  return c;
}

// The stats the engine publishes once `finished` requests have ended. A request's last event
// reaches its client during the loop iteration that ends it; the KV it frees, and anything else
// that iteration does after it (say dropping the prefix cache after a failed step), shows in
// the stats published at the iteration's end.
EngineStats stats_once_finished(const Engine& engine, int64_t finished) {
  EngineStats stats = engine.stats();
  for (int i = 0; i < 5000 && stats.requests_finished_total < finished; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    stats = engine.stats();
  }
  return stats;
}

std::vector<int32_t> random_prompt(std::mt19937& rng, size_t n) {
  std::vector<int32_t> ids(n);
  for (auto& id : ids) id = static_cast<int32_t>(3 + rng() % 509);
  return ids;
}

Request sampled_request(std::vector<int32_t> prompt, uint64_t seed, int64_t max_tokens, int n) {
  Request r;
  r.prompt = std::move(prompt);
  r.sampling.temperature = 0.8f;
  r.sampling.top_p = 0.9f;
  r.sampling.top_k = 50;
  r.sampling.seed = seed;
  r.sampling.logprobs = 3;
  r.sampling.want_logprobs = true;
  r.sampling.repetition_penalty = 1.1f;
  r.stop.max_tokens = max_tokens;
  r.stop.ignore_eos = true;
  r.n = n;
  return r;
}

// KV memory for about `blocks` blocks in each pool of the model's cache.
size_t kv_bytes_for_blocks(models::Model& model, int blocks, const std::string& kv_format) {
  Runner runner(model, small_config(kv_format).runner);
  size_t bytes = 0;
  for (int g = 0; g < runner.cache().num_groups(); ++g) bytes += runner.cache().bytes_per_block(g);
  return bytes * static_cast<size_t>(blocks);
}

void expect_same_choice(const testing::ChoiceResult& a, const testing::ChoiceResult& b,
                        const std::string& what) {
  ASSERT_EQ(a.tokens.size(), b.tokens.size()) << what;
  for (size_t i = 0; i < a.tokens.size(); ++i) {
    ASSERT_EQ(a.tokens[i].token, b.tokens[i].token) << what << " token " << i;
    // Bitwise: the CPU backend is batch invariant.
    ASSERT_EQ(a.tokens[i].logprob, b.tokens[i].logprob) << what << " token " << i;
    ASSERT_EQ(a.tokens[i].top.size(), b.tokens[i].top.size()) << what;
    for (size_t k = 0; k < a.tokens[i].top.size(); ++k) {
      ASSERT_EQ(a.tokens[i].top[k].token, b.tokens[i].top[k].token) << what;
      ASSERT_EQ(a.tokens[i].top[k].logprob, b.tokens[i].top[k].logprob) << what;
    }
  }
  EXPECT_EQ(a.text, b.text) << what;
  EXPECT_EQ(a.finish, b.finish) << what;
}

TEST(Engine, GreedyEqualsGenerateGreedy) {
  auto model = models::load_model(fixture_model_dir("llama3"));
  std::mt19937 rng(1);
  std::vector<std::vector<int32_t>> prompts;
  for (size_t n : {5u, 40u, 17u, 90u}) prompts.push_back(random_prompt(rng, n));
  GreedyOptions options;
  options.max_new_tokens = 20;
  Runner runner(*model, small_config().runner);
  const auto want = generate_greedy(runner, prompts, options);

  Engine engine(*model, fixture_tokenizer(), small_config());
  Collector collector(engine);
  for (const auto& p : prompts) {
    Request r;
    r.prompt = p;
    r.sampling.temperature = 0.0f;
    r.stop.max_tokens = 20;
    r.stop.ignore_eos = true;
    collector.submit(r);
  }
  collector.wait_all();
  for (size_t i = 0; i < prompts.size(); ++i) {
    const auto& c = collector.result(i).choices[0];
    std::vector<int32_t> got;
    for (const auto& t : c.tokens) got.push_back(t.token);
    EXPECT_EQ(got, want.tokens[i]) << "prompt " << i;
    EXPECT_EQ(c.finish, FinishReason::Length);
    EXPECT_EQ(c.text, fixture_tokenizer().decode(got, /*skip_special_tokens=*/true));
    EXPECT_EQ(collector.result(i).usage.completion_tokens, 20);
    EXPECT_EQ(collector.result(i).usage.prompt_tokens, static_cast<int64_t>(prompts[i].size()));
  }
  engine.drain();
  const EngineStats stats = engine.stats();
  EXPECT_EQ(stats.kv_blocks_used, 0);
  EXPECT_EQ(stats.requests_finished_total, 4);
  EXPECT_EQ(stats.requests_running + stats.requests_waiting, 0);
  EXPECT_EQ(stats.generation_tokens_total, 80);
  EXPECT_EQ(stats.prefix_cache_queries, 4);
  // 4 prompts of 5-90 tokens in chunks of at most 64, then 19 decode steps of each.
  EXPECT_GE(stats.steps_total, 20);
  EXPECT_GT(stats.step_wait_seconds_total, 0.0);  // a CPU model: the forwards
  EXPECT_GT(stats.host_seconds_total, 0.0);
}

// The target requests run alone (a fresh engine each), then all together with other requests of
// many lengths in an engine whose rows and KV are scarce: they queue, join and leave at
// different steps, get preempted and recomputed, and reuse each other's cached prefixes.
// (fixture, KV blocks per pool of the busy engine, KV format: turbo's prefix-cache hits must read
// exactly the stored codes)
class EngineInvariance
    : public ::testing::TestWithParam<std::tuple<std::string, int, std::string>> {};

TEST_P(EngineInvariance, RequestsAreIdenticalAloneAndInABusyEngine) {
  auto model = models::load_model(fixture_model_dir(std::get<0>(GetParam())));
  std::mt19937 rng(11);
  const auto shared_prefix = random_prompt(rng, 40);
  std::vector<Request> requests;
  for (int i = 0; i < 10; ++i) {
    auto prompt = i % 3 == 0 ? shared_prefix : std::vector<int32_t>{};
    const auto tail = random_prompt(rng, 5 + rng() % 50);
    prompt.insert(prompt.end(), tail.begin(), tail.end());
    Request r = sampled_request(prompt, 100 + static_cast<uint64_t>(i),
                                static_cast<int64_t>(10 + rng() % 40), i % 4 == 1 ? 3 : 1);
    if (i % 5 == 2) r.sampling.temperature = 0.0f;
    requests.push_back(std::move(r));
  }
  const std::string& kv_format = std::get<2>(GetParam());
  // Alone, one step at a time; busy, each step launched before the last is collected.
  const auto run_alone = [&](const Request& r) {
    EngineConfig c = small_config(kv_format);
    c.enable_prefix_cache = false;
    c.overlap_steps = false;
    Engine engine(*model, fixture_tokenizer(), c);
    Collector collector(engine);
    collector.submit(r);
    collector.wait_all();
    return collector.result(0);
  };
  std::vector<testing::RequestResult> alone;
  for (const auto& r : requests) alone.push_back(run_alone(r));
  EngineConfig busy = small_config(kv_format);
  busy.runner.max_step_tokens = 24;
  busy.max_batch = 5;
  busy.runner.max_sequences = 4;
  // A few blocks per pool: far fewer than the requests need together.
  busy.runner.kv_memory_bytes = kv_bytes_for_blocks(*model, std::get<1>(GetParam()), kv_format);
  Engine engine(*model, fixture_tokenizer(), busy);
  Collector collector(engine);
  for (const auto& r : requests) collector.submit(r);
  collector.wait_all();
  for (size_t i = 0; i < requests.size(); ++i) {
    const auto& got = collector.result(i);
    ASSERT_EQ(got.choices.size(), alone[i].choices.size());
    for (size_t c = 0; c < got.choices.size(); ++c) {
      expect_same_choice(got.choices[c], alone[i].choices[c],
                         "request " + std::to_string(i) + " choice " + std::to_string(c));
    }
    EXPECT_EQ(got.usage.completion_tokens, alone[i].usage.completion_tokens);
  }
  // A conversation in the busy engine's cache: a first turn, then a second turn whose prompt is
  // the first's prompt, its answer and more.
  Request first_turn = sampled_request(random_prompt(rng, 30), 77, 20, 1);
  const auto first_alone = run_alone(first_turn);
  const size_t first = collector.submit(first_turn);
  collector.wait_all();
  expect_same_choice(collector.result(first).choices[0], first_alone.choices[0], "first turn");
  Request follow_up = first_turn;
  for (const auto& t : first_alone.choices[0].tokens) follow_up.prompt.push_back(t.token);
  const auto more = random_prompt(rng, 7);
  follow_up.prompt.insert(follow_up.prompt.end(), more.begin(), more.end());
  const auto follow_up_alone = run_alone(follow_up);
  const size_t second = collector.submit(follow_up);
  collector.wait_all();
  expect_same_choice(collector.result(second).choices[0], follow_up_alone.choices[0],
                     "second turn");
  EXPECT_GT(collector.result(second).usage.cached_tokens, 0) << "the second turn missed";
  const EngineStats stats = engine.stats();
  EXPECT_GT(stats.preemptions_total, 0) << "the busy engine never preempted";
  EXPECT_GT(stats.prefix_cache_hits, 0) << "the busy engine never hit its prefix cache";
  engine.drain();
  EXPECT_EQ(engine.stats().kv_blocks_used, 0);
  // Choices of one request differ (each has its own generator stream).
  const auto ids = [](const testing::ChoiceResult& c) {
    std::vector<int32_t> out;
    for (const auto& t : c.tokens) out.push_back(t.token);
    return out;
  };
  EXPECT_NE(ids(alone[1].choices[0]), ids(alone[1].choices[1]));
}

INSTANTIATE_TEST_SUITE_P(Layouts, EngineInvariance,
                         ::testing::Values(std::tuple{"llama3", 12, "f32"},
                                           std::tuple{"mistral_sw", 8, "f32"},
                                           std::tuple{"gemma3", 12, "f32"},
                                           std::tuple{"gemma3", 12, "turbo"}));

// A step that fails (RunnerConfig::fail_at_step) ends every running request with its error,
// leaves no KV held — not even by the prefix cache, whose newest blocks may hold the failed
// steps' positions — and the engine serves the next request as a fresh one would.
TEST(Engine, AFailedStepEndsTheRunningRequestsAndNothingElse) {
  auto model = models::load_model(fixture_model_dir("llama3"));
  std::mt19937 rng(8);
  const auto prompt = random_prompt(rng, 40);
  Request r;
  r.prompt = prompt;
  r.sampling.temperature = 0.0f;
  r.stop.max_tokens = 40;
  r.stop.ignore_eos = true;
  EngineConfig failing = small_config();
  failing.runner.fail_at_step = 12;  // mid-decode of both requests
  Engine engine(*model, fixture_tokenizer(), failing);
  Collector collector(engine);
  collector.submit(r);
  Request other = r;
  other.prompt = random_prompt(rng, 25);
  collector.submit(other);
  collector.wait_all();
  for (size_t i = 0; i < 2; ++i) {
    const auto& c = collector.result(i).choices[0];
    EXPECT_EQ(c.events_after_finish, 0);
    // The second request runs at the failed step unless the engine got 12 steps ahead of its
    // submission: then it runs to its end.
    if (i == 1 && c.finish == FinishReason::Length) {
      EXPECT_EQ(c.tokens.size(), 40u);
      continue;
    }
    EXPECT_EQ(c.finish, FinishReason::Error) << i;
    EXPECT_NE(c.error.find("fail_at_step"), std::string::npos) << c.error;
    EXPECT_LT(c.tokens.size(), 40u);
  }
  EngineStats stats = stats_once_finished(engine, 2);
  EXPECT_EQ(stats.requests_finished_total, 2);
  EXPECT_EQ(stats.kv_blocks_used, 0);
  EXPECT_EQ(stats.kv_blocks_cached, 0);
  // The same prompt again: no stale prefix, the tokens of a fresh engine.
  const size_t again = collector.submit(r);
  collector.wait_all();
  Engine fresh(*model, fixture_tokenizer(), small_config());
  Collector fresh_collector(fresh);
  fresh_collector.submit(r);
  fresh_collector.wait_all();
  expect_same_choice(collector.result(again).choices[0], fresh_collector.result(0).choices[0],
                     "after the failed step");
  EXPECT_EQ(collector.result(again).usage.cached_tokens, 0);
  engine.drain();
  EXPECT_EQ(engine.stats().kv_blocks_used, 0);
}

TEST(Engine, CancelFromACallbackFreesTheKv) {
  auto model = models::load_model(fixture_model_dir("llama3"));
  Engine engine(*model, fixture_tokenizer(), small_config());
  Collector collector(engine);
  std::mt19937 rng(5);
  std::atomic<int> seen{0};
  Request r = sampled_request(random_prompt(rng, 30), 1, 200, 2);
  collector.submit(r, [&](RequestId id, const Event&) {
    if (++seen == 5) engine.cancel(id);
  });
  Request other = sampled_request(random_prompt(rng, 20), 2, 30, 1);
  collector.submit(other);
  collector.wait_all();
  for (const auto& c : collector.result(0).choices) {
    EXPECT_EQ(c.finish, FinishReason::Cancelled);
    EXPECT_EQ(c.events_after_finish, 0);
    EXPECT_LT(c.tokens.size(), 200u);
  }
  EXPECT_EQ(collector.result(1).choices[0].finish, FinishReason::Length);
  EXPECT_EQ(collector.result(1).choices[0].tokens.size(), 30u);
  engine.cancel(12345);  // unknown ids are ignored
  engine.drain();
  EXPECT_EQ(engine.stats().kv_blocks_used, 0);
  EXPECT_THROW(engine.submit(other, {}), Error);  // drained: no new requests
}

TEST(Engine, DestructionEndsEveryRequest) {
  auto model = models::load_model(fixture_model_dir("llama3"));
  std::mt19937 rng(6);
  std::vector<testing::RequestResult> results;
  {
    auto engine = std::make_unique<Engine>(*model, fixture_tokenizer(), small_config());
    Collector collector(*engine);
    for (int i = 0; i < 3; ++i)
      collector.submit(sampled_request(random_prompt(rng, 50), 3, 400, 2));
    engine.reset();  // running and queued requests end with Cancelled (or finished before)
    for (size_t i = 0; i < 3; ++i) results.push_back(collector.result(i));
  }
  int cancelled = 0;
  for (const auto& r : results) {
    EXPECT_TRUE(r.done);
    for (const auto& c : r.choices) {
      EXPECT_NE(c.finish, FinishReason::None);
      EXPECT_EQ(c.events_after_finish, 0);
      cancelled += c.finish == FinishReason::Cancelled;
    }
  }
  EXPECT_GT(cancelled, 0);
}

// Random requests (lengths, n, sampling, stops) with random cancels from callbacks in a scarce
// engine: every request ends exactly once, no event follows a choice's last one, counts respect
// max_tokens, and no KV block is left outside the prefix cache.
TEST(Engine, RandomTrafficWithCancelsEndsCleanly) {
  for (const char* name : {"llama3", "gemma3"}) {
    auto model = models::load_model(fixture_model_dir(name));
    std::mt19937 rng(42);
    EngineConfig c = small_config();
    c.runner.max_step_tokens = 20;
    c.max_batch = 6;
    c.runner.max_sequences = 3;
    c.runner.kv_memory_bytes = kv_bytes_for_blocks(*model, 14, "f32");
    Engine engine(*model, fixture_tokenizer(), c);
    Collector collector(engine);
    std::vector<Request> requests;
    for (int i = 0; i < 40; ++i) {
      Request r =
          sampled_request(random_prompt(rng, 1 + rng() % 70), rng(),
                          static_cast<int64_t>(1 + rng() % 40), 1 + static_cast<int>(rng() % 3));
      r.stop.ignore_eos = rng() % 2 == 0;
      if (rng() % 4 == 0) r.stop.stop_strings = {"e", "th"};
      if (rng() % 3 == 0) r.sampling.temperature = 0.0f;
      ASSERT_EQ(engine.validate(r), "") << name << " request " << i;
      const int cancel_after = rng() % 3 == 0 ? static_cast<int>(rng() % 10) : -1;
      auto seen = std::make_shared<std::atomic<int>>(0);
      collector.submit(r, [&engine, cancel_after, seen](RequestId id, const Event&) {
        if (++*seen == cancel_after) engine.cancel(id);
      });
      requests.push_back(std::move(r));
    }
    collector.wait_all();
    int cancelled = 0;
    for (size_t i = 0; i < requests.size(); ++i) {
      const auto& got = collector.result(i);
      for (const auto& ch : got.choices) {
        cancelled += ch.finish == FinishReason::Cancelled;
        EXPECT_NE(ch.finish, FinishReason::None) << name << " request " << i;
        EXPECT_NE(ch.finish, FinishReason::Error) << ch.error;
        EXPECT_EQ(ch.events_after_finish, 0);
        EXPECT_LE(static_cast<int64_t>(ch.tokens.size()), requests[i].stop.max_tokens);
      }
    }
    engine.drain();
    EXPECT_EQ(engine.stats().kv_blocks_used, 0) << name;
    EXPECT_GT(engine.stats().preemptions_total, 0) << name;
    EXPECT_GT(cancelled, 0) << name;
  }
}

TEST(Engine, StopStringsEndTheTextAndAreNotEmitted) {
  auto model = models::load_model(fixture_model_dir("llama3"));
  std::mt19937 rng(9);
  Request r;
  r.prompt = random_prompt(rng, 12);
  r.sampling.temperature = 0.0f;
  r.stop.max_tokens = 60;
  r.stop.ignore_eos = true;
  std::string full;
  {
    Engine engine(*model, fixture_tokenizer(), small_config());
    Collector collector(engine);
    collector.submit(r);
    collector.wait_all();
    full = collector.result(0).choices[0].text;
  }
  ASSERT_GT(full.size(), 20u);
  // A stop string in the middle of the text, spanning several tokens.
  const std::string stop = full.substr(full.size() / 2, 3);
  const size_t at = full.find(stop);
  r.stop.stop_strings = {"\x01never", stop};
  Engine engine(*model, fixture_tokenizer(), small_config());
  Collector collector(engine);
  collector.submit(r);
  collector.wait_all();
  const auto& c = collector.result(0).choices[0];
  EXPECT_EQ(c.finish, FinishReason::Stop);
  EXPECT_EQ(c.stop_matched, stop);
  EXPECT_EQ(c.text, full.substr(0, at));
}

TEST(Engine, EosAndStopTokenIdsFinishWithStop) {
  auto model = models::load_model(fixture_model_dir("llama3"));
  std::mt19937 rng(9);
  Request r;
  r.prompt = random_prompt(rng, 12);
  r.sampling.temperature = 0.0f;
  r.stop.max_tokens = 30;
  r.stop.ignore_eos = true;
  Engine engine(*model, fixture_tokenizer(), small_config());
  Collector collector(engine);
  collector.submit(r);
  collector.wait_all();
  const auto tokens = collector.result(0).choices[0].tokens;
  ASSERT_EQ(tokens.size(), 30u);
  // The 5th token becomes a stop id: generation ends there, its text not emitted.
  Request s = r;
  s.stop.stop_token_ids = {tokens[4].token};
  std::vector<int32_t> first;
  size_t end = 0;
  while (tokens[end].token != tokens[4].token) first.push_back(tokens[end++].token);
  collector.submit(s);
  // With min_tokens past it, the stop id is suppressed until then.
  Request m = s;
  m.stop.min_tokens = 25;
  collector.submit(m);
  collector.wait_all();
  const auto& stopped = collector.result(1).choices[0];
  EXPECT_EQ(stopped.finish, FinishReason::Stop);
  EXPECT_EQ(stopped.tokens.size(), end + 1);
  EXPECT_EQ(stopped.text, fixture_tokenizer().decode(first, true));
  const auto& late = collector.result(2).choices[0];
  for (size_t i = 0; i + 1 < late.tokens.size() && i < 24; ++i)
    EXPECT_NE(late.tokens[i].token, tokens[4].token);
  EXPECT_GE(late.tokens.size(), 25u);
}

// Overlapped steps learn a stop one step late (the next step is launched already): the stopped
// row's extra token is dropped, and everything a client sees — tokens, logprobs, text, finish,
// usage — equals one step at a time. Stop strings, stop ids, EOS, min_tokens, max_tokens,
// n > 1, penalties and top logprobs (host-sampled) in one busy engine. Then the same with the
// runner emulating a GPU's outputs (RunnerConfig::emulate_device_outputs): plain greedy rows
// take the step's argmax, device-samplable ones its device samples, host-sampled rows hold the
// next step back, and fed tokens come from those ids — the engine's GPU path, on the CPU.
TEST(Engine, OverlappedStepsEqualOneAtATime) {
  auto model = models::load_model(fixture_model_dir("llama3"));
  std::mt19937 rng(21);
  std::vector<Request> requests;
  for (int i = 0; i < 12; ++i) {
    Request r = sampled_request(random_prompt(rng, 6 + rng() % 40), 300 + static_cast<uint64_t>(i),
                                static_cast<int64_t>(3 + rng() % 30), i % 5 == 3 ? 2 : 1);
    if (i % 3 == 0) {  // plain greedy
      r.sampling = {};
      r.sampling.temperature = 0.0f;
    }
    if (i % 4 == 1 && i % 3 != 0) {  // device-samplable, with the chosen token's logprob
      r.sampling.repetition_penalty = 1.0f;
      r.sampling.logprobs = 0;
      r.sampling.temperature = 1.5f;
      r.sampling.top_k = 0;
      r.sampling.top_p = 1.0f;
    }
    r.stop.ignore_eos = i % 2 == 0;
    if (i % 3 == 1) r.stop.stop_token_ids = {static_cast<int32_t>(3 + rng() % 60)};
    if (i % 4 == 2 || i == 8) r.stop.stop_strings = {"e", "a "};
    if (i == 7) r.stop.min_tokens = 2;
    requests.push_back(std::move(r));
  }
  std::vector<std::vector<testing::RequestResult>> runs;
  std::vector<EngineStats> stats;
  // (overlap, emulated device outputs); the first is the reference.
  for (const auto& [overlap, emulate] : {std::pair{false, false}, std::pair{true, false},
                                         std::pair{true, true}, std::pair{false, true}}) {
    EngineConfig c = small_config();
    c.overlap_steps = overlap;
    c.runner.emulate_device_outputs = emulate;
    c.max_batch = 6;
    c.runner.max_step_tokens = 32;
    Engine engine(*model, fixture_tokenizer(), c);
    Collector collector(engine);
    for (const auto& r : requests) collector.submit(r);
    collector.wait_all();
    runs.emplace_back();
    for (size_t i = 0; i < requests.size(); ++i) runs.back().push_back(collector.result(i));
    engine.drain();
    stats.push_back(engine.stats());
  }
  int stopped = 0;
  for (size_t run = 1; run < runs.size(); ++run) {
    for (size_t i = 0; i < requests.size(); ++i) {
      const auto& [alone, overlapped] = std::tie(runs[0][i], runs[run][i]);
      ASSERT_EQ(alone.choices.size(), overlapped.choices.size());
      for (size_t c = 0; c < alone.choices.size(); ++c) {
        expect_same_choice(overlapped.choices[c], alone.choices[c],
                           "run " + std::to_string(run) + " request " + std::to_string(i) +
                               " choice " + std::to_string(c));
        EXPECT_EQ(overlapped.choices[c].stop_matched, alone.choices[c].stop_matched);
        EXPECT_EQ(overlapped.choices[c].events_after_finish, 0);
        stopped += run == 1 && alone.choices[c].finish == FinishReason::Stop;
      }
      EXPECT_EQ(overlapped.usage.completion_tokens, alone.usage.completion_tokens) << i;
      EXPECT_EQ(overlapped.usage.prompt_tokens, alone.usage.prompt_tokens) << i;
    }
  }
  EXPECT_GT(stopped, 2) << "too few requests stopped before max_tokens to test late stops";
  for (const EngineStats& s : stats) {
    EXPECT_EQ(s.kv_blocks_used, 0);
    EXPECT_EQ(s.requests_finished_total, static_cast<int64_t>(requests.size()));
    EXPECT_EQ(s.generation_tokens_total, stats[0].generation_tokens_total);
  }
}

TEST(Engine, ValidateNamesTheProblem) {
  auto model = models::load_model(fixture_model_dir("llama3"));
  Engine engine(*model, fixture_tokenizer(), small_config());
  Request ok;
  ok.prompt = {5, 6, 7};
  EXPECT_EQ(engine.validate(ok), "");
  const auto problem = [&](auto edit) {
    Request r = ok;
    edit(r);
    return engine.validate(r);
  };
  EXPECT_NE(problem([](Request& r) { r.prompt.clear(); }).find("empty"), std::string::npos);
  EXPECT_NE(problem([](Request& r) { r.prompt[1] = 512; }).find("vocabulary"), std::string::npos);
  EXPECT_NE(problem([](Request& r) { r.sampling.temperature = -1; }).find("temperature"),
            std::string::npos);
  EXPECT_NE(problem([](Request& r) { r.sampling.top_p = 0; }).find("top_p"), std::string::npos);
  EXPECT_NE(problem([](Request& r) { r.sampling.min_p = 2; }).find("min_p"), std::string::npos);
  EXPECT_NE(problem([](Request& r) {
              r.sampling.logit_bias = {{3, 101}};
            }).find("logit_bias"),
            std::string::npos);
  EXPECT_NE(problem([](Request& r) { r.sampling.presence_penalty = 3; }).find("presence"),
            std::string::npos);
  EXPECT_NE(problem([](Request& r) { r.stop.max_tokens = 0; }).find("max_tokens"),
            std::string::npos);
  EXPECT_NE(problem([](Request& r) { r.stop.stop_strings = {""}; }).find("stop"),
            std::string::npos);
  EXPECT_NE(problem([](Request& r) { r.n = 0; }).find("n must"), std::string::npos);
  EXPECT_NE(problem([](Request& r) { r.stop.max_tokens = 2000; }).find("context length"),
            std::string::npos);
  EXPECT_THROW(engine.submit(Request{}, {}), Error);
  EngineConfig tiny = small_config();
  tiny.runner.kv_memory_bytes = 12288 * 8;  // 7 usable blocks of 16 tokens
  Engine small(*model, fixture_tokenizer(), tiny);
  Request big = ok;
  big.stop.max_tokens = 200;
  EXPECT_NE(small.validate(big).find("KV cache"), std::string::npos);
}

}  // namespace
}  // namespace ringlm::engine
