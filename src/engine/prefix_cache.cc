#include "engine/prefix_cache.h"

#include <algorithm>

namespace ringlm::engine {

PrefixCache::PrefixCache(kv::PagedKvCache& cache, const PrefixCacheConfig& config)
    : cache_(cache), config_(config) {
  deepest_first_ = false;
  for (int g = 0; g < cache.num_groups(); ++g) {
    if (cache.table_group(g) == g && cache.cap_blocks(g) == kv::kUnlimitedTokens)
      deepest_first_ = true;
  }
}

bool PrefixCache::Entry::holds_blocks() const {
  return std::any_of(blocks.begin(), blocks.end(), [](int32_t b) { return b != 0; });
}

PrefixCache::LruKey PrefixCache::lru_key(uint64_t hash, const Entry& e) const {
  return {e.last_used, deepest_first_ ? -e.depth : e.depth, hash};
}

PrefixCache::~PrefixCache() {
  clear();
}

uint64_t PrefixCache::block_hash(uint64_t parent, std::span<const int32_t> tokens) {
  // splitmix64 steps over the parent and each id; collisions are caught by comparing tokens.
  const auto mix = [](uint64_t x) {
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
  };
  uint64_t h = mix(parent ^ 0x72696E676C6Dull);
  for (int32_t t : tokens) h = mix(h ^ static_cast<uint32_t>(t));
  return h == 0 ? 1 : h;  // 0 is the root's "parent"
}

PrefixCache::Entry* PrefixCache::find(uint64_t hash, uint64_t parent,
                                      std::span<const int32_t> tokens) {
  auto it = entries_.find(hash);
  if (it == entries_.end()) return nullptr;
  Entry& e = it->second;
  if (e.parent != parent ||
      !std::equal(e.tokens.begin(), e.tokens.end(), tokens.begin(), tokens.end()))
    return nullptr;
  return &e;
}

void PrefixCache::touch(uint64_t hash, Entry& e) {
  lru_.erase(lru_key(hash, e));
  e.last_used = tick_;
  if (e.holds_blocks()) lru_.insert(lru_key(hash, e));
}

void PrefixCache::hold(uint64_t hash, Entry& e, int g, int32_t block) {
  cache_.retain_block(g, block);
  e.blocks[static_cast<size_t>(g)] = block;
  lru_.insert(lru_key(hash, e));
  ++held_blocks_;
  held_bytes_ += cache_.bytes_per_block(g);
}

void PrefixCache::release_blocks(uint64_t hash) {
  Entry& e = entries_.at(hash);
  lru_.erase(lru_key(hash, e));
  for (int g = 0; g < cache_.num_groups(); ++g) {
    int32_t& b = e.blocks[static_cast<size_t>(g)];
    if (b == 0) continue;
    cache_.release_block(g, b);
    b = 0;
    --held_blocks_;
    held_bytes_ -= cache_.bytes_per_block(g);
  }
  prune(hash);
}

void PrefixCache::prune(uint64_t hash) {
  while (hash != 0) {
    auto it = entries_.find(hash);
    if (it == entries_.end() || it->second.children > 0 || it->second.holds_blocks()) return;
    const uint64_t parent = it->second.parent;
    entries_.erase(it);
    if (parent != 0) --entries_.at(parent).children;
    hash = parent;
  }
}

void PrefixCache::clear() {
  std::vector<uint64_t> holding;
  for (const auto& [used, rank, hash] : lru_) holding.push_back(hash);
  for (uint64_t hash : holding) release_blocks(hash);
  entries_.clear();
}

int64_t PrefixCache::cached_only_blocks() const {
  int64_t n = 0;
  for (const auto& [hash, e] : entries_) {
    for (int g = 0; g < cache_.num_groups(); ++g) {
      const int32_t b = e.blocks[static_cast<size_t>(g)];
      if (b != 0 && cache_.pool(g).refcount(b) == 1) ++n;
    }
  }
  return n;
}

void PrefixCache::record_admission(int64_t cached_tokens) {
  ++queries_;
  if (cached_tokens > 0) ++hits_;
}

int64_t PrefixCache::evictable_blocks(int g) const {
  int64_t n = 0;
  for (const auto& [hash, e] : entries_) {
    const int32_t b = e.blocks[static_cast<size_t>(g)];
    if (b != 0 && cache_.pool(g).refcount(b) == 1) ++n;
  }
  return n;
}

bool PrefixCache::evict_one() {
  for (const auto& [used, rank, hash] : lru_) {
    const Entry& e = entries_.at(hash);
    bool frees = false;
    for (int g = 0; g < cache_.num_groups() && !frees; ++g) {
      const int32_t b = e.blocks[static_cast<size_t>(g)];
      frees = b != 0 && cache_.pool(g).refcount(b) == 1;
    }
    if (frees) {
      release_blocks(hash);
      return true;
    }
  }
  return false;
}

void PrefixCache::enforce_cap() {
  if (config_.max_bytes == 0) return;
  while (held_bytes_ > config_.max_bytes) {
    if (evict_one()) continue;
    // Everything left is shared with running sequences: drop the oldest reference anyway.
    if (lru_.empty()) return;
    release_blocks(std::get<2>(*lru_.begin()));
  }
}

void PrefixCache::store(kv::SequenceId seq, std::span<const int32_t> tokens, int64_t computed) {
  const int64_t bt = cache_.block_tokens();
  const int64_t blocks = std::min<int64_t>(computed, static_cast<int64_t>(tokens.size())) / bt;
  ++tick_;
  uint64_t parent = 0;
  for (int64_t b = 0; b < blocks; ++b) {
    const auto chunk = tokens.subspan(static_cast<size_t>(b * bt), static_cast<size_t>(bt));
    const uint64_t hash = block_hash(parent, chunk);
    Entry* e = find(hash, parent, chunk);
    if (e == nullptr) {
      if (entries_.count(hash) != 0) return;  // a collision: keep the older entry
      Entry fresh;
      fresh.parent = parent;
      fresh.tokens.assign(chunk.begin(), chunk.end());
      fresh.blocks.assign(static_cast<size_t>(cache_.num_groups()), 0);
      fresh.depth = b;
      fresh.last_used = tick_;
      e = &entries_.emplace(hash, std::move(fresh)).first->second;
      if (parent != 0) ++entries_.at(parent).children;
    } else {
      touch(hash, *e);
    }
    // Fill groups the entry lacks (a sliding group's block released by an earlier holder).
    for (int g = 0; g < cache_.num_groups(); ++g) {
      if (cache_.table_group(g) != g || e->blocks[static_cast<size_t>(g)] != 0) continue;
      const int32_t block = cache_.block_table(seq, g)[static_cast<size_t>(b)];
      if (block != 0) hold(hash, *e, g, block);
    }
    parent = hash;
  }
  prune(parent);  // a last entry left without blocks (and its empty ancestors)
  enforce_cap();
}

std::pair<kv::SequenceId, int64_t> PrefixCache::open(std::span<const int32_t> tokens) {
  const int64_t bt = cache_.block_tokens();
  const int64_t most = (static_cast<int64_t>(tokens.size()) - 1) / bt;
  std::vector<std::pair<uint64_t, Entry*>> chain;
  uint64_t parent = 0;
  for (int64_t b = 0; b < most; ++b) {
    const auto chunk = tokens.subspan(static_cast<size_t>(b * bt), static_cast<size_t>(bt));
    const uint64_t hash = block_hash(parent, chunk);
    Entry* e = find(hash, parent, chunk);
    if (e == nullptr) break;
    chain.emplace_back(hash, e);
    parent = hash;
  }
  // The longest prefix whose blocks cover what a sequence of that length needs in every group.
  const auto usable = [&](int64_t k) {
    for (int g = 0; g < cache_.num_groups(); ++g) {
      if (cache_.table_group(g) != g) continue;
      for (int64_t b = 0; b < k; ++b) {
        if (!cache_.block_needed(g, k * bt, b)) continue;
        if (chain[static_cast<size_t>(b)].second->blocks[static_cast<size_t>(g)] == 0) return false;
      }
    }
    return true;
  };
  int64_t k = static_cast<int64_t>(chain.size());
  while (k > 0 && !usable(k)) --k;
  if (k == 0) return {cache_.add_sequence(), 0};
  ++tick_;
  std::vector<std::vector<int32_t>> tables(static_cast<size_t>(cache_.num_groups()));
  for (int g = 0; g < cache_.num_groups(); ++g) {
    if (cache_.table_group(g) != g) continue;
    auto& table = tables[static_cast<size_t>(g)];
    for (int64_t b = 0; b < k; ++b) {
      const bool released = !cache_.block_needed(g, k * bt, b);
      table.push_back(
          released ? 0 : chain[static_cast<size_t>(b)].second->blocks[static_cast<size_t>(g)]);
    }
  }
  for (int64_t b = 0; b < k; ++b)
    touch(chain[static_cast<size_t>(b)].first, *chain[static_cast<size_t>(b)].second);
  return {cache_.adopt(tables, k * bt), k * bt};
}

}  // namespace ringlm::engine
