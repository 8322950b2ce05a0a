// WeightStore: single files, sharded checkpoints with and without model.safetensors.index.json,
// and the errors for broken checkpoints (each naming the file / shard / tensor at fault).
#include <gtest/gtest.h>

#include <cstring>
#include <nlohmann/json.hpp>

#include "io/io_test_util.h"
#include "io/safetensors.h"

namespace ringlm::io {
namespace {

using nlohmann::json;
using testing::error_of;
using testing::expect_mentions;
using testing::TempDir;

constexpr const char* kShard1 = "model-00001-of-00002.safetensors";
constexpr const char* kShard2 = "model-00002-of-00002.safetensors";

// Two shards: a (F32[2,3]) and b (BF16[4]) in shard 1, c (U8[5]) in shard 2.
struct ShardedCheckpoint {
  std::vector<float> a = {1, 2, 3, 4, 5, 6};
  std::vector<uint16_t> b = {0x3f80, 0x4000, 0xc000, 0x0001};
  std::vector<uint8_t> c = {9, 8, 7, 6, 5};

  void write_shards(const TempDir& dir) const {
    write_safetensors(dir.file(kShard1),
                      {{"a", DType::F32, {2, 3}, a.data()}, {"b", DType::BF16, {4}, b.data()}});
    write_safetensors(dir.file(kShard2), {{"c", DType::U8, {5}, c.data()}});
  }
  static json index() {
    return {{"metadata", {{"total_size", 37}}},
            {"weight_map", {{"a", kShard1}, {"b", kShard1}, {"c", kShard2}}}};
  }
};

void write_index(const TempDir& dir, const json& index) {
  testing::write_bytes(dir.file("model.safetensors.index.json"), index.dump(2));
}

TEST(WeightStore, ShardedCheckpointWithIndex) {
  TempDir dir;
  ShardedCheckpoint ckpt;
  ckpt.write_shards(dir);
  write_index(dir, ShardedCheckpoint::index());

  WeightStore store(dir.path());
  EXPECT_EQ(store.dir(), dir.path());
  EXPECT_EQ(store.names(), (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_EQ(store.files().size(), 2u);
  EXPECT_TRUE(store.has("c"));
  EXPECT_FALSE(store.has("d"));
  EXPECT_EQ(store.info("a").file, dir.file(kShard1));
  EXPECT_EQ(store.info("c").file, dir.file(kShard2));
  EXPECT_EQ(store.info("b").dtype, DType::BF16);

  const Tensor a = store.get("a");
  ASSERT_EQ(a.ndim, 2);
  EXPECT_EQ(a.shape[0], 2);
  EXPECT_EQ(a.shape[1], 3);
  EXPECT_EQ(std::memcmp(a.data, ckpt.a.data(), 24), 0);
  EXPECT_EQ(std::memcmp(store.get("b").data, ckpt.b.data(), 8), 0);
  EXPECT_EQ(std::memcmp(store.get("c").data, ckpt.c.data(), 5), 0);
  EXPECT_EQ(store.total_bytes(), 24u + 8u + 5u);
  EXPECT_EQ(store.total_parameters(), 6u + 4u + 5u);
}

TEST(WeightStore, WithoutIndexLoadsEverySafetensorsFile) {
  TempDir dir;
  ShardedCheckpoint ckpt;
  ckpt.write_shards(dir);
  testing::write_bytes(dir.file("README.md"), "not weights");
  WeightStore store(dir.path());
  ASSERT_EQ(store.files().size(), 2u);
  EXPECT_EQ(store.files()[0]->path(), dir.file(kShard1));  // sorted by name
  EXPECT_EQ(store.files()[1]->path(), dir.file(kShard2));
  EXPECT_EQ(store.names(), (std::vector<std::string>{"a", "b", "c"}));
}

TEST(WeightStore, SingleFile) {
  TempDir dir;
  const std::vector<float> w = {0.5f, -0.25f};
  write_safetensors(dir.file("model.safetensors"), {{"w", DType::F32, {2}, w.data()}});
  WeightStore store(dir.path());
  EXPECT_EQ(store.names(), std::vector<std::string>{"w"});
  EXPECT_EQ(store.get("w").ptr<float>()[1], -0.25f);
}

TEST(WeightStoreBadCheckpoint, MissingTensor) {
  TempDir dir;
  ShardedCheckpoint().write_shards(dir);
  WeightStore store(dir.path());
  const std::string expected = "missing tensor lm_head.weight in " + dir.path();
  expect_mentions(error_of([&] { store.get("lm_head.weight"); }), {expected});
  expect_mentions(error_of([&] { store.info("lm_head.weight"); }), {expected});
}

TEST(WeightStoreBadCheckpoint, MissingIndexEntry) {
  TempDir dir;
  ShardedCheckpoint().write_shards(dir);
  json index = ShardedCheckpoint::index();
  index["weight_map"]["model.norm.weight"] = kShard2;
  write_index(dir, index);
  expect_mentions(error_of([&] { WeightStore store(dir.path()); }),
                  {"model.safetensors.index.json", "'model.norm.weight'",
                   std::string("shard '") + kShard2 + "'", "does not contain it"});
}

TEST(WeightStoreBadCheckpoint, MissingShardFile) {
  TempDir dir;
  ShardedCheckpoint().write_shards(dir);
  std::filesystem::remove(dir.file(kShard2));
  write_index(dir, ShardedCheckpoint::index());
  expect_mentions(
      error_of([&] { WeightStore store(dir.path()); }),
      {"model.safetensors.index.json", std::string("'") + kShard2 + "'", "does not exist"});
}

TEST(WeightStoreBadCheckpoint, TruncatedShard) {
  TempDir dir;
  ShardedCheckpoint().write_shards(dir);
  write_index(dir, ShardedCheckpoint::index());
  const std::string shard = dir.file(kShard2);
  std::filesystem::resize_file(shard, std::filesystem::file_size(shard) - 2);
  expect_mentions(error_of([&] { WeightStore store(dir.path()); }), {shard, "'c'", "truncated"});
}

TEST(WeightStoreBadCheckpoint, CorruptShardHeader) {
  TempDir dir;
  ShardedCheckpoint().write_shards(dir);
  write_index(dir, ShardedCheckpoint::index());
  const std::string shard = dir.file(kShard1);
  std::string bytes = testing::read_bytes(shard);
  bytes[9] = '#';  // inside the JSON header
  testing::write_bytes(shard, bytes);
  expect_mentions(error_of([&] { WeightStore store(dir.path()); }), {shard, "not valid JSON"});
}

TEST(WeightStoreBadCheckpoint, DuplicateTensorAcrossShards) {
  TempDir dir;
  const float v = 1.0f;
  write_safetensors(dir.file("x.safetensors"), {{"w", DType::F32, {1}, &v}});
  write_safetensors(dir.file("y.safetensors"), {{"w", DType::F32, {1}, &v}});
  expect_mentions(error_of([&] { WeightStore store(dir.path()); }),
                  {"'w'", "x.safetensors", "y.safetensors"});
}

TEST(WeightStoreBadCheckpoint, NoWeights) {
  TempDir dir;
  testing::write_bytes(dir.file("config.json"), "{}");
  expect_mentions(error_of([&] { WeightStore store(dir.path()); }),
                  {dir.path(), "no .safetensors files"});
  expect_mentions(error_of([&] { WeightStore store(dir.file("nonexistent")); }),
                  {dir.file("nonexistent"), "does not exist"});
}

TEST(WeightStoreBadCheckpoint, MalformedIndex) {
  TempDir dir;
  ShardedCheckpoint().write_shards(dir);
  testing::write_bytes(dir.file("model.safetensors.index.json"), "{\"weight_map\": {");
  expect_mentions(error_of([&] { WeightStore store(dir.path()); }),
                  {"model.safetensors.index.json", "not valid JSON"});
  write_index(dir, {{"metadata", json::object()}});
  expect_mentions(error_of([&] { WeightStore store(dir.path()); }),
                  {"model.safetensors.index.json", "no 'weight_map'"});
  write_index(dir, {{"weight_map", {{"a", 3}}}});
  expect_mentions(error_of([&] { WeightStore store(dir.path()); }),
                  {"model.safetensors.index.json", "'a'", "must be a file name"});
  write_index(dir, {{"weight_map", {{"a", "../outside.safetensors"}}}});
  expect_mentions(error_of([&] { WeightStore store(dir.path()); }),
                  {"model.safetensors.index.json", "'a'", "../outside.safetensors"});
}

}  // namespace
}  // namespace ringlm::io
