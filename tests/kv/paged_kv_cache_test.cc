// The KV block layer's mechanism: pools (null block, refcounts, eviction-order free list), layer
// groups, promises and accounting, sliding release, fork / copy-on-write, rollback, extract and
// save / load, and the StepPlan's per-group tables and slots.
#include "kv/paged_kv_cache.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <random>
#include <set>

#include "io/safetensors.h"
#include "kv/step_plan.h"
#include "ops/ops.h"

namespace ringlm::kv {
namespace {

LayerKvSpec spec(int window = 0, int sinks = 0, int donor = -1) {
  LayerKvSpec s;
  s.kv_heads = 2;
  s.head_dim = 4;
  s.window = window;
  s.sink_tokens = sinks;
  s.donor_layer = donor;
  return s;
}

KvCacheConfig config(std::vector<LayerKvSpec> layers, std::vector<int64_t> blocks,
                     int block_tokens = 4) {
  KvCacheConfig c;
  c.layers = std::move(layers);
  c.block_tokens = block_tokens;
  c.group_blocks = std::move(blocks);
  c.max_step_tokens = 8;
  return c;
}

// Writes a recognizable value for every (layer, position, K/V, element) of the sequence's new
// positions [from, to), through kv_write and the cache's slots, as a model step would.
float value_of(int layer, int64_t pos, int kv, int64_t e, int salt) {
  return static_cast<float>(layer * 100000 + pos * 100 + kv * 50 + e) +
         0.25f * static_cast<float>(salt);
}
void write_tokens(PagedKvCache& cache, SequenceId seq, int64_t from, int64_t to, int salt = 0) {
  for (int l = 0; l < cache.layout().num_layers(); ++l) {
    const int g = cache.layout().group_of_layer[static_cast<size_t>(l)];
    if (cache.group(g).kind == GroupKind::Shared) continue;
    ops::KvLayerView view = cache.layer_view(l);
    const int64_t row = view.kv_heads() * view.head_dim();
    std::vector<float> k(static_cast<size_t>((to - from) * row)), v(k.size());
    std::vector<int32_t> slots;
    for (int64_t p = from; p < to; ++p) {
      slots.push_back(cache.slot(seq, g, p));
      for (int64_t e = 0; e < row; ++e) {
        k[static_cast<size_t>((p - from) * row + e)] = value_of(l, p, 0, e, salt);
        v[static_cast<size_t>((p - from) * row + e)] = value_of(l, p, 1, e, salt);
      }
    }
    const int64_t n = to - from;
    ops::kv_write(Tensor(k.data(), DType::F32, {n, view.kv_heads(), view.head_dim()}),
                  Tensor(v.data(), DType::F32, {n, view.kv_heads(), view.head_dim()}),
                  Tensor(slots.data(), DType::I32, {n}), view);
  }
}
void append_and_write(PagedKvCache& cache, SequenceId seq, int64_t n, int salt = 0) {
  const int64_t from = cache.length(seq);
  ASSERT_TRUE(cache.append(seq, n));
  write_tokens(cache, seq, from, from + n, salt);
}
// Checks the extracted K/V of every held position against value_of.
void expect_values(const PagedKvCache& cache, SequenceId seq, std::vector<int> salt_of_pos = {}) {
  const ExtractedKv kv = cache.extract(seq);
  for (size_t l = 0; l < kv.layers.size(); ++l) {
    const auto& layer = kv.layers[l];
    if (layer.group < 0) continue;
    const auto& pos = kv.positions[static_cast<size_t>(layer.group)];
    const int64_t row = layer.kv_heads * layer.head_dim;
    const float* k = reinterpret_cast<const float*>(layer.k.data());
    const float* v = reinterpret_cast<const float*>(layer.v.data());
    for (size_t i = 0; i < pos.size(); ++i) {
      const int salt = salt_of_pos.empty() ? 0 : salt_of_pos[static_cast<size_t>(pos[i])];
      for (int64_t e = 0; e < row; ++e) {
        ASSERT_EQ(k[static_cast<int64_t>(i) * row + e],
                  value_of(static_cast<int>(l), pos[i], 0, e, salt))
            << "layer " << l << " position " << pos[i];
        ASSERT_EQ(v[static_cast<int64_t>(i) * row + e],
                  value_of(static_cast<int>(l), pos[i], 1, e, salt));
      }
    }
  }
}
int64_t held_blocks(const PagedKvCache& cache, SequenceId seq, int g) {
  int64_t n = 0;
  for (int32_t b : cache.block_table(seq, g)) n += b != 0;
  return n;
}

TEST(KvLayout, GroupsBySameKindWindowSinksAndFormat) {
  // Gemma 3 style: sliding, sliding, global, sliding, sliding, global; then two shared layers.
  std::vector<LayerKvSpec> layers = {spec(16), spec(16), spec(),         spec(16),
                                     spec(16), spec(),   spec(16, 0, 4), spec(0, 0, 5)};
  layers[5].format = KvFormat::dense(DType::BF16);  // a different format is a different group
  const KvLayout layout = make_layout(layers);
  ASSERT_EQ(layout.groups.size(), 5u);
  EXPECT_EQ(layout.groups[0].kind, GroupKind::Sliding);
  EXPECT_EQ(layout.groups[0].layers, (std::vector<int>{0, 1, 3, 4}));
  EXPECT_EQ(layout.groups[1].kind, GroupKind::Full);
  EXPECT_EQ(layout.groups[1].layers, (std::vector<int>{2}));
  EXPECT_EQ(layout.groups[2].layers, (std::vector<int>{5}));
  EXPECT_EQ(layout.groups[3].kind, GroupKind::Shared);
  EXPECT_EQ(layout.groups[3].donor_group, 0);
  EXPECT_EQ(layout.groups[3].window, 16);
  EXPECT_EQ(layout.slot_of_layer[6], 3);  // layer 4 is the donor group's 4th layer
  EXPECT_EQ(layout.groups[4].donor_group, 2);
  EXPECT_EQ(layout.group_of_layer, (std::vector<int>{0, 0, 1, 0, 0, 1 + 1, 3, 4}));
}

TEST(KvLayout, RejectsBadSpecsNamingTheLayer) {
  EXPECT_THROW(make_layout({spec(), spec(0, 0, 1)}), Error);  // donor not earlier
  EXPECT_THROW(make_layout({spec(0, 4)}), Error);             // sinks without a window
  LayerKvSpec q = spec();
  q.format = KvFormat::parse("int8-g64");
  q.head_dim = 32;  // groups of 64 along head_dim need a multiple of 64
  try {
    make_layout({spec(), q});
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("layer 1: KV format int8-g64: head_dim 32 is not a "
                                         "multiple of the group size 64"),
              std::string::npos)
        << e.what();
  }
  q.format.dtype = DType::F32;  // affine scales are bf16
  q.head_dim = 64;
  EXPECT_THROW(make_layout({q}), Error);
  EXPECT_THROW(KvFormat::parse("int3"), Error);
  EXPECT_EQ(KvFormat::parse("bf16"), KvFormat::dense(DType::BF16));
}

TEST(KvLayout, MaxKvSizeTurnsFullLayersIntoSlidingWithSinks) {
  const auto out = apply_max_kv_size({spec(), spec(16), spec(0, 0, 0)}, 20, 4);
  EXPECT_EQ(out[0].window, 16);
  EXPECT_EQ(out[0].sink_tokens, 4);
  EXPECT_EQ(out[1].window, 16);  // already sliding: unchanged
  EXPECT_EQ(out[1].sink_tokens, 0);
  EXPECT_EQ(out[2].window, 0);  // shared: follows its donor
  EXPECT_THROW(apply_max_kv_size({spec()}, 4, 4), Error);
}

TEST(BlockPool, NullBlockRefcountsAndEvictionOrder) {
  BlockPool pool(5);
  EXPECT_EQ(pool.free_blocks(), 4);
  const int32_t a = pool.allocate(), b = pool.allocate(), c = pool.allocate();
  EXPECT_EQ(a, 1);
  EXPECT_EQ(b, 2);
  EXPECT_EQ(c, 3);
  pool.incref(b);
  pool.decref(b);  // still held once
  EXPECT_EQ(pool.refcount(b), 1);
  pool.decref(a);  // a to the back, behind 4
  pool.decref(b);
  EXPECT_EQ(std::vector<int32_t>(pool.free_list().begin(), pool.free_list().end()),
            (std::vector<int32_t>{4, 1, 2}));
  EXPECT_EQ(pool.allocate(), 4);  // the longest-free block is reused first
  EXPECT_EQ(pool.allocate(), 1);
  EXPECT_THROW(pool.decref(a + 1), Error);  // block 2 is free
  EXPECT_THROW(pool.incref(0), Error);      // the null block is never live
  EXPECT_EQ(pool.used_blocks(), 3);
}

TEST(PagedKvCache, AppendsReleasesAndNeverHandsOutTheNullBlock) {
  PagedKvCache cache(config({spec(), spec()}, {9}));
  EXPECT_EQ(cache.free_blocks(0), 8);
  const auto a = cache.add_sequence();
  const auto b = cache.add_sequence();
  ASSERT_TRUE(cache.append(a, 9));  // 3 blocks
  ASSERT_TRUE(cache.append(b, 4));  // 1 block
  EXPECT_EQ(cache.used_blocks(), 4);
  EXPECT_FALSE(cache.append(b, 4 * 5));  // would need 5 more, only 4 free: nothing changes
  EXPECT_EQ(cache.length(b), 4);
  EXPECT_EQ(cache.block_table(b, 0).size(), 1u);
  std::set<int32_t> seen;
  for (auto s : {a, b}) {
    for (int32_t block : cache.block_table(s, 0)) {
      EXPECT_NE(block, 0);
      EXPECT_TRUE(seen.insert(block).second);
    }
  }
  EXPECT_EQ(cache.slot(a, 0, 5), cache.block_table(a, 0)[1] * 4 + 1);
  EXPECT_THROW(cache.slot(b, 0, 4), Error);
  cache.release(a);
  cache.release(b);
  EXPECT_EQ(cache.used_blocks(), 0);
}

TEST(PagedKvCache, LayerViewsOfAGroupDoNotOverlap) {
  PagedKvCache cache(config({spec(), spec()}, {9}));
  auto l0 = cache.layer_view(0), l1 = cache.layer_view(1);
  EXPECT_EQ(l0.k.nbytes(), l0.v.nbytes());
  EXPECT_EQ(static_cast<char*>(l0.v.data), static_cast<char*>(l0.k.data) + l0.k.nbytes());
  EXPECT_EQ(static_cast<char*>(l1.k.data), static_cast<char*>(l0.v.data) + l0.v.nbytes());
  EXPECT_EQ(l1.k.shape[0], 9);
  EXPECT_EQ(cache.bytes_per_block(0), 2u * 2 * 4 * 2 * 4 * sizeof(float));
}

// Promises: reserve() admits only what the pools can guarantee next to the other promises, and
// tokens_available() says how much more a sequence can get.
TEST(PagedKvCache, ReservationsAndTokensAvailable) {
  PagedKvCache cache(config({spec(), spec(8)}, {11, 11}));  // full + sliding(8)
  // Sliding cap: ceil((8 - 1 + 0 + 8) / 4) + 1 = 5 blocks.
  EXPECT_EQ(cache.cap_blocks(1), 5);
  EXPECT_EQ(cache.peak_blocks(1, 1000), 5);
  EXPECT_EQ(cache.peak_blocks(0, 9), 3);
  const auto a = cache.add_sequence();
  EXPECT_EQ(cache.tokens_available(a), 40);  // the full group's 10 blocks
  EXPECT_EQ(cache.tokens_available(a, 0), 40);
  EXPECT_EQ(cache.tokens_available(a, 1), kUnlimitedTokens);  // 10 free >= the cap of 5
  ASSERT_TRUE(cache.reserve(a, 24));  // 6 full blocks, 5 sliding blocks promised
  EXPECT_EQ(cache.tokens_available(a), 16);
  const auto b = cache.add_sequence();
  EXPECT_EQ(cache.tokens_available(b), 16);
  EXPECT_FALSE(cache.reserve(b, 17));  // 5 full blocks: only 4 unpromised
  EXPECT_TRUE(cache.reserve(b, 16));
  EXPECT_EQ(cache.tokens_available(b), 0);
  // a's promise holds although nothing is left unpromised.
  for (int i = 0; i < 24; ++i) ASSERT_TRUE(cache.append(a, 1));
  EXPECT_FALSE(cache.append(a, 1));  // beyond its promise, and b's promise takes the rest
  for (int i = 0; i < 16; ++i) ASSERT_TRUE(cache.append(b, 1));
  cache.release(a);
  cache.release(b);
  EXPECT_EQ(cache.used_blocks(), 0);
  // With only sliding groups, a sequence at its cap can take any number of tokens.
  PagedKvCache sliding(config({spec(8), spec(8)}, {6}));
  const auto c = sliding.add_sequence();
  EXPECT_EQ(sliding.tokens_available(c), kUnlimitedTokens);
  ASSERT_TRUE(sliding.reserve(c, 1000000));
  for (int i = 0; i < 300; ++i) ASSERT_TRUE(sliding.append(c, 1 + i % 8));
}

// A sliding group's blocks per sequence stay within the bound at 50x the window, released blocks
// become null entries in a table that keeps logical indexing, the window's K/V stay intact, and
// the pool is empty once the sequences end.
TEST(PagedKvCache, SlidingGroupBlocksStayBoundedAt50xTheWindow) {
  for (int lookahead : {0, 3}) {
    for (int sinks : {0, 4}) {
      for (int bt : {4, 16}) {
        const int W = 16;
        KvCacheConfig c = config({spec(W, sinks), spec(W, sinks)}, {}, bt);
        c.lookahead = lookahead;
        c.max_step_tokens = 1;
        c.memory_bytes = size_t{1} << 20;
        c.max_sequences = 3;
        PagedKvCache cache(c);
        SCOPED_TRACE(::testing::Message()
                     << "lookahead " << lookahead << " sinks " << sinks << " bt " << bt);
        // The bound of the issue, plus the sink blocks.
        const int64_t bound = (W + lookahead + bt - 1) / bt + 1 + (sinks + bt - 1) / bt;
        EXPECT_EQ(cache.cap_blocks(0), bound);
        std::vector<SequenceId> seqs = {cache.add_sequence(), cache.add_sequence(),
                                        cache.add_sequence()};
        for (auto s : seqs) ASSERT_TRUE(cache.reserve(s, 50 * W));
        for (int step = 0; step < 50 * W; ++step) {
          for (size_t i = 0; i < seqs.size(); ++i) {
            if (step < static_cast<int>(i) * 7) continue;  // staggered joins
            append_and_write(cache, seqs[i], 1);
            ASSERT_LE(held_blocks(cache, seqs[i], 0), bound) << "step " << step;
          }
        }
        for (auto s : seqs) {
          const auto& table = cache.block_table(s, 0);
          EXPECT_EQ(static_cast<int64_t>(table.size()), (cache.length(s) + bt - 1) / bt);
          EXPECT_EQ(table[table.size() / 2], 0);  // long released
          expect_values(cache, s);
          // What is held covers the sinks and the window of the next query.
          const ExtractedKv kv = cache.extract(s);
          std::set<int32_t> held(kv.positions[0].begin(), kv.positions[0].end());
          for (int64_t p = cache.length(s) - W; p < cache.length(s); ++p)
            EXPECT_TRUE(held.count(static_cast<int32_t>(p)));
          for (int p = 0; p < sinks; ++p) EXPECT_TRUE(held.count(p));
        }
        for (auto s : seqs) cache.release(s);
        EXPECT_EQ(cache.used_blocks(), 0);
      }
    }
  }
}

// Fork shares every block; the first write into the shared partial block copies it, and neither
// sequence sees the other's later tokens.
TEST(PagedKvCache, ForkSharesBlocksAndCopiesThePartialBlockOnWrite) {
  PagedKvCache cache(config({spec(), spec(), spec(6)}, {20, 20}));
  const auto a = cache.add_sequence();
  append_and_write(cache, a, 10);  // blocks 0, 1 complete, block 2 partial (2 of 4)
  const int64_t used_full = cache.used_blocks(0);
  const auto b = cache.fork(a);
  EXPECT_EQ(cache.used_blocks(0), used_full);  // nothing copied yet
  EXPECT_EQ(cache.block_table(b, 0), cache.block_table(a, 0));
  for (int32_t blk : cache.block_table(a, 0)) EXPECT_EQ(cache.pool(0).refcount(blk), 2);
  std::vector<int> salt_a(40, 0), salt_b(40, 0);
  append_and_write(cache, b, 3, 1);  // b writes positions 10..12 with another salt
  for (int p = 10; p < 13; ++p) salt_b[static_cast<size_t>(p)] = 1;
  // The shared partial block was copied and one new block taken for position 12.
  EXPECT_EQ(cache.used_blocks(0), used_full + 2);
  EXPECT_EQ(cache.block_table(b, 0)[0], cache.block_table(a, 0)[0]);
  EXPECT_NE(cache.block_table(b, 0)[2], cache.block_table(a, 0)[2]);
  EXPECT_EQ(cache.pool(0).refcount(cache.block_table(a, 0)[2]), 1);
  append_and_write(cache, a, 5, 2);  // a writes 10..14: its own block now, no copy
  for (int p = 10; p < 15; ++p) salt_a[static_cast<size_t>(p)] = 2;
  expect_values(cache, a, salt_a);
  expect_values(cache, b, salt_b);
  cache.release(a);
  expect_values(cache, b, salt_b);
  cache.release(b);
  EXPECT_EQ(cache.used_blocks(), 0);
}

// Rollback drops the last k tokens; regenerating them overwrites; a sliding group keeps the
// lookahead so k <= lookahead works, and k beyond it is an error that changes nothing.
TEST(PagedKvCache, RollbackWithinTheLookahead) {
  KvCacheConfig c = config({spec(), spec(8)}, {40, 12});
  c.lookahead = 4;
  c.max_step_tokens = 5;
  PagedKvCache cache(c);
  const auto a = cache.add_sequence();
  for (int i = 0; i < 40; ++i) append_and_write(cache, a, 1);
  append_and_write(cache, a, 5, 1);  // speculative tokens 40..44
  cache.rollback(a, 4);              // keep 40, drop 41..44
  EXPECT_EQ(cache.length(a), 41);
  EXPECT_EQ(cache.block_table(a, 0).size(), 11u);
  std::vector<int> salt(60, 0);
  salt[40] = 1;
  expect_values(cache, a, salt);
  append_and_write(cache, a, 3, 2);  // regenerated 41..43
  for (int p = 41; p < 44; ++p) salt[static_cast<size_t>(p)] = 2;
  expect_values(cache, a, salt);
  // Appending at length 41, the sliding group released the blocks below (41 - 4 - 8 + 1) / 4 = 7,
  // i.e. positions < 28.
  const auto before = cache.block_table(a, 1);
  EXPECT_THROW(cache.rollback(a, 12), Error);  // the query at 32 would need 25..31
  EXPECT_EQ(cache.length(a), 44);
  EXPECT_EQ(cache.block_table(a, 1), before);
  cache.rollback(a, 4);  // within the lookahead: fine
  EXPECT_EQ(cache.length(a), 40);
  // A rollback over several appends: four single tokens, then all four go.
  for (int i = 0; i < 4; ++i) append_and_write(cache, a, 1, 3);
  cache.rollback(a, 4);
  append_and_write(cache, a, 1);
  salt[40] = 0;
  expect_values(cache, a, salt);
  cache.release(a);
  EXPECT_EQ(cache.used_blocks(), 0);
}

TEST(PagedKvCache, ExtractSaveAndLoadRoundTrip) {
  KvCacheConfig c = config({spec(), spec(6, 2), spec(), spec(0, 0, 1)}, {30, 30, 30, 0});
  c.layers[2].format = KvFormat::dense(DType::BF16);
  PagedKvCache cache(c);
  ASSERT_EQ(cache.num_groups(), 4);  // full f32, sliding, full bf16, shared
  const auto a = cache.add_sequence();
  for (int i = 0; i < 7; ++i) append_and_write(cache, a, 5);
  const std::string path = ::testing::TempDir() + "/kv_roundtrip.safetensors";
  cache.save(a, path);
  const auto b = cache.load(path);
  EXPECT_EQ(cache.length(b), 35);
  const ExtractedKv x = cache.extract(a), y = cache.extract(b);
  EXPECT_EQ(x.positions, y.positions);
  for (size_t l = 0; l < x.layers.size(); ++l) {
    EXPECT_EQ(x.layers[l].k, y.layers[l].k) << "layer " << l;
    EXPECT_EQ(x.layers[l].v, y.layers[l].v) << "layer " << l;
  }
  // The sliding group holds only its sinks and its window (+ block rounding).
  EXPECT_LT(x.positions[1].size(), 20u);
  EXPECT_EQ(x.positions[1].front(), 0);
  EXPECT_EQ(x.layers[3].group, -1);  // the shared layer has no K/V of its own
  // The loaded sequence continues like the original.
  append_and_write(cache, a, 3);
  append_and_write(cache, b, 3);
  const ExtractedKv x2 = cache.extract(a), y2 = cache.extract(b);
  for (size_t l = 0; l < x2.layers.size(); ++l) EXPECT_EQ(x2.layers[l].k, y2.layers[l].k);
  cache.release(a);
  cache.release(b);
  EXPECT_EQ(cache.used_blocks(), 0);

  // A cache with another layout refuses the file, naming the field.
  KvCacheConfig oc = config({spec(), spec(8, 2), spec(), spec(0, 0, 1)}, {30, 30, 30, 0});
  oc.layers[2].format = KvFormat::dense(DType::BF16);
  PagedKvCache other(oc);
  try {
    other.load(path);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("groups[1].window"), std::string::npos) << e.what();
  }
  // A file that is not a KV file.
  const std::string bogus = ::testing::TempDir() + "/not_kv.safetensors";
  const float one = 1.0f;
  io::write_safetensors(bogus, {{"x", DType::F32, {1}, &one}});
  EXPECT_THROW(cache.load(bogus), Error);
  std::remove(path.c_str());
  std::remove(bogus.c_str());
}

TEST(StepPlan, PerGroupTablesSlotsAndLogitRows) {
  PagedKvCache cache(config({spec(), spec(4), spec(0, 0, 1)}, {20, 20, 0}));
  const auto a = cache.add_sequence();
  const auto b = cache.add_sequence();
  ASSERT_TRUE(cache.append(a, 5));
  ASSERT_TRUE(cache.append(a, 1));
  ASSERT_TRUE(cache.append(b, 3));
  EXPECT_THROW(StepPlan({{a, {11}, 4, false, true}}, cache), Error);  // not what was appended
  // Row a: decode token at position 5; row b: a 3-token prefill wanting all logits.
  StepPlan plan({{a, {11}, 5, false, true}, {b, {1, 2, 3}, 0, true, true}}, cache);
  EXPECT_EQ(plan.num_tokens(), 4);
  EXPECT_EQ(plan.num_rows(), 2);
  const auto* pos = plan.positions().ptr<int32_t>();
  EXPECT_EQ(pos[0], 5);
  EXPECT_EQ(pos[3], 2);
  EXPECT_EQ(plan.logit_tokens(), (std::vector<int32_t>{0, 1, 2, 3}));
  EXPECT_EQ(plan.logits_count(1), 3);
  for (int g : {0, 1}) {
    EXPECT_EQ(plan.slots(g).ptr<int32_t>()[0], cache.slot(a, g, 5));
    EXPECT_EQ(plan.slots(g).ptr<int32_t>()[3], cache.slot(b, g, 2));
    const auto& rows = plan.attention_rows(g);
    EXPECT_EQ(rows.context_len[0], 6);
    EXPECT_EQ(rows.context_len[1], 3);
    EXPECT_EQ(rows.query_start[2], 4);
    EXPECT_EQ(rows.block_table[rows.max_blocks], cache.block_table(b, g)[0]);
    EXPECT_EQ(rows.block_table[1], cache.block_table(a, g)[1]);
  }
  const auto l1 = plan.layer(1), l2 = plan.layer(2);
  EXPECT_EQ(l1.window, 4);
  EXPECT_TRUE(l1.writes_kv);
  // The shared layer reads the donor group's tables and storage and writes nothing.
  EXPECT_FALSE(l2.writes_kv);
  EXPECT_EQ(l2.rows, l1.rows);
  EXPECT_EQ(l2.window, 4);
  EXPECT_EQ(cache.layer_view(2).k.data, cache.layer_view(1).k.data);
  EXPECT_EQ(cache.num_blocks(2), 0);
}

}  // namespace
}  // namespace ringlm::kv
