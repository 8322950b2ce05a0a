// Prefix cache: K/V blocks of finished (and preempted) sequences, kept by the hash of the tokens
// they hold so that a later sequence starting with the same tokens adopts them instead of
// recomputing. A block is identified by hash(parent block's hash, its block_tokens token ids):
// its K/V depend on exactly those tokens (attention is causal). One cache serves one
// PagedKvCache, so the KV layout, format and block size are fixed for it.
//
// Only whole blocks are cached; a new sequence reuses at most tokens - 1 of its tokens (the step
// needs one token to compute logits from). Entries hold a reference on their blocks (one per
// storage group); entries whose blocks no sequence uses are "cached only" and are evicted least
// recently used first when the pools need blocks or the cache holds more than max_bytes. Among
// equally recent entries of one chain, the deepest goes first when the layout has a full group
// (a full group needs every block of the prefix) and the shallowest first when every group is
// sliding (only the last window's blocks are ever needed). Eviction releases an entry's blocks;
// its tokens stay while deeper entries exist, so the chain still leads to them.
//
// Sliding-window groups: a finished sequence holds only the blocks of its last window, so an
// entry may have no block in a sliding group. A prefix of k blocks is reused only when every
// full group has all k blocks and every sliding group has the blocks the next query still sees
// (PagedKvCache::needed_blocks_begin .. k, plus the sink blocks).
#pragma once

#include <cstdint>
#include <set>
#include <span>
#include <tuple>
#include <unordered_map>
#include <utility>
#include <vector>

#include "kv/paged_kv_cache.h"

namespace ringlm::engine {

struct PrefixCacheConfig {
  size_t max_bytes = 0;  // 0: no cap beyond the pools (evicted only when they need blocks)
};

class PrefixCache {
 public:
  PrefixCache(kv::PagedKvCache& cache, const PrefixCacheConfig& config);
  ~PrefixCache();  // releases every block it holds
  PrefixCache(const PrefixCache&) = delete;
  PrefixCache& operator=(const PrefixCache&) = delete;

  // A new KV sequence holding the longest usable cached prefix of `tokens` and that prefix's
  // length in tokens (0: a fresh empty sequence).
  std::pair<kv::SequenceId, int64_t> open(std::span<const int32_t> tokens);
  // Takes the whole blocks of tokens[0, computed) of `seq` (about to be released).
  void store(kv::SequenceId seq, std::span<const int32_t> tokens, int64_t computed);
  // Counts a query (and a hit if cached_tokens > 0) for a sequence that was admitted; open()
  // alone does not count, since a sequence that must wait opens again later.
  void record_admission(int64_t cached_tokens);
  // Drops the least recently used entry that frees a block; false if none does.
  bool evict_one();
  // Blocks of group g that evicting every entry would free.
  int64_t evictable_blocks(int g) const;
  // Drops every entry.
  void clear();

  int64_t hits() const { return hits_; }
  int64_t queries() const { return queries_; }
  int64_t entries() const { return static_cast<int64_t>(entries_.size()); }
  int64_t held_blocks() const { return held_blocks_; }
  // Blocks whose only reference is this cache.
  int64_t cached_only_blocks() const;

 private:
  struct Entry {
    uint64_t parent = 0;
    std::vector<int32_t> tokens;  // the block's token ids
    std::vector<int32_t> blocks;  // per group: the block, or 0 (shared group / released)
    int64_t depth = 0;            // index of the block in the sequence
    uint64_t last_used = 0;
    int64_t children = 0;  // entries whose parent this is
    bool holds_blocks() const;
  };
  // last_used, eviction rank within a tick (see above), hash. Only entries holding blocks.
  using LruKey = std::tuple<uint64_t, int64_t, uint64_t>;

  static uint64_t block_hash(uint64_t parent, std::span<const int32_t> tokens);
  // The entry for this block of tokens, or null (absent or a hash collision).
  Entry* find(uint64_t hash, uint64_t parent, std::span<const int32_t> tokens);
  LruKey lru_key(uint64_t hash, const Entry& entry) const;
  void touch(uint64_t hash, Entry& entry);
  void hold(uint64_t hash, Entry& entry, int g, int32_t block);
  // Releases the entry's blocks; erases it (and emptied ancestors) unless deeper entries exist.
  void release_blocks(uint64_t hash);
  void prune(uint64_t hash);
  void enforce_cap();

  kv::PagedKvCache& cache_;
  PrefixCacheConfig config_;
  bool deepest_first_ = true;
  std::unordered_map<uint64_t, Entry> entries_;
  std::set<LruKey> lru_;
  uint64_t tick_ = 0;
  int64_t hits_ = 0, queries_ = 0;
  int64_t held_blocks_ = 0;
  size_t held_bytes_ = 0;
};

}  // namespace ringlm::engine
