// Stop conditions of one choice and the text it streams: tokens are decoded incrementally, text
// that could be the start of a stop string is held back until it cannot be, and a matched stop
// string (with everything after it) is never emitted.
//   - An EOS id (unless ignore_eos) or a stop_token_id ends the choice with Stop; that token's
//     text is not emitted (vLLM's default).
//   - Stop strings are looked for once min_tokens tokens exist; the earliest match wins.
//   - max_tokens ends the choice with Length after the text of its last token.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "tokenizer/detokenizer.h"

namespace ringlm::engine {

struct StopOutcome {
  std::string text;  // text to emit now
  FinishReason finish = FinishReason::None;
  std::string matched;  // the stop string (finish == Stop by a string)
};

class StopChecker {
 public:
  // `eos_ids`: the model's end-of-sequence ids (ignored when stop.ignore_eos).
  StopChecker(const Tokenizer& tokenizer, const StopConditions& stop,
              const std::vector<int32_t>& eos_ids);

  // Ids the sampler must not pick before the choice has `generated` tokens (min_tokens).
  const std::vector<int32_t>& stop_ids() const { return stop_ids_; }
  bool suppress_stop_ids(int64_t generated) const { return generated < stop_.min_tokens; }

  // The choice's `generated`-th token (1-based).
  StopOutcome push(int32_t token, int64_t generated);
  // Ends the choice for another reason (Length from outside, Cancelled): releases held text
  // unless cancelled.
  StopOutcome finish(FinishReason reason);

 private:
  // Emits what can no longer start a stop string, or ends at the earliest match.
  StopOutcome release(bool check_stops, bool final);

  StopConditions stop_;
  std::vector<int32_t> stop_ids_;
  IncrementalDetokenizer detok_;
  std::string pending_;  // decoded but not yet emitted
};

}  // namespace ringlm::engine
