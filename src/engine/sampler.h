// Sampling of one row's next token from its logits, in vLLM's order:
//   1. suppression: ids banned this step (EOS / stop ids before min_tokens) get -inf;
//   2. logit_bias is added;
//   3. penalties: repetition (over prompt + generated: positive logits divided, negative ones
//      multiplied), then frequency (minus f · count in the generated tokens), then presence
//      (minus p if the token was generated) — the "processed logits";
//   4. logprobs (if wanted) = log-softmax of the processed logits (before temperature);
//   5. temperature == 0: argmax of the processed logits (lowest id wins ties); else
//      softmax(processed / temperature), then min_p (drop p < min_p · p_max), then top_k (keep
//      the k largest, ties at the k-th kept), then top_p (keep the most probable tokens, most
//      probable first with ties by id, while the mass before them is < top_p of what is left);
//   6. one uniform u from Philox keyed by (seed, choice, token index) picks the token by the
//      inverse CDF over the kept tokens in id order.
// Everything is computed per row from its own logits, so a row's result does not depend on the
// rest of the batch.
#pragma once

#include <cstdint>
#include <span>
#include <unordered_map>
#include <vector>

#include "engine/engine.h"

namespace ringlm::engine {

// The tokens penalties look at: the prompt's (as a set) and the generated ones (with counts).
class TokenHistory {
 public:
  TokenHistory() = default;
  explicit TokenHistory(std::span<const int32_t> prompt);
  void add_generated(int32_t token) { ++generated_[token]; }
  const std::vector<int32_t>& prompt_tokens() const { return prompt_; }  // unique, ascending
  const std::unordered_map<int32_t, int32_t>& generated_counts() const { return generated_; }

 private:
  std::vector<int32_t> prompt_;
  std::unordered_map<int32_t, int32_t> generated_;
};

// Steps 1-3 in place on F32[vocab] logits.
void process_logits(std::span<float> logits, const SamplingParams& params,
                    const TokenHistory& history, std::span<const int32_t> suppressed);

// Step 5 for temperature > 0: the probability of every id (0 for dropped ones), summing to 1.
std::vector<double> sampling_distribution(std::span<const float> processed,
                                          const SamplingParams& params);

// The id whose cumulative probability (in id order) first exceeds u · total; the last id with
// a non-zero probability if rounding leaves u · total unreached.
int32_t pick_token(std::span<const double> probs, double u);

// Lowest id of the largest value.
int32_t argmax_token(std::span<const float> values);

struct SampleInput {
  const SamplingParams* params = nullptr;
  const TokenHistory* history = nullptr;
  std::span<const int32_t> suppressed;  // ids banned this step
  uint64_t seed = 0;
  uint32_t choice = 0;
  uint64_t index = 0;  // tokens this choice generated before this one
};

// Steps 1-6. `logits` (F32[vocab]) is overwritten with the processed logits. The logprobs of
// the result are filled when params->want_logprobs or params->logprobs > 0.
TokenInfo sample_token(std::span<float> logits, const SampleInput& input);

// Steps 4-6 on logits already processed, with the uniform given (ignored at temperature 0): what
// the GPU sampler computes for a choice without bias, penalties or suppressed ids.
TokenInfo sample_processed(std::span<const float> processed, const SamplingParams& params,
                           double u);

}  // namespace ringlm::engine
