#include "kv/step_plan.h"

#include <algorithm>
#include <bit>
#include <limits>

namespace ringlm::kv {

StepPlan::StepPlan(const std::vector<RowRequest>& rows, const PagedKvCache& cache)
    : layout_(&cache.layout()) {
  query_start_.push_back(0);
  logit_begin_.push_back(0);
  for (size_t r = 0; r < rows.size(); ++r) {
    const RowRequest& row = rows[r];
    RINGLM_CHECK(!row.tokens.empty(), "row ", r, " has no tokens");
    const int64_t end = row.start_position + static_cast<int64_t>(row.tokens.size());
    RINGLM_CHECK(cache.length(row.seq) == end, "row ", r, " (sequence ", row.seq,
                 ") ends at position ", end, " but the cache holds ", cache.length(row.seq),
                 " tokens: append the row's tokens to the cache first");
    for (size_t i = 0; i < row.tokens.size(); ++i) {
      const bool wants = row.want_all_logits || (row.want_logits && i + 1 == row.tokens.size());
      if (wants) logit_tokens_.push_back(static_cast<int32_t>(token_ids_.size()));
      token_ids_.push_back(row.tokens[i]);
      positions_.push_back(static_cast<int32_t>(row.start_position + static_cast<int64_t>(i)));
    }
    query_start_.push_back(static_cast<int32_t>(token_ids_.size()));
    context_len_.push_back(static_cast<int32_t>(end));
    logit_begin_.push_back(static_cast<int32_t>(logit_tokens_.size()));
  }
  groups_.resize(static_cast<size_t>(cache.num_groups()));
  for (int g = 0; g < cache.num_groups(); ++g) {
    table_group_.push_back(cache.table_group(g));
    if (cache.table_group(g) != g) continue;
    GroupTables& gt = groups_[static_cast<size_t>(g)];
    size_t max_blocks = 1;
    for (const auto& row : rows)
      max_blocks = std::max(max_blocks, cache.block_table(row.seq, g).size());
    // A power of two: decode steps of the same rows then share a table shape across many steps
    // (CUDA graphs are captured per shape).
    max_blocks = std::bit_ceil(max_blocks);
    gt.block_tables.assign(rows.size() * max_blocks, 0);
    // A bf16 companion stores (and answers queries at) positions < quant_start only; its
    // quantized group answers the queries from quant_start on.
    const LayerGroup& grp = cache.group(g);
    const int64_t dense_end =
        grp.is_dense_companion() ? grp.quant_start : std::numeric_limits<int64_t>::max();
    for (size_t r = 0; r < rows.size(); ++r) {
      const auto& table = cache.block_table(rows[r].seq, g);
      std::copy(table.begin(), table.end(),
                gt.block_tables.begin() + static_cast<int64_t>(r * max_blocks));
      for (size_t i = 0; i < rows[r].tokens.size(); ++i) {
        const int64_t pos = rows[r].start_position + static_cast<int64_t>(i);
        if (pos >= dense_end) {
          gt.slots.push_back(-1);
          continue;
        }
        const auto t = static_cast<int64_t>(gt.slots.size());
        if (grp.is_dense_companion()) {
          if (gt.writes.empty() || gt.writes.back().end != t) gt.writes.push_back({t, t});
          ++gt.writes.back().end;
        }
        gt.slots.push_back(cache.slot(rows[r].seq, g, pos));
      }
    }
    gt.rows.num_rows = static_cast<int>(rows.size());
    gt.rows.query_start = query_start_.data();
    gt.rows.context_len = context_len_.data();
    gt.rows.block_table = gt.block_tables.data();
    gt.rows.max_blocks = static_cast<int>(max_blocks);
    if (grp.is_dense_companion()) gt.rows.query_pos_end = static_cast<int32_t>(grp.quant_start);
    if (grp.dense_group >= 0) gt.rows.query_pos_begin = static_cast<int32_t>(grp.quant_start);
    // Checked once here, so attention does not walk every block table on every layer.
    ops::check_attention_rows(gt.rows, num_tokens(), cache.num_blocks(g),
                              cache.config().block_tokens);
    gt.rows.tables_checked = true;
  }
}

void StepPlan::set_device_tables(DeviceTables tables) {
  RINGLM_CHECK(tables.slots.size() == groups_.size() && tables.rows_mirror.size() == groups_.size(),
               "device tables for ", tables.slots.size(), " groups, the plan has ", groups_.size());
  device_ = std::move(tables);
  on_device_ = true;
  for (size_t g = 0; g < groups_.size(); ++g)
    groups_[g].rows.device_mirror = device_.rows_mirror[g];
}

Tensor StepPlan::logit_token_ids() const {
  if (on_device_) return device_.logit_tokens;
  return Tensor(const_cast<int32_t*>(logit_tokens_.data()), DType::I32,
                {static_cast<int64_t>(logit_tokens_.size())});
}

void StepPlan::set_token(int64_t index, int32_t id) {
  RINGLM_CHECK(index >= 0 && index < num_tokens(), "StepPlan::set_token: index ", index, " of ",
               num_tokens());
  token_ids_[static_cast<size_t>(index)] = id;
}

Tensor StepPlan::token_ids() const {
  if (on_device_) return device_.token_ids;
  return Tensor(const_cast<int32_t*>(token_ids_.data()), DType::I32, {num_tokens()});
}
Tensor StepPlan::positions() const {
  if (on_device_) return device_.positions;
  return Tensor(const_cast<int32_t*>(positions_.data()), DType::I32, {num_tokens()});
}

const ops::AttentionRows& StepPlan::attention_rows(int group) const {
  RINGLM_CHECK(group >= 0 && group < static_cast<int>(groups_.size()), "group ", group,
               " out of range");
  return groups_[static_cast<size_t>(table_group_[static_cast<size_t>(group)])].rows;
}

Tensor StepPlan::slots(int group) const {
  RINGLM_CHECK(group >= 0 && group < static_cast<int>(groups_.size()), "group ", group,
               " out of range");
  const auto tg = static_cast<size_t>(table_group_[static_cast<size_t>(group)]);
  if (on_device_) return device_.slots[tg];
  const auto& s = groups_[tg].slots;
  return Tensor(const_cast<int32_t*>(s.data()), DType::I32, {num_tokens()});
}

std::vector<int64_t> StepPlan::dense_write_ranges() const {
  std::vector<int64_t> out;
  for (size_t g = 0; g < groups_.size(); ++g) {
    for (const TokenRange& r : groups_[g].writes) {
      out.push_back(static_cast<int64_t>(g));
      out.push_back(r.begin);
      out.push_back(r.end);
    }
  }
  return out;
}

StepPlan::Layer StepPlan::layer(int l) const {
  RINGLM_CHECK(l >= 0 && l < layout_->num_layers(), "layer ", l, " out of range");
  const int g = layout_->group_of_layer[static_cast<size_t>(l)];
  const LayerGroup& grp = layout_->groups[static_cast<size_t>(g)];
  Layer out;
  out.rows = &attention_rows(g);
  out.slots = slots(g);
  out.writes_kv = grp.kind != GroupKind::Shared;
  out.window = grp.window;
  out.sink_tokens = grp.sink_tokens;
  const int dense = layout_->groups[static_cast<size_t>(table_group(g))].dense_group;
  if (dense >= 0) {
    out.dense_rows = &groups_[static_cast<size_t>(dense)].rows;
    out.dense_slots = slots(dense);
    out.dense_writes = &groups_[static_cast<size_t>(dense)].writes;
  }
  return out;
}

}  // namespace ringlm::kv
