// Scoring a model on token sequences: next-token negative log-likelihood (perplexity) and, against
// a reference run of the same model with another KV configuration, the KL divergence of the
// next-token distributions. Used to measure what a KV format costs in quality
// (`ringlm perplexity`, docs/benchmarks.md).
#pragma once

#include <cstdint>
#include <vector>

#include "engine/runner.h"

namespace ringlm::engine {

struct TextScore {
  double nll_sum = 0;  // Σ −log p(token[i+1] | token[..i]) over scored positions
  double kl_sum = 0;   // Σ KL(reference ‖ scored) over the same positions (0 without reference)
  double kl_max = 0;   // the largest per-position KL
  int64_t positions = 0;   // scored positions (tokens − 1 per segment)
  int64_t top1_agree = 0;  // positions where both runs' argmax agree (reference only)

  void add(const TextScore& other);
  double perplexity() const;
  double mean_kl() const { return positions > 0 ? kl_sum / static_cast<double>(positions) : 0; }
};

// Runs `tokens` through `runner` as one sequence in steps of up to the runner's max_step_tokens,
// every position's logits wanted; `reference` (may be null) runs the same tokens alongside. Both
// runners' caches must have room for the sequence; both are left empty.
TextScore score_tokens(Runner& runner, Runner* reference, const std::vector<int32_t>& tokens);

}  // namespace ringlm::engine
