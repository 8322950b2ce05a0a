#include "engine/scheduler.h"

#include <algorithm>
#include <tuple>

#include "engine/prefix_cache.h"

namespace ringlm::engine {

namespace {

int64_t pending(const SeqState* seq) {
  return static_cast<int64_t>(seq->tokens.size()) - seq->computed - seq->scheduled;
}

bool by_order(const SeqState* a, const SeqState* b) {
  return a->order < b->order;
}

}  // namespace

Scheduler::Scheduler(kv::PagedKvCache& cache, const SchedulerConfig& config, PrefixCache* prefix)
    : cache_(cache), config_(config), prefix_(prefix) {
  RINGLM_USER_CHECK(config.max_step_tokens >= 1, "max_step_tokens must be at least 1");
  RINGLM_USER_CHECK(config.max_batch >= 1, "max_batch must be at least 1");
}

Scheduler::~Scheduler() {
  for (SeqState* seq : running_) cache_.release(seq->kv);
}

void Scheduler::enqueue(SeqState* seq) {
  RINGLM_CHECK(!seq->running && seq->kv < 0, "sequence queued twice");
  RINGLM_CHECK(!seq->tokens.empty(), "sequence without tokens");
  waiting_.push_back(seq);
}

void Scheduler::fork(SeqState* parent, SeqState* child) {
  RINGLM_CHECK(parent->running && parent->scheduled == 0, "fork of a sequence not at rest");
  child->tokens = parent->tokens;
  child->prompt_len = parent->prompt_len;
  child->kv = cache_.fork(parent->kv);
  child->computed = parent->computed;
  child->scheduled = 0;
  child->rows = 1;
  child->running = true;
  running_.insert(std::upper_bound(running_.begin(), running_.end(), child, by_order), child);
}

void Scheduler::release_kv(SeqState* seq) {
  if (seq->kv < 0) return;
  if (prefix_ != nullptr) prefix_->store(seq->kv, seq->tokens, seq->computed);
  cache_.release(seq->kv);
  seq->kv = -1;
}

void Scheduler::remove(SeqState* seq) {
  if (seq->running) {
    release_kv(seq);
    running_.erase(std::find(running_.begin(), running_.end(), seq));
    seq->running = false;
  } else {
    auto it = std::find(waiting_.begin(), waiting_.end(), seq);
    if (it != waiting_.end()) waiting_.erase(it);
  }
  seq->scheduled = 0;
}

int Scheduler::rows_in_use() const {
  int rows = 0;
  for (const SeqState* seq : running_) rows += seq->rows;
  return rows;
}

void Scheduler::preempt(SeqState* seq, ScheduledStep& step) {
  if (seq->scheduled > 0) {  // a row of this step already: take it out
    const auto at = std::find(step.seqs.begin(), step.seqs.end(), seq) - step.seqs.begin();
    step.seqs.erase(step.seqs.begin() + at);
    step.rows.erase(step.rows.begin() + at);
    step.num_tokens -= seq->scheduled;
    seq->scheduled = 0;
  }
  release_kv(seq);
  running_.erase(std::find(running_.begin(), running_.end(), seq));
  seq->running = false;
  seq->computed = 0;
  seq->cached_tokens = 0;
  ++seq->preemptions;
  ++preemptions_;
  // Older sequences were preempted after newer ones: each goes in front of those before it.
  waiting_.push_front(seq);
  step.preempted.push_back(seq);
}

bool Scheduler::append_or_preempt(SeqState* seq, int64_t n, ScheduledStep& step) {
  while (!cache_.append(seq->kv, n)) {
    if (prefix_ != nullptr && prefix_->evict_one()) continue;
    SeqState* victim = running_.back();
    preempt(victim, step);
    if (victim == seq) return false;
  }
  return true;
}

bool Scheduler::fits_after_eviction(const SeqState* seq, int64_t need) const {
  const int64_t have = std::max(cache_.reserved_tokens(seq->kv), cache_.length(seq->kv));
  for (int g = 0; g < cache_.num_groups(); ++g) {
    if (cache_.table_group(g) != g) continue;
    const int64_t available = cache_.tokens_available(seq->kv, g);
    if (available == kv::kUnlimitedTokens) continue;
    if (available + prefix_->evictable_blocks(g) * cache_.block_tokens() < need - have)
      return false;
  }
  return true;
}

bool Scheduler::admit(SeqState* seq) {
  if (prefix_ != nullptr) {
    std::tie(seq->kv, seq->cached_tokens) = prefix_->open(seq->tokens);
  } else {
    seq->kv = cache_.add_sequence();
    seq->cached_tokens = 0;
  }
  seq->computed = seq->cached_tokens;
  // The whole uncomputed part and the first generated token are promised, so the prefill never
  // runs out; later decode appends may (and then preempt). Cached blocks are evicted for it only
  // when that makes it fit.
  const auto need = static_cast<int64_t>(seq->tokens.size()) + 1;
  bool evicting = false;
  while (!cache_.reserve(seq->kv, need)) {
    // Alone it must get everything (failing it would be final).
    if (prefix_ != nullptr && (evicting || running_.empty() || fits_after_eviction(seq, need)) &&
        prefix_->evict_one()) {
      evicting = true;
      continue;
    }
    cache_.release(seq->kv);
    seq->kv = -1;
    seq->computed = 0;
    seq->cached_tokens = 0;
    return false;
  }
  if (prefix_ != nullptr) prefix_->record_admission(seq->cached_tokens);
  return true;
}

ScheduledStep Scheduler::schedule() {
  ScheduledStep step;
  const int64_t budget = config_.max_step_tokens;
  const auto add_row = [&](SeqState* seq, int64_t take) {
    kv::RowRequest row;
    row.seq = seq->kv;
    row.start_position = seq->computed;
    const auto begin = seq->tokens.begin() + seq->computed;
    row.tokens.assign(begin, begin + take);
    row.want_logits = seq->computed + take == static_cast<int64_t>(seq->tokens.size());
    seq->scheduled = take;
    step.rows.push_back(std::move(row));
    step.seqs.push_back(seq);
    step.num_tokens += take;
  };
  // 1. Decode rows, oldest first.
  const std::vector<SeqState*> decoding = running_;
  for (SeqState* seq : decoding) {
    if (!seq->running || pending(seq) != 1) continue;
    if (step.num_tokens == budget) break;
    if (append_or_preempt(seq, 1, step)) add_row(seq, 1);
  }
  // 2. Prefill chunks of running sequences. Their tokens were promised at admission, but a fork's
  // or an adopted prefix's shared blocks can break promises (docs/kv-cache.md), so a failed
  // append is handled like a decode row's.
  const std::vector<SeqState*> prefilling = running_;
  for (SeqState* seq : prefilling) {
    if (!seq->running || pending(seq) <= 1 || seq->scheduled > 0) continue;
    const int64_t take = std::min(pending(seq), budget - step.num_tokens);
    if (take == 0) break;
    if (append_or_preempt(seq, take, step)) add_row(seq, take);
  }
  // 3. Admission, first come first served; none in a step that had to preempt.
  while (step.preempted.empty() && !waiting_.empty() && step.num_tokens < budget) {
    SeqState* seq = waiting_.front();
    if (rows_in_use() + seq->rows > config_.max_batch && !running_.empty()) break;
    if (!admit(seq)) {
      if (!running_.empty()) break;
      // Alone with an empty cache and still no room: it never fits.
      waiting_.pop_front();
      step.failed.push_back(seq);
      continue;
    }
    waiting_.pop_front();
    seq->running = true;
    running_.insert(std::upper_bound(running_.begin(), running_.end(), seq, by_order), seq);
    const int64_t take = std::min(pending(seq), budget - step.num_tokens);
    if (append_or_preempt(seq, take, step)) add_row(seq, take);
  }
  return step;
}

void Scheduler::complete(const ScheduledStep& step) {
  for (SeqState* seq : step.seqs) {
    seq->computed += seq->scheduled;
    seq->scheduled = 0;
  }
}

}  // namespace ringlm::engine
