// StepPlan: everything a forward step needs to know about its rows, built once per step and read
// by every layer (plan once, run per layer). Each row brings any number of new tokens (a prefill
// chunk or one decode token) at its own position; tokens of all rows are flattened so that each
// weight runs one matmul over the whole step. Per layer group: block tables, the slot of every
// new token (kv_write) and the attention rows; per layer: which group's view it reads, whether
// it writes K/V (shared layers do not), its window and sinks.
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

// The attention op a step uses; ops::attention unless an oracle swaps in the reference.
using AttentionFn = void (*)(const Tensor& q, const ops::KvLayerView& kv,
                             const ops::AttentionRows& rows, const ops::AttentionParams& params,
                             Tensor& out);

class StepPlan {
 public:
  // Each row's tokens must already be appended to the cache (PagedKvCache::append), so that
  // cache.length(seq) == start_position + tokens.size().
  StepPlan(const std::vector<RowRequest>& rows, const PagedKvCache& cache);
  StepPlan(const StepPlan&) = delete;
  StepPlan& operator=(const StepPlan&) = delete;

  int64_t num_tokens() const { return static_cast<int64_t>(token_ids_.size()); }
  int num_rows() const { return static_cast<int>(query_start_.size()) - 1; }

  // These tensors are on the model's device: host vectors, or their mirrors once
  // set_device_tables() has attached them.
  Tensor token_ids() const;        // I32[T]
  Tensor positions() const;        // I32[T]
  Tensor logit_token_ids() const;  // I32[logit_tokens().size()]
  // Sets flattened token `index` of the host tables (engine/runner.h's launch/collect: an input
  // token that was not known yet when the plan was built). A device copy already made keeps
  // its value.
  void set_token(int64_t index, int32_t id);
  // Indices into the flattened tokens whose logits are wanted, in row order (host).
  const std::vector<int32_t>& logit_tokens() const { return logit_tokens_; }
  // For row r, the first index into logit_tokens() and how many it owns.
  int32_t logits_begin(int row) const { return logit_begin_[static_cast<size_t>(row)]; }
  int32_t logits_count(int row) const {
    return logit_begin_[static_cast<size_t>(row) + 1] - logit_begin_[static_cast<size_t>(row)];
  }

  // Token ranges [begin, end) of the flattened step.
  struct TokenRange {
    int64_t begin = 0, end = 0;
  };
  // What layer l reads and writes this step.
  struct Layer {
    const ops::AttentionRows* rows = nullptr;
    Tensor slots;  // I32[T]: where this step's K/V go (the layer's group)
    bool writes_kv = true;
    int window = 0;
    int sink_tokens = 0;
    // Precision transition (--kv-quant-start S): `rows` computes the queries at positions >= S
    // over the quantized view; `dense_rows` those < S over the bf16 companion's view
    // (PagedKvCache::dense_layer_view), into which the tokens of `dense_writes` (positions < S)
    // are also written at `dense_slots` (entries of the other tokens are -1). Null otherwise.
    const ops::AttentionRows* dense_rows = nullptr;
    Tensor dense_slots;  // I32[T]
    const std::vector<TokenRange>* dense_writes = nullptr;
  };
  Layer layer(int l) const;
  const ops::AttentionRows& attention_rows(int group) const;
  Tensor slots(int group) const;  // I32[T]

  // The bf16 companions' write ranges, flattened as (group, begin, end, ...): part of a step's
  // shape for CUDA graphs, which replay the writes they captured.
  std::vector<int64_t> dense_write_ranges() const;

  int num_groups() const { return static_cast<int>(groups_.size()); }
  int table_group(int group) const { return table_group_[static_cast<size_t>(group)]; }

  // Copies of the plan's tables on the model's device, made by the runner once per step
  // (backends/cuda/plan_upload.h). Attention rows keep their host tables (for checks and kernel
  // selection) and gain the backend mirror.
  struct DeviceTables {
    Tensor token_ids, positions, logit_tokens;  // I32 on the device
    std::vector<Tensor> slots;                  // per group (table groups only), I32[T]
    std::vector<const void*> rows_mirror;       // per group: ops::AttentionRows::device_mirror
  };
  void set_device_tables(DeviceTables tables);

  AttentionFn attention_fn() const { return attention_fn_; }
  void set_attention_fn(AttentionFn fn) { attention_fn_ = fn; }

 private:
  struct GroupTables {
    std::vector<int32_t> slots;         // [T] (bf16 companion: -1 for positions >= quant_start)
    std::vector<int32_t> block_tables;  // [rows, max_blocks], padded with the null block 0
    ops::AttentionRows rows;
    std::vector<TokenRange> writes;  // bf16 companion: the runs of tokens below quant_start
  };
  const KvLayout* layout_ = nullptr;
  std::vector<int> table_group_;  // per group: the group whose tables it reads
  std::vector<int32_t> token_ids_;
  std::vector<int32_t> positions_;
  std::vector<int32_t> query_start_;
  std::vector<int32_t> context_len_;
  std::vector<int32_t> logit_tokens_;
  std::vector<int32_t> logit_begin_;
  std::vector<GroupTables> groups_;  // per group (shared groups' entries stay empty)
  bool on_device_ = false;
  DeviceTables device_;
  AttentionFn attention_fn_ = &ops::attention;
};

}  // namespace ringlm::kv
