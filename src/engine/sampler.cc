#include "engine/sampler.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <numeric>

#include "backends/cpu/cpu_ops.h"
#include "engine/philox.h"

namespace ringlm::engine {

TokenHistory::TokenHistory(std::span<const int32_t> prompt)
    : prompt_(prompt.begin(), prompt.end()) {
  std::sort(prompt_.begin(), prompt_.end());
  prompt_.erase(std::unique(prompt_.begin(), prompt_.end()), prompt_.end());
}

void process_logits(std::span<float> logits, const SamplingParams& params,
                    const TokenHistory& history, std::span<const int32_t> suppressed) {
  const auto vocab = static_cast<int32_t>(logits.size());
  const auto at = [&](int32_t id) -> float& { return logits[static_cast<size_t>(id)]; };
  for (int32_t id : suppressed) {
    if (id >= 0 && id < vocab) at(id) = -std::numeric_limits<float>::infinity();
  }
  for (const auto& [id, bias] : params.logit_bias) {
    if (id >= 0 && id < vocab) at(id) += bias;
  }
  if (params.repetition_penalty != 1.0f) {
    const float r = params.repetition_penalty;
    const auto penalize = [&](int32_t id) {
      float& l = at(id);
      l = l > 0 ? l / r : l * r;
    };
    // Each token once, whether it is in the prompt, the generated tokens or both.
    for (int32_t id : history.prompt_tokens()) {
      if (id >= 0 && id < vocab) penalize(id);
    }
    for (const auto& [id, count] : history.generated_counts()) {
      if (id >= 0 && id < vocab &&
          !std::binary_search(history.prompt_tokens().begin(), history.prompt_tokens().end(), id))
        penalize(id);
    }
  }
  if (params.frequency_penalty != 0.0f || params.presence_penalty != 0.0f) {
    for (const auto& [id, count] : history.generated_counts()) {
      if (id < 0 || id >= vocab) continue;
      at(id) -= params.frequency_penalty * static_cast<float>(count);
      at(id) -= params.presence_penalty;
    }
  }
}

namespace {

// Where top_p cuts the tokens sorted by weight (heaviest first, lower id first on ties): a token
// is kept while the mass before it is < limit. Kept: every token heavier than `weight`, and those
// of exactly `weight` up to id `last_tied_id`. A selection (partition around a pivot weight,
// keep the side that holds the cut), not a sort: O(vocab) expected. `ids` is reordered.
struct TopPCut {
  double weight;
  int32_t last_tied_id;
};
TopPCut top_p_cut(std::vector<int32_t>& ids, const std::vector<double>& w, double limit) {
  const auto weight = [&](int32_t id) { return w[static_cast<size_t>(id)]; };
  auto begin = ids.begin(), end = ids.end();
  double before = 0;  // mass of the tokens ahead of [begin, end)
  while (begin != end) {
    // Median of three by weight as the pivot.
    const auto mid = begin + (end - begin) / 2;
    double a = weight(*begin), b = weight(*mid), c = weight(*(end - 1));
    if (a > b) std::swap(a, b);
    const double pivot = std::max(a, std::min(b, c));
    const auto heavy_end =
        std::partition(begin, end, [&](int32_t id) { return weight(id) > pivot; });
    const auto tied_end =
        std::partition(heavy_end, end, [&](int32_t id) { return weight(id) == pivot; });
    double heavy = 0;
    for (auto it = begin; it != heavy_end; ++it) heavy += weight(*it);
    if (before + heavy >= limit && heavy_end != begin) {
      end = heavy_end;  // the cut is among the heavier tokens
      continue;
    }
    // Every heavier token is kept; the tied ones in id order while the mass before is < limit.
    before += heavy;
    std::sort(heavy_end, tied_end);
    int32_t last_tied = -1;
    for (auto it = heavy_end; it != tied_end && before < limit; ++it) {
      last_tied = *it;
      before += pivot;
    }
    if (before >= limit || tied_end == end) return {pivot, last_tied};
    begin = tied_end;  // all of them kept: the cut is among the lighter ones
  }
  // Not reached (the region never empties); keep everything rather than nothing.
  return {-std::numeric_limits<double>::infinity(), std::numeric_limits<int32_t>::max()};
}

// sampling_distribution before its normalization (pick_token takes unnormalized weights).
std::vector<double> sampling_weights(std::span<const float> processed,
                                     const SamplingParams& params) {
  const size_t vocab = processed.size();
  std::vector<double> w(vocab, 0.0);
  const double t = params.temperature;
  // max(l / t) is (max l) / t: the division rounds monotonically.
  double largest = -std::numeric_limits<double>::infinity();
  for (float l : processed) largest = std::max(largest, static_cast<double>(l));
  const double top = largest / t;
  if (!std::isfinite(top)) {
    // Every token suppressed: fall back to the lowest id rather than produce NaNs.
    w[0] = 1.0;
    return w;
  }
  // Unnormalized: the most probable token has weight 1, so min_p compares weights directly.
  cpu::sampling_weights(processed, t, top, w);
  if (params.min_p > 0.0f) {
    for (double& v : w) {
      if (v < params.min_p) v = 0.0;
    }
  }
  const bool top_k = params.top_k > 0 && static_cast<size_t>(params.top_k) < vocab;
  if (!top_k && params.top_p >= 1.0f) return w;
  // top_k: the k-th largest weight is the threshold (ties with it kept) — one pass with a min-heap
  // of the k largest so far; a row with k or fewer tokens left keeps them all.
  double threshold = 0.0;
  if (top_k) {
    const auto k = static_cast<size_t>(params.top_k);
    std::vector<double> heap;
    heap.reserve(k);
    for (double v : w) {
      if (v <= 0.0) continue;
      if (heap.size() < k) {
        heap.push_back(v);
        std::push_heap(heap.begin(), heap.end(), std::greater<>());
      } else if (v > heap.front()) {
        std::pop_heap(heap.begin(), heap.end(), std::greater<>());
        heap.back() = v;
        std::push_heap(heap.begin(), heap.end(), std::greater<>());
      }
    }
    if (heap.size() == k) threshold = heap.front();
  }
  if (params.top_p >= 1.0f) {
    for (double& v : w) {
      if (v < threshold) v = 0.0;
    }
    return w;
  }
  // top_p. The head — tokens of weight >= kHeadFloor (the largest is 1) — often carries the
  // limit alone; then every lighter token has at least that much mass before it and is dropped,
  // and the cut is looked for among the head only.
  constexpr double kHeadFloor = 1e-3;
  double total = 0, head = 0;
  for (double& v : w) {
    if (v < threshold) v = 0.0;
    total += v;
    if (v >= kHeadFloor) head += v;
  }
  const double limit = static_cast<double>(params.top_p) * total;
  const double floor = head >= limit ? kHeadFloor : 0.0;
  std::vector<int32_t> candidates;
  for (size_t i = 0; i < vocab; ++i) {
    if (w[i] > 0.0 && w[i] >= floor) candidates.push_back(static_cast<int32_t>(i));
  }
  const TopPCut cut = top_p_cut(candidates, w, limit);
  for (size_t i = 0; i < vocab; ++i) {
    const double v = w[i];
    if (v < cut.weight || (v == cut.weight && static_cast<int32_t>(i) > cut.last_tied_id))
      w[i] = 0.0;
  }
  return w;
}

}  // namespace

std::vector<double> sampling_distribution(std::span<const float> processed,
                                          const SamplingParams& params) {
  std::vector<double> w = sampling_weights(processed, params);
  const double sum = std::accumulate(w.begin(), w.end(), 0.0);
  for (double& v : w) v /= sum;
  return w;
}

int32_t pick_token(std::span<const double> probs, double u) {
  double total = 0;
  for (double p : probs) total += p;
  const double target = u * total;
  double cumulative = 0;
  int32_t last = 0;
  for (size_t i = 0; i < probs.size(); ++i) {
    if (probs[i] <= 0) continue;
    cumulative += probs[i];
    last = static_cast<int32_t>(i);
    if (cumulative > target) return last;
  }
  return last;
}

int32_t argmax_token(std::span<const float> values) {
  size_t best = 0;
  for (size_t i = 1; i < values.size(); ++i) {
    if (values[i] > values[best]) best = i;
  }
  return static_cast<int32_t>(best);
}

namespace {

void fill_logprobs(std::span<const float> processed, int top_n, TokenInfo& info) {
  double top = -std::numeric_limits<double>::infinity();
  for (float l : processed) top = std::max(top, static_cast<double>(l));
  std::vector<double> e(processed.size());
  cpu::sampling_weights(processed, 1.0, top, e);  // exp(l - top), the same vector exp
  const double lse = top + std::log(std::accumulate(e.begin(), e.end(), 0.0));
  const auto logprob = [&](int32_t id) {
    return static_cast<float>(static_cast<double>(processed[static_cast<size_t>(id)]) - lse);
  };
  info.logprob = logprob(info.token);
  if (top_n <= 0) return;
  std::vector<int32_t> ids;
  ids.reserve(processed.size());
  for (size_t i = 0; i < processed.size(); ++i) {
    if (std::isfinite(processed[i])) ids.push_back(static_cast<int32_t>(i));
  }
  const size_t n = std::min(ids.size(), static_cast<size_t>(top_n));
  std::partial_sort(ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(n), ids.end(),
                    [&](int32_t a, int32_t b) {
                      const float la = processed[static_cast<size_t>(a)];
                      const float lb = processed[static_cast<size_t>(b)];
                      return la != lb ? la > lb : a < b;
                    });
  for (size_t i = 0; i < n; ++i) info.top.push_back({ids[i], logprob(ids[i])});
}

}  // namespace

TokenInfo sample_processed(std::span<const float> processed, const SamplingParams& params,
                           double u) {
  TokenInfo info;
  if (params.temperature == 0.0f) {
    info.token = argmax_token(processed);
  } else {
    const auto weights = sampling_weights(processed, params);
    info.token = pick_token(weights, u);
  }
  if (params.want_logprobs || params.logprobs > 0) fill_logprobs(processed, params.logprobs, info);
  return info;
}

TokenInfo sample_token(std::span<float> logits, const SampleInput& input) {
  const SamplingParams& params = *input.params;
  process_logits(logits, params, *input.history, input.suppressed);
  const double u =
      params.temperature == 0.0f ? 0.0 : philox_uniform(input.seed, input.choice, input.index);
  return sample_processed(logits, params, u);
}

}  // namespace ringlm::engine
