#include "engine/stop.h"

#include <algorithm>

namespace ringlm::engine {

StopChecker::StopChecker(const Tokenizer& tokenizer, const StopConditions& stop,
                         const std::vector<int32_t>& eos_ids)
    : stop_(stop), detok_(tokenizer, /*skip_special_tokens=*/true) {
  stop_ids_ = stop.stop_token_ids;
  if (!stop.ignore_eos) stop_ids_.insert(stop_ids_.end(), eos_ids.begin(), eos_ids.end());
  std::sort(stop_ids_.begin(), stop_ids_.end());
  stop_ids_.erase(std::unique(stop_ids_.begin(), stop_ids_.end()), stop_ids_.end());
}

StopOutcome StopChecker::release(bool check_stops, bool final) {
  StopOutcome out;
  if (check_stops) {
    size_t best = std::string::npos;
    for (const auto& s : stop_.stop_strings) {
      const size_t at = pending_.find(s);
      if (at != std::string::npos && (best == std::string::npos || at < best)) {
        best = at;
        out.matched = s;
      }
    }
    if (best != std::string::npos) {
      out.text = pending_.substr(0, best);
      out.finish = FinishReason::Stop;
      pending_.clear();
      return out;
    }
  }
  // Hold back the longest suffix that is a proper prefix of some stop string.
  size_t hold = 0;
  if (!final) {
    for (const auto& s : stop_.stop_strings) {
      for (size_t n = std::min(s.size() - 1, pending_.size()); n > hold; --n) {
        if (pending_.compare(pending_.size() - n, n, s, 0, n) == 0) {
          hold = n;
          break;
        }
      }
    }
  }
  out.text = pending_.substr(0, pending_.size() - hold);
  pending_.erase(0, pending_.size() - hold);
  return out;
}

StopOutcome StopChecker::push(int32_t token, int64_t generated) {
  const bool check_stops = generated >= stop_.min_tokens;
  if (check_stops && std::binary_search(stop_ids_.begin(), stop_ids_.end(), token)) {
    pending_ += detok_.flush();
    StopOutcome out = release(/*check_stops=*/true, /*final=*/true);
    out.finish = FinishReason::Stop;
    return out;
  }
  pending_ += detok_.push(token);
  StopOutcome out = release(check_stops, /*final=*/false);
  if (out.finish == FinishReason::None && generated >= stop_.max_tokens) {
    pending_ += detok_.flush();
    StopOutcome rest = release(check_stops, /*final=*/true);
    out.text += rest.text;
    out.finish = rest.finish == FinishReason::None ? FinishReason::Length : rest.finish;
    out.matched = rest.matched;
  }
  return out;
}

StopOutcome StopChecker::finish(FinishReason reason) {
  if (reason == FinishReason::Cancelled || reason == FinishReason::Error) {
    pending_.clear();
    return {"", reason, ""};
  }
  pending_ += detok_.flush();
  StopOutcome out = release(/*check_stops=*/true, /*final=*/true);
  if (out.finish == FinishReason::None) out.finish = reason;
  return out;
}

}  // namespace ringlm::engine
