// Paged K/V storage for every attention layer of a model: fixed-size blocks of `block_tokens`
// tokens from one allocation, a free list, and a block table per sequence. Block 0 is the null
// block (never handed out), so a zero in a block table never aliases live KV.
//
// This is the foundation slice of the KV block layer (DESIGN.md §3): one group of full-attention
// layers in an unquantized format. Sliding groups, quantized formats, refcounted sharing, rollback
// and persistence extend it without changing what kernels read (ops::KvLayerView + block tables).
#pragma once

#include <cstdint>
#include <memory>
#include <unordered_map>
#include <vector>

#include "core/tensor.h"
#include "ops/ops.h"

namespace ringlm::kv {

struct KvCacheConfig {
  int num_layers = 0;
  int kv_heads = 0;
  int head_dim = 0;
  int block_tokens = 16;
  int64_t num_blocks = 0;  // including the null block
  DType dtype = DType::F32;
};

using SequenceId = int64_t;

class PagedKvCache {
 public:
  explicit PagedKvCache(const KvCacheConfig& config);
  ~PagedKvCache();
  PagedKvCache(const PagedKvCache&) = delete;
  PagedKvCache& operator=(const PagedKvCache&) = delete;

  // Blocks a memory budget buys for this model shape (K and V of every layer).
  static int64_t blocks_for_budget(const KvCacheConfig& shape, size_t budget_bytes);
  size_t bytes_per_block() const;

  SequenceId add_sequence();
  // Makes room for `total_tokens` tokens of the sequence; false (nothing changed) if the pool
  // lacks the blocks.
  bool reserve(SequenceId seq, int64_t total_tokens);
  void release(SequenceId seq);
  bool has_sequence(SequenceId seq) const { return tables_.count(seq) != 0; }

  const std::vector<int32_t>& block_table(SequenceId seq) const;
  // Slot of token position `pos` of the sequence: block * block_tokens + offset.
  int32_t slot(SequenceId seq, int64_t pos) const;

  ops::KvLayerView layer_view(int layer) const;
  const KvCacheConfig& config() const { return config_; }
  int64_t free_blocks() const { return static_cast<int64_t>(free_.size()); }
  int64_t used_blocks() const { return config_.num_blocks - 1 - free_blocks(); }
  // How many more tokens `seq` could grow by with the blocks free now.
  int64_t tokens_available(SequenceId seq) const;

 private:
  KvCacheConfig config_;
  std::unique_ptr<std::byte[]> storage_;  // [layers][K|V][num_blocks, block_tokens, heads, dim]
  std::vector<int32_t> free_;             // LIFO free list of block ids
  std::unordered_map<SequenceId, std::vector<int32_t>> tables_;
  SequenceId next_id_ = 1;
};

}  // namespace ringlm::kv
