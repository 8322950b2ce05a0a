// The scheduler: which sequences run in the next step, with how many tokens, and what happens
// when the KV pools run out. A sequence is one generated stream (one choice of a request):
// its tokens are the prompt plus what was generated so far; `computed` of them have their K/V in
// the cache. Every step gives each running sequence the next chunk of its uncomputed tokens:
//   1. decode rows first (one uncomputed token), oldest first; when an append finds no block,
//      unused prefix-cache blocks are evicted, then the newest running sequence is preempted (its
//      KV released, requeued at the front of the waiting queue to recompute prompt + generated;
//      a row it already had in this step is taken out) until the append fits or the row itself
//      was the newest;
//   2. then prefill chunks of running sequences, oldest first, filling the step's token budget
//      (appends that fail are handled the same way);
//   3. then admission, first come first served: the head of the queue joins when a row is free
//      and the pools can promise its tokens plus the first generated one (reserve); otherwise
//      it waits (and so does everyone behind it).
// Logits are wanted for a row whose chunk reaches the end of its tokens.
#pragma once

#include <cstdint>
#include <deque>
#include <vector>

#include "kv/paged_kv_cache.h"
#include "kv/step_plan.h"

namespace ringlm::engine {

class PrefixCache;

struct SeqState {
  uint64_t order = 0;           // arrival order: the largest is preempted first
  std::vector<int32_t> tokens;  // prompt + generated
  int64_t prompt_len = 0;       // tokens[0, prompt_len) are the prompt
  kv::SequenceId kv = -1;       // -1 while waiting
  int64_t computed = 0;         // tokens whose K/V are in the cache
  int64_t scheduled = 0;        // tokens of this step
  int rows = 1;                 // rows it will occupy once forked (n choices before the fork)
  int64_t cached_tokens = 0;    // prompt tokens the last admission took from the prefix cache
  int64_t preemptions = 0;      // times it was preempted
  bool running = false;
  void* owner = nullptr;  // the caller's object for this sequence
};

struct SchedulerConfig {
  int64_t max_step_tokens = 512;  // tokens of one step, all rows together
  int max_batch = 64;             // running sequences
};

struct ScheduledStep {
  std::vector<kv::RowRequest> rows;
  std::vector<SeqState*> seqs;       // per row
  std::vector<SeqState*> preempted;  // during this schedule (requeued, KV released)
  std::vector<SeqState*> failed;     // can never fit the KV, even alone: the caller ends them
  int64_t num_tokens = 0;            // all rows' tokens
  bool empty() const { return rows.empty(); }
};

class Scheduler {
 public:
  // The prefix cache (may be null) is consulted at admission and fed on release.
  Scheduler(kv::PagedKvCache& cache, const SchedulerConfig& config, PrefixCache* prefix = nullptr);
  ~Scheduler();  // releases the KV of every sequence still running
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  // Queues a sequence (back of the waiting queue, or in `order` among the preempted ones).
  void enqueue(SeqState* seq);
  // A running copy of `parent` sharing its KV blocks (PagedKvCache::fork): same tokens and
  // computed count. `child` must not be queued or running.
  void fork(SeqState* parent, SeqState* child);
  // Removes the sequence wherever it is, releasing its KV (full blocks go to the prefix cache).
  void remove(SeqState* seq);

  ScheduledStep schedule();
  // After the step ran: the scheduled tokens are now computed.
  void complete(const ScheduledStep& step);

  size_t num_waiting() const { return waiting_.size(); }
  size_t num_running() const { return running_.size(); }
  bool idle() const { return waiting_.empty() && running_.empty(); }
  int64_t preemptions() const { return preemptions_; }
  kv::PagedKvCache& cache() { return cache_; }

 private:
  void release_kv(SeqState* seq);
  void preempt(SeqState* seq, ScheduledStep& step);
  // Appends n tokens, preempting the newest running sequences while the pools lack blocks.
  // false if `seq` itself was preempted.
  bool append_or_preempt(SeqState* seq, int64_t n, ScheduledStep& step);
  // Opens the KV sequence of the waiting head and reserves its tokens; false if it must wait.
  bool admit(SeqState* seq);
  // Whether evicting every unused prefix-cache block would let `seq` be promised `need` tokens.
  bool fits_after_eviction(const SeqState* seq, int64_t need) const;
  int rows_in_use() const;

  kv::PagedKvCache& cache_;
  SchedulerConfig config_;
  PrefixCache* prefix_;
  std::deque<SeqState*> waiting_;
  std::vector<SeqState*> running_;  // ascending order
  int64_t preemptions_ = 0;
};

}  // namespace ringlm::engine
