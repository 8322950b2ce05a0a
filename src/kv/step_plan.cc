#include "kv/step_plan.h"

#include <algorithm>

namespace ringlm::kv {

StepPlan::StepPlan(const std::vector<RowRequest>& rows, const PagedKvCache& cache) {
  size_t max_blocks = 1;
  for (const auto& row : rows) max_blocks = std::max(max_blocks, cache.block_table(row.seq).size());
  query_start_.push_back(0);
  logit_begin_.push_back(0);
  block_tables_.assign(rows.size() * max_blocks, 0);
  for (size_t r = 0; r < rows.size(); ++r) {
    const RowRequest& row = rows[r];
    RINGLM_CHECK(!row.tokens.empty(), "row ", r, " has no tokens");
    const auto& table = cache.block_table(row.seq);
    std::copy(table.begin(), table.end(),
              block_tables_.begin() + static_cast<int64_t>(r * max_blocks));
    for (size_t i = 0; i < row.tokens.size(); ++i) {
      const int64_t pos = row.start_position + static_cast<int64_t>(i);
      const bool wants = row.want_all_logits || (row.want_logits && i + 1 == row.tokens.size());
      if (wants) logit_tokens_.push_back(static_cast<int32_t>(token_ids_.size()));
      token_ids_.push_back(row.tokens[i]);
      positions_.push_back(static_cast<int32_t>(pos));
      slots_.push_back(cache.slot(row.seq, pos));
    }
    query_start_.push_back(static_cast<int32_t>(token_ids_.size()));
    context_len_.push_back(
        static_cast<int32_t>(row.start_position + static_cast<int64_t>(row.tokens.size())));
    logit_begin_.push_back(static_cast<int32_t>(logit_tokens_.size()));
  }
  attention_rows_.num_rows = static_cast<int>(rows.size());
  attention_rows_.query_start = query_start_.data();
  attention_rows_.context_len = context_len_.data();
  attention_rows_.block_table = block_tables_.data();
  attention_rows_.max_blocks = static_cast<int>(max_blocks);
}

Tensor StepPlan::token_ids() const {
  return Tensor(const_cast<int32_t*>(token_ids_.data()), DType::I32, {num_tokens()});
}
Tensor StepPlan::positions() const {
  return Tensor(const_cast<int32_t*>(positions_.data()), DType::I32, {num_tokens()});
}
Tensor StepPlan::slots() const {
  return Tensor(const_cast<int32_t*>(slots_.data()), DType::I32, {num_tokens()});
}

}  // namespace ringlm::kv
