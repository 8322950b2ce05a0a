// Blocks held outside sequences (retain/release_block) and sequences adopting existing blocks
// (the prefix cache's KV support): the adopted sequence reads exactly the K/V written by the
// first one, grows without touching the held blocks, and every block returns to its pool.
#include <gtest/gtest.h>

#include "kv/paged_kv_cache.h"
#include "ops/ops.h"

namespace ringlm::kv {
namespace {

LayerKvSpec spec(int window = 0) {
  LayerKvSpec s;
  s.kv_heads = 1;
  s.head_dim = 2;
  s.window = window;
  return s;
}

float value_of(int layer, int64_t pos, int kv, int64_t e) {
  return static_cast<float>(layer * 10000 + pos * 10 + kv * 5 + e);
}

void append_and_write(PagedKvCache& cache, SequenceId seq, int64_t n) {
  const int64_t from = cache.length(seq);
  ASSERT_TRUE(cache.append(seq, n));
  for (int l = 0; l < cache.layout().num_layers(); ++l) {
    const int g = cache.layout().group_of_layer[static_cast<size_t>(l)];
    ops::KvLayerView view = cache.layer_view(l);
    std::vector<float> k, v;
    std::vector<int32_t> slots;
    for (int64_t p = from; p < from + n; ++p) {
      slots.push_back(cache.slot(seq, g, p));
      for (int64_t e = 0; e < 2; ++e) {
        k.push_back(value_of(l, p, 0, e));
        v.push_back(value_of(l, p, 1, e));
      }
    }
    ops::kv_write(Tensor(k.data(), DType::F32, {n, 1, 2}), Tensor(v.data(), DType::F32, {n, 1, 2}),
                  Tensor(slots.data(), DType::I32, {n}), view);
  }
}

void expect_values(const PagedKvCache& cache, SequenceId seq) {
  const ExtractedKv kv = cache.extract(seq);
  for (size_t l = 0; l < kv.layers.size(); ++l) {
    const auto& layer = kv.layers[l];
    const auto& pos = kv.positions[static_cast<size_t>(layer.group)];
    const float* k = reinterpret_cast<const float*>(layer.k.data());
    for (size_t i = 0; i < pos.size(); ++i) {
      for (int64_t e = 0; e < 2; ++e)
        ASSERT_EQ(k[i * 2 + static_cast<size_t>(e)], value_of(static_cast<int>(l), pos[i], 0, e))
            << "layer " << l << " position " << pos[i];
    }
  }
}

KvCacheConfig config() {
  KvCacheConfig c;
  c.layers = {spec(), spec(6)};  // a full group and a sliding group (window 6)
  c.block_tokens = 4;
  c.group_blocks = {30, 30};
  c.max_step_tokens = 8;
  return c;
}

TEST(KvAdopt, AdoptedBlocksHoldTheFirstSequencesKv) {
  PagedKvCache cache(config());
  const auto a = cache.add_sequence();
  append_and_write(cache, a, 12);
  append_and_write(cache, a, 2);  // 3 whole blocks (12 tokens) + 2; sliding block 0 released
  // Hold the 3 whole blocks of each group the way the prefix cache does; sliding blocks below
  // what a 12-token sequence needs are already released.
  std::vector<std::vector<int32_t>> tables(2);
  for (int g = 0; g < 2; ++g) {
    for (int64_t b = 0; b < 3; ++b) {
      const int32_t id = cache.block_table(a, g)[static_cast<size_t>(b)];
      tables[static_cast<size_t>(g)].push_back(id);
      if (id != 0) cache.retain_block(g, id);
    }
  }
  EXPECT_EQ(cache.needed_blocks_begin(0, 12), 0);
  EXPECT_EQ(cache.needed_blocks_begin(1, 12), 1);  // keys from position 7 on
  EXPECT_EQ(tables[1][0], 0);
  cache.release(a);
  const int64_t held = cache.used_blocks();
  EXPECT_EQ(held, 3 + 2);

  const auto b = cache.adopt(tables, 12);
  EXPECT_EQ(cache.length(b), 12);
  EXPECT_EQ(cache.used_blocks(), held);  // shared, nothing copied
  expect_values(cache, b);
  append_and_write(cache, b, 6);  // grows into new blocks; the held ones are not written
  expect_values(cache, b);
  EXPECT_EQ(cache.block_table(b, 0)[2], tables[0][2]);
  cache.release(b);
  EXPECT_EQ(cache.used_blocks(), held);
  for (int g = 0; g < 2; ++g) {
    for (int32_t id : tables[static_cast<size_t>(g)])
      if (id != 0) cache.release_block(g, id);
  }
  EXPECT_EQ(cache.used_blocks(), 0);
}

TEST(KvAdopt, RejectsTablesThatMissNeededBlocks) {
  PagedKvCache cache(config());
  const auto a = cache.add_sequence();
  append_and_write(cache, a, 8);
  std::vector<std::vector<int32_t>> tables = {cache.block_table(a, 0), cache.block_table(a, 1)};
  tables[1][1] = 0;  // the sliding group needs block 1 at length 8
  EXPECT_THROW(cache.adopt(tables, 8), Error);
  EXPECT_THROW(cache.adopt({cache.block_table(a, 0), cache.block_table(a, 1)}, 6), Error);
  const int64_t used = cache.used_blocks();
  const auto b = cache.adopt({cache.block_table(a, 0), cache.block_table(a, 1)}, 8);
  EXPECT_EQ(cache.used_blocks(), used);
  cache.release(a);
  cache.release(b);
  EXPECT_EQ(cache.used_blocks(), 0);
}

}  // namespace
}  // namespace ringlm::kv
