// The serving engine's public interface: requests in, streamed events out. One engine owns one
// model, its Runner (KV cache, arena) and a step loop on its own thread; the server and the CLI
// submit requests and receive events through callbacks called from that thread.
//
// This header is the contract between engine/ (scheduler, sampling, stop, prefix cache) and
// server/ (HTTP, OpenAI/Anthropic protocols). Keep it small and stable.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/runner.h"
#include "models/model.h"
#include "tokenizer/tokenizer.h"

namespace ringlm::engine {

// Sampling of one request. Validation (Engine::validate) rejects values outside the ranges noted.
struct SamplingParams {
  float temperature = 1.0f;         // >= 0; 0 = greedy (argmax, lowest id wins ties)
  int top_k = 0;                    // >= 0; 0 = off
  float top_p = 1.0f;               // (0, 1]
  float min_p = 0.0f;               // [0, 1]
  float repetition_penalty = 1.0f;  // > 0; 1 = off (HF/vLLM: divide positive logits, multiply
                                    // negative, over prompt + generated tokens)
  float presence_penalty = 0.0f;    // [-2, 2], over generated tokens (OpenAI)
  float frequency_penalty = 0.0f;   // [-2, 2], over generated tokens (OpenAI)
  std::vector<std::pair<int32_t, float>> logit_bias;  // id in [0, vocab), bias in [-100, 100]
  std::optional<uint64_t> seed;  // per-request generator: same seed -> same tokens, whatever else
                                 // is in the batch; absent -> engine picks one
  int logprobs = 0;              // >= 0: return the chosen token's logprob and this many top ones
  bool want_logprobs = false;    // chosen token's logprob wanted (OpenAI logprobs=true)
};

struct StopConditions {
  int64_t max_tokens = 256;               // >= 1
  std::vector<int32_t> stop_token_ids;    // in addition to the model's EOS ids
  std::vector<std::string> stop_strings;  // matched on decoded text; the match is not emitted
  bool ignore_eos = false;
  int64_t min_tokens = 0;  // EOS/stop ids are suppressed before this many tokens
};

struct Request {
  std::vector<int32_t> prompt;  // token ids, non-empty
  SamplingParams sampling;
  StopConditions stop;
  int n = 1;  // choices; n > 1 forks rows sharing the prompt's KV blocks
};

enum class FinishReason { None, Stop, Length, Cancelled, Error };
const char* finish_reason_name(FinishReason reason);  // "stop", "length", "cancelled", "error"

constexpr int kMaxLogprobs = 20;  // SamplingParams::logprobs at most (OpenAI's top_logprobs)

struct TokenLogprob {
  int32_t token = 0;
  float logprob = 0.0f;
};
struct TokenInfo {
  int32_t token = 0;
  float logprob = 0.0f;           // log-softmax of the processed logits (after penalties/bias,
                                  // before temperature), as vLLM's default
  std::vector<TokenLogprob> top;  // top `logprobs` alternatives, best first
};

// One event for one choice. Text deltas concatenate to the choice's full text; text held back
// because it may start a stop string is released (or dropped, if the stop matches) later.
struct Event {
  int choice = 0;
  std::string text;                          // new decoded text (may be empty)
  std::vector<TokenInfo> tokens;             // tokens produced since the last event for this choice
  FinishReason finish = FinishReason::None;  // != None: this choice is done (last event)
  std::string stop_matched;                  // the stop string or "" (finish == Stop)
  std::string error;                         // finish == Error
};

struct Usage {
  int64_t prompt_tokens = 0;
  int64_t completion_tokens = 0;  // all choices
  int64_t cached_tokens = 0;      // prompt tokens served from the prefix cache
};

// Called on the engine thread for each event, then once more with `done` = true after every
// choice has finished (usage complete). Must not block for long and must not call the engine
// back except cancel().
struct RequestCallbacks {
  std::function<void(const Event&)> on_event;
  std::function<void(const Usage&)> on_done;
};

using RequestId = uint64_t;

struct EngineConfig {
  RunnerConfig runner;            // KV memory, format, block size, step token budget
  int max_batch = 64;             // rows decoding at once
  int64_t max_model_len = 0;      // 0 = the model's max_position_embeddings
  size_t prompt_cache_bytes = 0;  // prefix cache cap; 0 = whatever KV is free
  bool enable_prefix_cache = true;
  // The next step is queued before the last one is collected (its rows' new tokens fed on the
  // device), so the host's work between steps overlaps the device's. Steps whose tokens the
  // host must choose (penalties, bias, top logprobs; n choices' first token) still wait.
  // false: one step at a time (same-binary A/Bs, tests).
  bool overlap_steps = true;
  // End-of-sequence ids besides config.json's eos_token_id and the tokenizer's eos token
  // (e.g. generation_config.json's: io::stop_token_ids).
  std::vector<int32_t> eos_token_ids;
};

struct EngineStats {
  int64_t requests_waiting = 0;
  int64_t requests_running = 0;
  int64_t kv_blocks_used = 0;
  int64_t kv_blocks_free = 0;
  int64_t kv_blocks_cached = 0;  // held only by the prefix cache
  int64_t prefix_cache_hits = 0;
  int64_t prefix_cache_queries = 0;
  int64_t prompt_tokens_total = 0;
  int64_t generation_tokens_total = 0;
  int64_t requests_finished_total = 0;
  int64_t preemptions_total = 0;
  int64_t steps_total = 0;  // steps launched
  // The engine thread's time with work to do: waiting for launched steps' results (on a CPU
  // model, their forward), and everything else (host work between steps). On a GPU with
  // overlapped steps the host work hides behind the device's step while the wait stays above 0.
  double step_wait_seconds_total = 0;
  double host_seconds_total = 0;
};

class Engine {
 public:
  // Takes ownership of nothing: model and tokenizer must outlive the engine.
  Engine(models::Model& model, const Tokenizer& tokenizer, const EngineConfig& config);
  ~Engine();  // stops the loop; running requests finish with Cancelled
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Empty string if the request can run, else a clear message for a 400 (sampling ranges, empty
  // prompt, ids outside the vocab, prompt + max_tokens over max_model_len or over the whole KV).
  std::string validate(const Request& request) const;
  // Queues a validated request; callbacks start on the engine thread. Throws ringlm::Error
  // with validate()'s message if invalid.
  RequestId submit(Request request, RequestCallbacks callbacks);
  // Finishes the request with Cancelled and frees its KV before the next step. Unknown or
  // finished ids are ignored. Safe from any thread, including inside a callback.
  void cancel(RequestId id);
  // Stops admitting, lets running and queued requests finish, then returns.
  void drain();

  EngineStats stats() const;
  int64_t max_model_len() const;
  // The most tokens (prompt + generated) one request can reach: max_model_len, or less when the
  // whole KV cache holds fewer (the server's default max_tokens stops there).
  int64_t max_sequence_tokens() const;
  const models::Model& model() const;
  const Tokenizer& tokenizer() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace ringlm::engine
