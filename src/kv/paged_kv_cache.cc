#include "kv/paged_kv_cache.h"

#include <algorithm>
#include <cstring>

namespace ringlm::kv {

namespace {
size_t block_bytes_one_tensor(const KvCacheConfig& c) {
  return static_cast<size_t>(c.block_tokens) * static_cast<size_t>(c.kv_heads) *
         static_cast<size_t>(c.head_dim) * dtype_size(c.dtype);
}
}  // namespace

PagedKvCache::PagedKvCache(const KvCacheConfig& config) : config_(config) {
  RINGLM_CHECK(config.num_layers > 0 && config.kv_heads > 0 && config.head_dim > 0 &&
                   config.block_tokens > 0,
               "bad KV cache shape");
  RINGLM_USER_CHECK(config.num_blocks >= 2, "KV cache budget too small: ", config.num_blocks,
                    " blocks (need at least 2)");
  const size_t total = bytes_per_block() * static_cast<size_t>(config.num_blocks);
  // Left untouched: pages are committed only as blocks get written, so a large budget costs no
  // memory until it is used.
  storage_.reset(new std::byte[total]);
  // Hand out low block ids first: free_ is a stack, so push them in reverse.
  for (int64_t b = config.num_blocks - 1; b >= 1; --b) free_.push_back(static_cast<int32_t>(b));
}

PagedKvCache::~PagedKvCache() = default;

size_t PagedKvCache::bytes_per_block() const {
  return 2 * block_bytes_one_tensor(config_) * static_cast<size_t>(config_.num_layers);
}

int64_t PagedKvCache::blocks_for_budget(const KvCacheConfig& shape, size_t budget_bytes) {
  const size_t per_block =
      2 * block_bytes_one_tensor(shape) * static_cast<size_t>(shape.num_layers);
  return static_cast<int64_t>(budget_bytes / per_block);
}

SequenceId PagedKvCache::add_sequence() {
  const SequenceId id = next_id_++;
  tables_[id];
  return id;
}

bool PagedKvCache::reserve(SequenceId seq, int64_t total_tokens) {
  auto it = tables_.find(seq);
  RINGLM_CHECK(it != tables_.end(), "unknown sequence ", seq);
  auto& table = it->second;
  const int64_t need = (total_tokens + config_.block_tokens - 1) / config_.block_tokens;
  const int64_t more = need - static_cast<int64_t>(table.size());
  if (more <= 0) return true;
  if (more > free_blocks()) return false;
  for (int64_t i = 0; i < more; ++i) {
    table.push_back(free_.back());
    free_.pop_back();
  }
  return true;
}

void PagedKvCache::release(SequenceId seq) {
  auto it = tables_.find(seq);
  if (it == tables_.end()) return;
  // Released blocks go back in reverse so the most recently used is reused last.
  for (auto b = it->second.rbegin(); b != it->second.rend(); ++b) free_.push_back(*b);
  tables_.erase(it);
}

const std::vector<int32_t>& PagedKvCache::block_table(SequenceId seq) const {
  auto it = tables_.find(seq);
  RINGLM_CHECK(it != tables_.end(), "unknown sequence ", seq);
  return it->second;
}

int32_t PagedKvCache::slot(SequenceId seq, int64_t pos) const {
  const auto& table = block_table(seq);
  const int64_t block = pos / config_.block_tokens;
  RINGLM_CHECK(block < static_cast<int64_t>(table.size()), "position ", pos,
               " beyond the reserved blocks of sequence ", seq);
  return static_cast<int32_t>(table[static_cast<size_t>(block)] * config_.block_tokens +
                              pos % config_.block_tokens);
}

int64_t PagedKvCache::tokens_available(SequenceId seq) const {
  const auto& table = block_table(seq);
  return (static_cast<int64_t>(table.size()) + free_blocks()) * config_.block_tokens;
}

ops::KvLayerView PagedKvCache::layer_view(int layer) const {
  RINGLM_CHECK(layer >= 0 && layer < config_.num_layers, "layer ", layer, " out of range");
  const size_t one = block_bytes_one_tensor(config_) * static_cast<size_t>(config_.num_blocks);
  std::byte* base = storage_.get() + 2 * one * static_cast<size_t>(layer);
  ops::KvLayerView view;
  view.k = Tensor(base, config_.dtype,
                  {config_.num_blocks, config_.block_tokens, config_.kv_heads, config_.head_dim});
  view.v = Tensor(base + one, config_.dtype,
                  {config_.num_blocks, config_.block_tokens, config_.kv_heads, config_.head_dim});
  return view;
}

}  // namespace ringlm::kv
