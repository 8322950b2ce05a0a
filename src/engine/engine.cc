// Engine: the request bookkeeping and the step loop on its own thread. Scheduling lives in
// scheduler.cc, sampling in sampler.cc, stop conditions and text in stop.cc, the prefix cache in
// prefix_cache.cc.
#include "engine/engine.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <random>
#include <thread>
#include <unordered_map>

#include "core/log.h"
#include "core/thread_pool.h"
#include "engine/philox.h"
#include "engine/prefix_cache.h"
#include "engine/sampler.h"
#include "engine/scheduler.h"
#include "engine/stop.h"

namespace ringlm::engine {

const char* finish_reason_name(FinishReason reason) {
  switch (reason) {
    case FinishReason::None:
      return "none";
    case FinishReason::Stop:
      return "stop";
    case FinishReason::Length:
      return "length";
    case FinishReason::Cancelled:
      return "cancelled";
    case FinishReason::Error:
      return "error";
  }
  return "unknown";
}

namespace {

struct Active;

struct Choice {
  Choice(Active* a, int i, StopChecker s) : active(a), index(i), stop(std::move(s)) {}
  Active* active;
  int index;
  SeqState seq;
  StopChecker stop;
  TokenHistory history;
  bool finished = false;
  // Indices into seq.tokens of tokens that launched steps are still sampling (placeholders at
  // the end, oldest first; at most one per launched step).
  std::deque<int64_t> placeholders;
  int32_t feed_source = -1;  // the newest placeholder's Runner::Feed source
  // Generated tokens, with those still being sampled: the index the next sampled token gets.
  int64_t generated() const { return static_cast<int64_t>(seq.tokens.size()) - seq.prompt_len; }
};

// A token a launched step samples and the host has not seen yet (engine steps overlap: the
// next step is queued before this one is collected, and feeds it from the device).
constexpr int32_t kPlaceholderToken = -1;

struct Active {
  RequestId id = 0;
  Request request;
  RequestCallbacks callbacks;
  uint64_t seed = 0;
  std::vector<std::unique_ptr<Choice>> choices;
  int unfinished = 0;
  bool forked = false;  // the prompt's prefill completed (choices exist as sequences)
  Usage usage;
};

// A step queued on the runner and not yet collected.
struct InFlight {
  ScheduledStep step;
  std::unique_ptr<kv::StepPlan> plan;
  std::vector<char> host_rows;
  std::unordered_map<const Choice*, size_t> device_slot;  // index into the device samples
  std::vector<RequestId> failed;  // requests that can never fit: ended after the step
  // Per row that samples: its owner (checked through `request` before `choice` is touched: a
  // request that finished in the meantime is freed).
  struct SampledRow {
    RequestId request;
    Choice* choice;
    int64_t row;    // logit row
    int64_t index;  // of its token among the choice's generated ones (chainable steps)
  };
  std::vector<SampledRow> sampled;
  // Input tokens fed from the step before (placeholders when this step was planned).
  struct FedToken {
    RequestId request;
    Choice* choice;
    int64_t token;      // index into the plan's flattened tokens
    int64_t seq_index;  // index into choice->seq.tokens
  };
  std::vector<FedToken> fed;
  // The next step may be launched before this one is collected: every sampled row's choice got
  // a placeholder (but one whose token here is its last by max_tokens). False on a GPU when
  // some row samples on the host, and for a request's first token when it forks n choices.
  bool chainable = false;
};

}  // namespace

struct Engine::Impl {
  Impl(models::Model& m, const Tokenizer& t, const EngineConfig& c);
  ~Impl();

  void loop();
  // Schedules and launches the next step (rows whose last token a launched step still samples
  // take it from that step on the device); nullopt when nothing can run.
  std::optional<InFlight> launch_step();
  // Collects a launched step: its tokens, stops, events and finished requests.
  void finish_step(InFlight& step);
  // After finish_step of the step before: writes the now known tokens into `next`'s plan (CPU
  // models run its forward later, from the plan).
  void resolve_fed_tokens(InFlight& next);
  void admit_new(std::unique_ptr<Active> active);
  // The sampling of a choice's generated token `index`.
  SampleInput sample_input(const Choice& choice, int64_t index) const;
  // Token `index` of the choice's generated ones (its placeholder, or the next one).
  void apply_token(Choice& choice, int64_t index, TokenInfo info);
  void emit(Active& active, const Event& event);
  void finish_choice(Choice& choice, const StopOutcome& outcome, std::vector<TokenInfo> tokens);
  void cancel_request(RequestId id, FinishReason reason, const std::string& error);
  void publish_stats();

  models::Model& model;
  const Tokenizer& tokenizer;
  EngineConfig config;
  Runner runner;
  std::unique_ptr<PrefixCache> prefix;
  std::unique_ptr<Scheduler> scheduler;
  std::vector<int32_t> eos_ids;
  int64_t max_model_len = 0;
  int64_t kv_capacity_tokens = 0;  // the most tokens one sequence can hold in an empty cache
  std::map<RequestId, std::unique_ptr<Active>> active;  // engine thread only
  EngineStats counters;                                 // engine thread only

  mutable std::mutex mu;
  std::condition_variable wake;     // the loop waits for work
  std::condition_variable drained;  // drain() waits for no work
  std::deque<std::unique_ptr<Active>> inbox;
  std::vector<RequestId> cancels;
  bool stopping = false;
  bool draining = false;
  size_t requests_in_flight = 0;  // submitted and not done as of the published stats (under mu)
  size_t done_since_publish = 0;  // engine thread only
  EngineStats published;
  RequestId next_id = 1;
  std::mt19937_64 seeds{std::random_device{}()};
  std::thread thread;
};

Engine::Impl::Impl(models::Model& m, const Tokenizer& t, const EngineConfig& c)
    : model(m), tokenizer(t), config(c), runner(m, c.runner) {
  RINGLM_USER_CHECK(config.max_batch >= 1, "max_batch must be at least 1");
  config.max_batch =
      static_cast<int>(std::min<int64_t>(config.max_batch, c.runner.max_step_tokens));
  kv::PagedKvCache& cache = runner.cache();
  if (config.enable_prefix_cache) {
    PrefixCacheConfig pc;
    pc.max_bytes = config.prompt_cache_bytes;
    prefix = std::make_unique<PrefixCache>(cache, pc);
  }
  scheduler = std::make_unique<Scheduler>(
      cache, SchedulerConfig{c.runner.max_step_tokens, config.max_batch}, prefix.get());
  for (int64_t id : model.config().eos_token_ids) eos_ids.push_back(static_cast<int32_t>(id));
  eos_ids.insert(eos_ids.end(), config.eos_token_ids.begin(), config.eos_token_ids.end());
  if (tokenizer.eos_id() >= 0) eos_ids.push_back(tokenizer.eos_id());
  max_model_len =
      config.max_model_len > 0 ? config.max_model_len : model.config().max_position_embeddings;
  if (max_model_len <= 0) max_model_len = kv::kUnlimitedTokens;
  kv_capacity_tokens = kv::kUnlimitedTokens;
  for (int g = 0; g < cache.num_groups(); ++g) {
    if (cache.table_group(g) != g) continue;
    const int64_t blocks = cache.num_blocks(g) - 1;
    if (cache.cap_blocks(g) <= blocks) continue;  // a sliding group: any length fits
    kv_capacity_tokens = std::min(kv_capacity_tokens, blocks * cache.block_tokens());
  }
  publish_stats();
  thread = std::thread([this] { loop(); });
}

Engine::Impl::~Impl() {
  {
    std::lock_guard lock(mu);
    stopping = true;
  }
  wake.notify_all();
  if (thread.joinable()) thread.join();
}

void Engine::Impl::emit(Active& a, const Event& event) {
  if (!a.callbacks.on_event) return;
  try {
    a.callbacks.on_event(event);
  } catch (const std::exception& e) {
    RINGLM_LOG(Warn, "engine: on_event of request ", a.id, " threw: ", e.what());
  }
}

void Engine::Impl::admit_new(std::unique_ptr<Active> a) {
  const Request& r = a->request;
  for (int i = 0; i < r.n; ++i) {
    auto choice = std::make_unique<Choice>(a.get(), i, StopChecker(tokenizer, r.stop, eos_ids));
    choice->seq.order = (a->id << 16) | static_cast<uint64_t>(i);
    choice->seq.prompt_len = static_cast<int64_t>(r.prompt.size());
    choice->seq.owner = choice.get();
    const bool penalties = r.sampling.repetition_penalty != 1.0f ||
                           r.sampling.presence_penalty != 0.0f ||
                           r.sampling.frequency_penalty != 0.0f;
    if (penalties) choice->history = TokenHistory(r.prompt);
    a->choices.push_back(std::move(choice));
  }
  a->unfinished = r.n;
  a->usage.prompt_tokens = static_cast<int64_t>(r.prompt.size());
  Choice& first = *a->choices[0];
  first.seq.tokens = r.prompt;
  first.seq.rows = r.n;
  counters.prompt_tokens_total += a->usage.prompt_tokens;
  scheduler->enqueue(&first.seq);
  const RequestId id = a->id;
  active[id] = std::move(a);
}

void Engine::Impl::finish_choice(Choice& c, const StopOutcome& outcome,
                                 std::vector<TokenInfo> tokens) {
  Active& a = *c.active;
  c.finished = true;
  scheduler->remove(&c.seq);
  Event event;
  event.choice = c.index;
  event.text = outcome.text;
  event.tokens = std::move(tokens);
  event.finish = outcome.finish;
  if (outcome.finish == FinishReason::Stop) event.stop_matched = outcome.matched;
  if (outcome.finish == FinishReason::Error) event.error = outcome.matched;
  emit(a, event);
  a.usage.completion_tokens +=
      std::max<int64_t>(0, c.generated() - static_cast<int64_t>(c.placeholders.size()));
  if (--a.unfinished > 0) return;
  if (a.callbacks.on_done) {
    try {
      a.callbacks.on_done(a.usage);
    } catch (const std::exception& e) {
      RINGLM_LOG(Warn, "engine: on_done of request ", a.id, " threw: ", e.what());
    }
  }
  ++counters.requests_finished_total;
  const RequestId id = a.id;
  active.erase(id);  // destroys `a` and `c`
  ++done_since_publish;
}

void Engine::Impl::cancel_request(RequestId id, FinishReason reason, const std::string& error) {
  auto it = active.find(id);
  if (it == active.end()) return;
  Active& a = *it->second;
  // Every choice's KV goes first, then the events (the last one erases the request).
  std::vector<Choice*> open;
  for (auto& c : a.choices) {
    if (c->finished) continue;
    scheduler->remove(&c->seq);
    open.push_back(c.get());
  }
  for (Choice* c : open) {
    StopOutcome outcome = c->stop.finish(reason);
    outcome.matched = error;
    finish_choice(*c, outcome, {});
  }
}

namespace {

// A choice whose next token is the argmax of the raw logits: greedy with nothing that changes
// or reads them (no suppression this step, bias, penalties or logprobs). On a GPU its row's
// argmax comes from the device and the row is never copied to the host.
bool plain_greedy(const Choice& c) {
  const SamplingParams& p = c.active->request.sampling;
  return p.temperature == 0.0f && !p.want_logprobs && p.logprobs == 0 && p.logit_bias.empty() &&
         p.repetition_penalty == 1.0f && p.frequency_penalty == 0.0f &&
         p.presence_penalty == 0.0f && !c.stop.suppress_stop_ids(c.generated());
}

// Sampling that the device does as the host would (cuda::sample): temperature (0 = greedy),
// top_k, top_p, min_p and the chosen token's logprob — no top-n logprobs, bias, penalties or
// suppressed ids.
bool device_samplable(const Choice& c) {
  const SamplingParams& p = c.active->request.sampling;
  return p.logprobs == 0 && p.logit_bias.empty() && p.repetition_penalty == 1.0f &&
         p.frequency_penalty == 0.0f && p.presence_penalty == 0.0f &&
         !c.stop.suppress_stop_ids(c.generated());
}

// The choices a step row samples for: the row's own, and on the request's first token the
// other choices that will fork from it.
std::vector<Choice*> row_targets(Choice* c) {
  std::vector<Choice*> targets = {c};
  if (!c->active->forked) {
    for (size_t i = 1; i < c->active->choices.size(); ++i)
      targets.push_back(c->active->choices[i].get());
  }
  return targets;
}

}  // namespace

SampleInput Engine::Impl::sample_input(const Choice& c, int64_t index) const {
  const Active& a = *c.active;
  SampleInput input;
  input.params = &a.request.sampling;
  input.history = &c.history;
  if (c.stop.suppress_stop_ids(index)) input.suppressed = c.stop.stop_ids();
  input.seed = a.seed;
  input.choice = static_cast<uint32_t>(c.index);
  input.index = static_cast<uint64_t>(index);
  return input;
}

void Engine::Impl::apply_token(Choice& c, int64_t index, TokenInfo info) {
  Active& a = *c.active;
  const auto at = static_cast<size_t>(c.seq.prompt_len + index);
  if (at < c.seq.tokens.size()) {
    RINGLM_CHECK(!c.placeholders.empty() && c.placeholders.front() == static_cast<int64_t>(at),
                 "engine: token ", index, " of a choice is not its oldest placeholder");
    c.placeholders.pop_front();
    c.seq.tokens[at] = info.token;
  } else {
    c.seq.tokens.push_back(info.token);
  }
  c.history.add_generated(info.token);
  ++counters.generation_tokens_total;
  StopOutcome outcome = c.stop.push(info.token, index + 1);
  if (outcome.finish != FinishReason::None) {
    finish_choice(c, outcome, {std::move(info)});
    return;
  }
  Event event;
  event.choice = c.index;
  event.text = std::move(outcome.text);
  event.tokens.push_back(std::move(info));
  emit(a, event);
}

std::optional<InFlight> Engine::Impl::launch_step() {
  InFlight f;
  f.step = scheduler->schedule();
  counters.preemptions_total = scheduler->preemptions();
  // Requests that can never fit end after the step (a sibling choice may be among its rows).
  for (SeqState* seq : f.step.failed)
    f.failed.push_back(static_cast<Choice*>(seq->owner)->active->id);
  if (f.step.empty()) {
    finish_step(f);
    return std::nullopt;
  }
  const std::vector<kv::RowRequest>& rows = f.step.rows;
  f.plan = std::make_unique<kv::StepPlan>(rows, scheduler->cache());
  const kv::StepPlan& plan = *f.plan;
  // Inputs that the step in flight samples: placeholders in the plan, fed on the device.
  std::vector<Runner::Feed> feeds;
  int64_t flat = 0;
  for (size_t r = 0; r < rows.size(); ++r) {
    auto* c = static_cast<Choice*>(f.step.seqs[r]->owner);
    const int64_t n = static_cast<int64_t>(rows[r].tokens.size());
    for (int64_t i = 0; i < n; ++i) {
      if (rows[r].tokens[static_cast<size_t>(i)] != kPlaceholderToken) continue;
      const int64_t seq_index = rows[r].start_position + i;
      RINGLM_CHECK(
          !c->placeholders.empty() && c->placeholders.front() == seq_index && c->feed_source >= 0,
          "engine: a step input that no launched step samples");
      feeds.push_back({static_cast<int32_t>(flat + i), c->feed_source});
      f.fed.push_back({c->active->id, c, flat + i, seq_index});
    }
    flat += n;
  }
  // A logit row goes to the host unless every choice it samples for is plain greedy (the
  // device's argmax) or, on a GPU, samplable there (device_samples, in row and target order).
  // GPU models (and CPU tests emulating them): ids come back from the device, and a next step
  // can be fed from them.
  const bool on_device = runner.device_outputs();
  const bool device_sampling = on_device && runner.config().device_sampling;
  f.host_rows.assign(plan.logit_tokens().size(), 1);
  std::vector<Runner::DeviceSample> device_samples;
  f.chainable = config.overlap_steps;
  for (size_t r = 0; r < rows.size(); ++r) {
    if (plan.logits_count(static_cast<int>(r)) == 0) continue;
    auto* owner = static_cast<Choice*>(f.step.seqs[r]->owner);
    const int64_t row = plan.logits_begin(static_cast<int>(r));
    f.sampled.push_back({owner->active->id, owner, row, owner->generated()});
    const std::vector<Choice*> targets = row_targets(owner);
    bool host = false;
    for (Choice* t : targets) {
      if (t->finished || plain_greedy(*t)) continue;
      if (!device_sampling || !device_samplable(*t)) {
        host = true;
        continue;
      }
      const SampleInput in = sample_input(*t, t->generated());
      const SamplingParams& p = *in.params;
      f.device_slot[t] = device_samples.size();
      device_samples.push_back({row, p.temperature, p.top_p, p.min_p, p.top_k,
                                philox_uniform(in.seed, in.choice, in.index), p.want_logprobs});
    }
    f.host_rows[static_cast<size_t>(row)] = host;
    // The next step can take this row's token from the device only when one choice samples it
    // there; a CPU model's next step runs after this one's tokens are known anyway.
    f.chainable = f.chainable && targets.size() == 1 && (!on_device || !host);
  }
  runner.launch(*f.plan, f.host_rows, device_samples, feeds);
  ++counters.steps_total;
  scheduler->complete(f.step);
  if (f.chainable) {
    for (const InFlight::SampledRow& s : f.sampled) {
      Choice& c = *s.choice;
      // Its last token by max_tokens: no next row for it (it ends when this step is collected).
      if (s.index + 1 >= c.active->request.stop.max_tokens) continue;
      const auto slot = f.device_slot.find(&c);
      c.feed_source = slot != f.device_slot.end()
                          ? Runner::kFedSample + static_cast<int32_t>(slot->second)
                          : static_cast<int32_t>(s.row);
      c.placeholders.push_back(static_cast<int64_t>(c.seq.tokens.size()));
      c.seq.tokens.push_back(kPlaceholderToken);
    }
  }
  return f;
}

void Engine::Impl::resolve_fed_tokens(InFlight& next) {
  for (const InFlight::FedToken& fed : next.fed) {
    // A request that ended: its row's output is dropped, any id will do.
    int32_t token = 0;
    if (active.count(fed.request) != 0)
      token = std::max(fed.choice->seq.tokens[static_cast<size_t>(fed.seq_index)], 0);
    next.plan->set_token(fed.token, token);
  }
}

void Engine::Impl::finish_step(InFlight& f) {
  const auto end_failed = [&] {
    for (RequestId id : f.failed)
      cancel_request(id, FinishReason::Error,
                     "the request needs more KV cache than the engine has");
  };
  if (f.step.empty()) return end_failed();
  const auto wait_start = std::chrono::steady_clock::now();
  const Runner::Selected out = runner.collect();
  counters.step_wait_seconds_total +=
      std::chrono::duration<double>(std::chrono::steady_clock::now() - wait_start).count();
  // Who samples from which row, in row order; forks are made here.
  struct Job {
    RequestId request;  // checked before `target` is touched: a finished request is freed
    Choice* target;
    int64_t row;    // logit row
    int64_t index;  // of the token among the choice's generated ones
    TokenInfo info;
  };
  std::vector<Job> jobs;
  for (const InFlight::SampledRow& s : f.sampled) {
    if (active.count(s.request) == 0) continue;
    Choice* c = s.choice;
    Active& a = *c->active;
    const std::vector<Choice*> targets = row_targets(c);
    if (!a.forked) {
      // The prompt is in the KV: every other choice becomes a fork sharing its blocks.
      a.forked = true;
      a.usage.cached_tokens = c->seq.cached_tokens;
      c->seq.rows = 1;
      for (size_t i = 1; i < a.choices.size(); ++i) scheduler->fork(&c->seq, &a.choices[i]->seq);
    }
    for (Choice* target : targets) {
      if (target->finished) continue;
      const int64_t index = f.chainable ? s.index : target->generated();
      jobs.push_back({a.id, target, s.row, index, {}});
    }
  }
  // Each choice samples from its own copy of the row, rows in parallel: a choice's token
  // depends only on its logits, parameters and history, so the order of work is free.
  const auto vocab = static_cast<size_t>(model.vocab_size());
  ThreadPool::global().parallel_for(
      static_cast<int64_t>(jobs.size()), 1, [&](int64_t begin, int64_t end) {
        std::vector<float> scratch;
        for (int64_t j = begin; j < end; ++j) {
          Job& job = jobs[static_cast<size_t>(j)];
          if (const auto slot = f.device_slot.find(job.target); slot != f.device_slot.end()) {
            job.info.token = out.sampled[slot->second];
            if (job.target->active->request.sampling.want_logprobs)
              job.info.logprob = out.sampled_logprobs[slot->second];
            continue;
          }
          if (!out.argmax.empty() && !f.host_rows[static_cast<size_t>(job.row)]) {
            job.info.token = out.argmax[static_cast<size_t>(job.row)];
            continue;
          }
          const float* row = out.logits.row<float>(job.row);
          scratch.assign(row, row + vocab);
          job.info = sample_token(scratch, sample_input(*job.target, job.index));
        }
      });
  // Tokens land in row order: events, stops and finished requests as one at a time would.
  for (Job& job : jobs) {
    if (active.count(job.request) == 0) continue;  // every choice finished: the request is gone
    if (job.target->finished) continue;
    apply_token(*job.target, job.index, std::move(job.info));
  }
  end_failed();
}

void Engine::Impl::publish_stats() {
  kv::PagedKvCache& cache = runner.cache();
  EngineStats s = counters;
  // A request runs while any of its choices holds a row; n choices count once.
  for (const auto& [id, a] : active) {
    const bool running = std::any_of(a->choices.begin(), a->choices.end(),
                                     [](const auto& c) { return c->seq.running; });
    ++(running ? s.requests_running : s.requests_waiting);
  }
  s.kv_blocks_cached = prefix ? prefix->cached_only_blocks() : 0;
  s.kv_blocks_used = cache.used_blocks() - s.kv_blocks_cached;
  s.kv_blocks_free = 0;
  for (int g = 0; g < cache.num_groups(); ++g) s.kv_blocks_free += cache.free_blocks(g);
  if (prefix) {
    s.prefix_cache_hits = prefix->hits();
    s.prefix_cache_queries = prefix->queries();
  }
  std::lock_guard lock(mu);
  published = s;
  // drain() returns once in-flight reaches 0, so it does so together with the final stats.
  requests_in_flight -= done_since_publish;
  done_since_publish = 0;
  published.requests_waiting += static_cast<int64_t>(inbox.size());
}

void Engine::Impl::loop() {
  // The step launched last and not collected yet: the next one is launched before it is
  // collected, so the host's work between steps (collecting, sampling, stops, events, the next
  // schedule and plan) overlaps the device's step.
  std::optional<InFlight> in_flight;
  for (;;) {
    std::deque<std::unique_ptr<Active>> arrived;
    std::vector<RequestId> cancelled;
    bool stop = false;
    {
      std::unique_lock lock(mu);
      wake.wait(lock, [&] {
        return stopping || !inbox.empty() || !cancels.empty() || !scheduler->idle() ||
               in_flight.has_value();
      });
      arrived.swap(inbox);
      cancelled.swap(cancels);
      stop = stopping;
    }
    const auto busy_start = std::chrono::steady_clock::now();
    const double wait_before = counters.step_wait_seconds_total;
    for (auto& a : arrived) admit_new(std::move(a));
    for (RequestId id : cancelled) cancel_request(id, FinishReason::Cancelled, "");
    if (stop) {
      if (in_flight) runner.abandon_launched();
      while (!active.empty()) cancel_request(active.begin()->first, FinishReason::Cancelled, "");
      publish_stats();
      drained.notify_all();
      return;
    }
    try {
      if (in_flight && !in_flight->chainable) {
        finish_step(*in_flight);
        in_flight.reset();
      }
      std::optional<InFlight> next;
      if (!scheduler->idle()) next = launch_step();
      if (in_flight) {
        finish_step(*in_flight);
        in_flight.reset();
        // Device outputs feed the next step themselves; a CPU model's runs from its plan.
        if (next && !runner.device_outputs()) resolve_fed_tokens(*next);
      }
      in_flight = std::move(next);
      if (in_flight && !config.overlap_steps) {
        finish_step(*in_flight);
        in_flight.reset();
      }
    } catch (const std::exception& e) {
      // A failed step leaves its rows' KV undefined: every running request ends with the error,
      // and the prefix cache is dropped (the blocks those requests just stored may hold the
      // launched steps' positions: a step's tokens count as computed from its launch).
      RINGLM_LOG(Error, "engine: step failed: ", e.what());
      runner.abandon_launched();
      in_flight.reset();
      while (!active.empty()) cancel_request(active.begin()->first, FinishReason::Error, e.what());
      if (prefix) prefix->clear();
    }
    const double busy =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - busy_start).count();
    counters.host_seconds_total += busy - (counters.step_wait_seconds_total - wait_before);
    publish_stats();
    drained.notify_all();
  }
}

// ---- Engine ----

Engine::Engine(models::Model& model, const Tokenizer& tokenizer, const EngineConfig& config)
    : impl_(std::make_unique<Impl>(model, tokenizer, config)) {}

Engine::~Engine() = default;

std::string Engine::validate(const Request& r) const {
  const auto vocab = impl_->model.vocab_size();
  const auto& s = r.sampling;
  const auto msg = [](const auto&... parts) { return detail::concat(parts...); };
  if (r.prompt.empty()) return "the prompt is empty";
  for (int32_t id : r.prompt) {
    if (id < 0 || id >= vocab)
      return msg("prompt token id ", id, " is outside the vocabulary [0, ", vocab, ")");
  }
  // Choices are rows of the batch at once; the scheduler's order key keeps 16 bits for them.
  const int max_n = std::min(impl_->config.max_batch, 0xFFFF);
  if (r.n < 1 || r.n > max_n) return msg("n must be in [1, ", max_n, "], got ", r.n);
  if (!(s.temperature >= 0.0f) || !std::isfinite(s.temperature))
    return msg("temperature must be >= 0, got ", s.temperature);
  if (s.top_k < 0) return msg("top_k must be >= 0, got ", s.top_k);
  if (!(s.top_p > 0.0f && s.top_p <= 1.0f)) return msg("top_p must be in (0, 1], got ", s.top_p);
  if (!(s.min_p >= 0.0f && s.min_p <= 1.0f)) return msg("min_p must be in [0, 1], got ", s.min_p);
  if (!(s.repetition_penalty > 0.0f) || !std::isfinite(s.repetition_penalty))
    return msg("repetition_penalty must be > 0, got ", s.repetition_penalty);
  if (!(s.presence_penalty >= -2.0f && s.presence_penalty <= 2.0f))
    return msg("presence_penalty must be in [-2, 2], got ", s.presence_penalty);
  if (!(s.frequency_penalty >= -2.0f && s.frequency_penalty <= 2.0f))
    return msg("frequency_penalty must be in [-2, 2], got ", s.frequency_penalty);
  for (const auto& [id, bias] : s.logit_bias) {
    if (id < 0 || id >= vocab)
      return msg("logit_bias token id ", id, " is outside the vocabulary [0, ", vocab, ")");
    if (!(bias >= -100.0f && bias <= 100.0f))
      return msg("logit_bias of token ", id, " must be in [-100, 100], got ", bias);
  }
  if (s.logprobs < 0 || s.logprobs > kMaxLogprobs)
    return msg("logprobs must be in [0, ", kMaxLogprobs, "], got ", s.logprobs);
  if (r.stop.max_tokens < 1) return msg("max_tokens must be at least 1, got ", r.stop.max_tokens);
  if (r.stop.min_tokens < 0 || r.stop.min_tokens > r.stop.max_tokens)
    return msg("min_tokens must be in [0, max_tokens], got ", r.stop.min_tokens);
  for (int32_t id : r.stop.stop_token_ids) {
    if (id < 0 || id >= vocab)
      return msg("stop token id ", id, " is outside the vocabulary [0, ", vocab, ")");
  }
  for (const auto& str : r.stop.stop_strings) {
    if (str.empty()) return "stop strings must not be empty";
  }
  const auto total = static_cast<int64_t>(r.prompt.size()) + r.stop.max_tokens;
  if (total > impl_->max_model_len)
    return msg("prompt (", r.prompt.size(), " tokens) + max_tokens (", r.stop.max_tokens,
               ") = ", total, " exceeds the maximum context length of ", impl_->max_model_len,
               " tokens");
  if (total > impl_->kv_capacity_tokens)
    return msg("prompt (", r.prompt.size(), " tokens) + max_tokens (", r.stop.max_tokens,
               ") = ", total, " exceeds the KV cache, which holds at most ",
               impl_->kv_capacity_tokens, " tokens for one sequence");
  return "";
}

RequestId Engine::submit(Request request, RequestCallbacks callbacks) {
  const std::string problem = validate(request);
  RINGLM_USER_CHECK(problem.empty(), problem);
  auto a = std::make_unique<Active>();
  a->request = std::move(request);
  a->callbacks = std::move(callbacks);
  RequestId id;
  {
    std::lock_guard lock(impl_->mu);
    RINGLM_USER_CHECK(!impl_->stopping && !impl_->draining,
                      "the engine is shutting down and takes no new requests");
    id = impl_->next_id++;
    a->id = id;
    a->seed = a->request.sampling.seed ? *a->request.sampling.seed : impl_->seeds();
    impl_->inbox.push_back(std::move(a));
    ++impl_->requests_in_flight;
  }
  impl_->wake.notify_all();
  return id;
}

void Engine::cancel(RequestId id) {
  {
    std::lock_guard lock(impl_->mu);
    impl_->cancels.push_back(id);
  }
  impl_->wake.notify_all();
}

void Engine::drain() {
  std::unique_lock lock(impl_->mu);
  impl_->draining = true;
  impl_->drained.wait(lock, [&] { return impl_->requests_in_flight == 0 || impl_->stopping; });
}

EngineStats Engine::stats() const {
  std::lock_guard lock(impl_->mu);
  return impl_->published;
}

int64_t Engine::max_model_len() const {
  return impl_->max_model_len;
}
int64_t Engine::max_sequence_tokens() const {
  return std::min(impl_->max_model_len, impl_->kv_capacity_tokens);
}
const models::Model& Engine::model() const {
  return impl_->model;
}
const Tokenizer& Engine::tokenizer() const {
  return impl_->tokenizer;
}

}  // namespace ringlm::engine
