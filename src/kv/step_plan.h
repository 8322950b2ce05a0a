// StepPlan: everything a forward step needs to know about its rows, built once per step and read
// by every layer (plan once, run per layer). Each row brings any number of new tokens (a prefill
// chunk or one decode token) at its own position; tokens of all rows are flattened so that each
// weight runs one matmul over the whole step.
#pragma once

#include <cstdint>
#include <vector>

#include "kv/paged_kv_cache.h"
#include "ops/ops.h"

namespace ringlm::kv {

struct RowRequest {
  SequenceId seq = 0;
  std::vector<int32_t> tokens;   // new tokens this step
  int64_t start_position = 0;    // position of tokens[0] (= tokens already in the KV)
  bool want_all_logits = false;  // logits for every new token (parity tests), else only the last
  bool want_logits = true;       // false for prefill chunks that end before the prompt does
};

class StepPlan {
 public:
  // Reserves nothing: the caller has reserved KV room for start_position + tokens.size().
  StepPlan(const std::vector<RowRequest>& rows, const PagedKvCache& cache);

  int64_t num_tokens() const { return static_cast<int64_t>(token_ids_.size()); }
  int num_rows() const { return static_cast<int>(query_start_.size()) - 1; }

  Tensor token_ids() const;  // I32[T]
  Tensor positions() const;  // I32[T]
  Tensor slots() const;      // I32[T]
  // Indices into the flattened tokens whose logits are wanted, in row order.
  const std::vector<int32_t>& logit_tokens() const { return logit_tokens_; }
  // For row r, the first index into logit_tokens() and how many it owns.
  int32_t logits_begin(int row) const { return logit_begin_[static_cast<size_t>(row)]; }
  int32_t logits_count(int row) const {
    return logit_begin_[static_cast<size_t>(row) + 1] - logit_begin_[static_cast<size_t>(row)];
  }
  const ops::AttentionRows& attention_rows() const { return attention_rows_; }

 private:
  std::vector<int32_t> token_ids_;
  std::vector<int32_t> positions_;
  std::vector<int32_t> slots_;
  std::vector<int32_t> query_start_;
  std::vector<int32_t> context_len_;
  std::vector<int32_t> block_tables_;  // [rows, max_blocks], padded with the null block 0
  std::vector<int32_t> logit_tokens_;
  std::vector<int32_t> logit_begin_;
  ops::AttentionRows attention_rows_;
};

}  // namespace ringlm::kv
