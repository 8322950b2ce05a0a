#include "engine/text_score.h"

#include <algorithm>
#include <cmath>

namespace ringlm::engine {

void TextScore::add(const TextScore& other) {
  nll_sum += other.nll_sum;
  kl_sum += other.kl_sum;
  kl_max = std::max(kl_max, other.kl_max);
  positions += other.positions;
  top1_agree += other.top1_agree;
}

double TextScore::perplexity() const {
  return positions > 0 ? std::exp(nll_sum / static_cast<double>(positions)) : 0;
}

namespace {

// log-softmax of one logit row, in double.
void log_softmax(const float* logits, int64_t n, std::vector<double>& out) {
  out.resize(static_cast<size_t>(n));
  double max = -INFINITY;
  for (int64_t i = 0; i < n; ++i) max = std::max(max, static_cast<double>(logits[i]));
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) sum += std::exp(static_cast<double>(logits[i]) - max);
  const double log_sum = max + std::log(sum);
  for (int64_t i = 0; i < n; ++i) out[static_cast<size_t>(i)] = logits[i] - log_sum;
}

size_t argmax(const std::vector<double>& v) {
  return static_cast<size_t>(std::max_element(v.begin(), v.end()) - v.begin());
}

// Logits of tokens [start, end) of the sequence (appended to the cache first), host F32.
Tensor run_chunk(Runner& runner, kv::SequenceId seq, const std::vector<int32_t>& tokens,
                 size_t start, size_t end) {
  RINGLM_CHECK(runner.cache().append(seq, static_cast<int64_t>(end - start)),
               "KV append beyond the reservation");
  kv::RowRequest row{
      seq,
      {tokens.begin() + static_cast<int64_t>(start), tokens.begin() + static_cast<int64_t>(end)},
      static_cast<int64_t>(start),
      true,
      true};
  kv::StepPlan plan({row}, runner.cache());
  return runner.step(plan);
}

kv::SequenceId open_sequence(Runner& runner, size_t n) {
  const kv::SequenceId seq = runner.cache().add_sequence();
  RINGLM_USER_CHECK(runner.cache().reserve(seq, static_cast<int64_t>(n)), "a sequence of ", n,
                    " tokens does not fit the KV memory (raise --kv-memory)");
  return seq;
}

}  // namespace

TextScore score_tokens(Runner& runner, Runner* reference, const std::vector<int32_t>& tokens) {
  TextScore score;
  if (tokens.size() < 2) return score;
  const kv::SequenceId seq = open_sequence(runner, tokens.size());
  const kv::SequenceId ref_seq = reference ? open_sequence(*reference, tokens.size()) : 0;
  const auto chunk = static_cast<size_t>(runner.config().max_step_tokens);
  const int64_t vocab = runner.model().vocab_size();
  std::vector<double> lp, ref_lp;
  std::vector<float> ref_rows;
  for (size_t start = 0; start < tokens.size(); start += chunk) {
    const size_t end = std::min(tokens.size(), start + chunk);
    if (reference) {
      // The reference's logits live in its runner's buffer until its next step: copy them out.
      const Tensor r = run_chunk(*reference, ref_seq, tokens, start, end);
      ref_rows.assign(r.ptr<float>(), r.ptr<float>() + r.numel());
    }
    const Tensor logits = run_chunk(runner, seq, tokens, start, end);
    for (size_t i = start; i < end && i + 1 < tokens.size(); ++i) {
      log_softmax(logits.row<float>(static_cast<int64_t>(i - start)), vocab, lp);
      score.nll_sum -= lp[static_cast<size_t>(tokens[i + 1])];
      ++score.positions;
      if (!reference) continue;
      log_softmax(ref_rows.data() + (i - start) * static_cast<size_t>(vocab), vocab, ref_lp);
      double kl = 0;
      for (size_t v = 0; v < lp.size(); ++v) kl += std::exp(ref_lp[v]) * (ref_lp[v] - lp[v]);
      kl = std::max(kl, 0.0);  // rounding can leave a tiny negative for identical runs
      score.kl_sum += kl;
      score.kl_max = std::max(score.kl_max, kl);
      if (argmax(lp) == argmax(ref_lp)) ++score.top1_agree;
    }
  }
  runner.cache().release(seq);
  if (reference) reference->cache().release(ref_seq);
  return score;
}

}  // namespace ringlm::engine
