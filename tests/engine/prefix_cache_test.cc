// PrefixCache on a bare PagedKvCache: which prefixes are reused (whole blocks, at most tokens - 1,
// sliding groups only where the window's blocks are still held), LRU eviction, the byte cap, and
// every block back in its pool after clear().
#include "engine/prefix_cache.h"

#include <gtest/gtest.h>

#include <numeric>

namespace ringlm::engine {
namespace {

kv::LayerKvSpec spec(int window) {
  kv::LayerKvSpec s;
  s.kv_heads = 1;
  s.head_dim = 2;
  s.window = window;
  return s;
}

kv::KvCacheConfig config(std::vector<kv::LayerKvSpec> layers, std::vector<int64_t> blocks) {
  kv::KvCacheConfig c;
  c.layers = std::move(layers);
  c.block_tokens = 4;
  c.group_blocks = std::move(blocks);
  c.max_step_tokens = 4;
  return c;
}

std::vector<int32_t> iota(int32_t from, int32_t n) {
  std::vector<int32_t> v(static_cast<size_t>(n));
  std::iota(v.begin(), v.end(), from);
  return v;
}

// A sequence of `tokens`, appended 4 at a time as decode steps would (sliding blocks go).
kv::SequenceId run(kv::PagedKvCache& cache, const std::vector<int32_t>& tokens) {
  const auto seq = cache.add_sequence();
  for (size_t i = 0; i < tokens.size(); i += 4)
    EXPECT_TRUE(cache.append(seq, std::min<int64_t>(4, static_cast<int64_t>(tokens.size() - i))));
  return seq;
}

TEST(PrefixCache, ReusesWholeBlocksOfTheLongestCachedPrefix) {
  kv::PagedKvCache cache(config({spec(0)}, {40}));
  PrefixCache prefix(cache, {});
  const auto tokens = iota(100, 22);
  const auto a = run(cache, tokens);
  prefix.store(a, tokens, 22);  // 5 whole blocks
  cache.release(a);
  EXPECT_EQ(prefix.held_blocks(), 5);
  EXPECT_EQ(cache.used_blocks(), 5);

  auto longer = tokens;
  longer.push_back(7);
  auto [b, cached] = prefix.open(longer);
  EXPECT_EQ(cached, 20);
  EXPECT_EQ(cache.length(b), 20);
  EXPECT_EQ(cache.block_table(b, 0)[4], cache.block_table(b, 0)[4]);
  cache.release(b);
  // At most tokens - 1: a 20-token prompt reuses 16.
  auto [c, cached_c] = prefix.open(iota(100, 20));
  EXPECT_EQ(cached_c, 16);
  cache.release(c);
  // A different block 2 ends the match after block 1.
  auto diverging = tokens;
  diverging[9] = 1;
  auto [d, cached_d] = prefix.open(diverging);
  EXPECT_EQ(cached_d, 8);
  cache.release(d);
  auto [e, cached_e] = prefix.open(iota(5, 30));
  EXPECT_EQ(cached_e, 0);
  cache.release(e);
  prefix.record_admission(16);
  prefix.record_admission(0);
  EXPECT_EQ(prefix.queries(), 2);
  EXPECT_EQ(prefix.hits(), 1);
  prefix.clear();
  EXPECT_EQ(cache.used_blocks(), 0);
}

TEST(PrefixCache, SlidingGroupsReuseOnlyWhereTheWindowIsHeld) {
  // A full group and a sliding group of window 6 (blocks of 4).
  kv::PagedKvCache cache(config({spec(0), spec(6)}, {40, 40}));
  PrefixCache prefix(cache, {});
  const auto tokens = iota(100, 40);
  const auto a = run(cache, tokens);
  prefix.store(a, tokens, 40);
  cache.release(a);
  // Continuing the whole sequence: the last window's blocks are held.
  auto next = tokens;
  next.push_back(1);
  auto [b, cached_b] = prefix.open(next);
  EXPECT_EQ(cached_b, 40);
  cache.release(b);
  // A prompt that stops half-way needs sliding blocks released long ago: no reuse.
  auto [c, cached_c] = prefix.open(iota(100, 21));
  EXPECT_EQ(cached_c, 0);
  cache.release(c);
  prefix.clear();
  EXPECT_EQ(cache.used_blocks(), 0);
}

TEST(PrefixCache, EvictsLeastRecentlyUsedUnsharedBlocksAndHonoursTheCap) {
  kv::PagedKvCache cache(config({spec(0)}, {40}));
  PrefixCache prefix(cache, {});
  const auto first = iota(100, 8), second = iota(200, 8);
  for (const auto* t : {&first, &second}) {
    const auto s = run(cache, *t);
    prefix.store(s, *t, 8);
    cache.release(s);
  }
  EXPECT_EQ(prefix.cached_only_blocks(), 4);
  // Using `first` makes `second` the least recently used.
  auto longer = first;
  longer.push_back(0);
  auto [u, cached] = prefix.open(longer);
  EXPECT_EQ(cached, 8);
  EXPECT_EQ(prefix.cached_only_blocks(), 2);  // first's blocks are shared with u now
  EXPECT_EQ(prefix.evictable_blocks(0), 2);
  EXPECT_TRUE(prefix.evict_one());   // second's deepest block
  EXPECT_TRUE(prefix.evict_one());   // second's first block
  EXPECT_FALSE(prefix.evict_one());  // only blocks u uses are left
  EXPECT_EQ(prefix.held_blocks(), 2);
  cache.release(u);

  PrefixCache capped(cache, {cache.bytes_per_block(0) * 3});
  const auto third = iota(300, 16);
  const auto s = run(cache, third);
  capped.store(s, third, 16);
  cache.release(s);
  EXPECT_EQ(capped.held_blocks(), 3);
  capped.clear();
  prefix.clear();
  EXPECT_EQ(cache.used_blocks(), 0);
}

}  // namespace
}  // namespace ringlm::engine
