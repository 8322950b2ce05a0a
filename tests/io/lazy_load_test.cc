// Lazy loading: a sparse checkpoint larger than physical memory (header written, data left as a
// hole) opens through SafetensorsFile and WeightStore while the process's resident memory stays
// small, and tensors past the 4 GiB mark map to the right addresses.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "io/io_test_util.h"
#include "io/safetensors.h"

namespace ringlm::io {
namespace {

using nlohmann::json;
using testing::TempDir;

constexpr uint64_t kGiB = 1ull << 30;
constexpr uint64_t kMiB = 1ull << 20;

uint64_t resident_bytes() {
  std::ifstream statm("/proc/self/statm");
  uint64_t size = 0, resident = 0;
  statm >> size >> resident;
  return resident * static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
}

uint64_t physical_memory() {
  return static_cast<uint64_t>(::sysconf(_SC_PHYS_PAGES)) *
         static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
}

struct SparseCheckpoint {
  uint64_t data_size = 0;
  uint64_t file_size = 0;
  json header;
};

// embed BF16[1024,1024] at 0, huge F32[4,1024,1024,1024] (16 GiB), after4g F32[1024] behind it
// (offset > 4 GiB), tail U8[...] filling the data section up to `data_size`.
SparseCheckpoint write_sparse(const std::string& path, uint64_t data_size) {
  SparseCheckpoint s;
  s.data_size = data_size;
  const uint64_t embed_end = 2 * kMiB;
  const uint64_t huge_end = embed_end + 16 * kGiB;
  const uint64_t after_end = huge_end + 4096;
  s.header["embed"] = {
      {"dtype", "BF16"}, {"shape", {1024, 1024}}, {"data_offsets", {0, embed_end}}};
  s.header["huge"] = {
      {"dtype", "F32"}, {"shape", {4, 1024, 1024, 1024}}, {"data_offsets", {embed_end, huge_end}}};
  s.header["after4g"] = {
      {"dtype", "F32"}, {"shape", json::array({1024})}, {"data_offsets", {huge_end, after_end}}};
  s.header["tail"] = {{"dtype", "U8"},
                      {"shape", json::array({data_size - after_end})},
                      {"data_offsets", {after_end, data_size}}};
  std::string text = s.header.dump();
  while ((8 + text.size()) % 8 != 0) text.push_back(' ');
  testing::write_bytes(path, testing::le64(text.size()) + text);
  s.file_size = 8 + text.size() + data_size;
  std::filesystem::resize_file(path, s.file_size);  // ftruncate: the data is a hole
  return s;
}

TEST(LazyLoad, SparseCheckpointLargerThanMemoryOpensWithoutReadingData) {
  TempDir dir;
  const std::string path = dir.file("model.safetensors");
  // At least 64 GiB and at least twice the machine's memory.
  const uint64_t data_size =
      std::max<uint64_t>(64 * kGiB, (2 * physical_memory() / kGiB + 1) * kGiB);
  const SparseCheckpoint ckpt = write_sparse(path, data_size);

  struct stat st {};
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  ASSERT_EQ(static_cast<uint64_t>(st.st_size), ckpt.file_size);
  if (static_cast<uint64_t>(st.st_blocks) * 512 > 16 * kMiB)
    GTEST_SKIP() << "filesystem under " << dir.path() << " does not keep sparse files sparse";
  ASSERT_GT(ckpt.file_size, physical_memory());

  const uint64_t rss_before = resident_bytes();
  {
    SafetensorsFile file(path);
    ASSERT_EQ(file.tensors().size(), 4u);
    const TensorInfo& huge = file.tensors().at("huge");
    EXPECT_EQ(huge.dtype, DType::F32);
    EXPECT_EQ(huge.shape, (std::vector<int64_t>{4, 1024, 1024, 1024}));
    EXPECT_EQ(huge.nbytes(), 16 * kGiB);
    const TensorInfo& after = file.tensors().at("after4g");
    EXPECT_GT(after.begin, 4 * kGiB);

    const Tensor embed = file.get("embed");
    const Tensor after4g = file.get("after4g");
    const Tensor tail = file.get("tail");
    // 64-bit offsets all the way: the view sits exactly begin bytes after the first tensor.
    EXPECT_EQ(
        static_cast<uint64_t>(static_cast<char*>(after4g.data) - static_cast<char*>(embed.data)),
        after.begin);
    EXPECT_EQ(tail.numel(), static_cast<int64_t>(data_size - after.end));
    EXPECT_EQ(file.get("huge").numel(), int64_t{4} << 30);
    // Reading one element touches one page of the hole (zeros), past the 4 GiB mark.
    EXPECT_EQ(after4g.ptr<float>()[1023], 0.0f);
    EXPECT_EQ(tail.ptr<uint8_t>()[tail.numel() - 1], 0);

    const uint64_t rss_open = resident_bytes();
    EXPECT_LT(rss_open, rss_before + 64 * kMiB)
        << "opening a " << ckpt.file_size / kGiB << " GiB checkpoint made "
        << (rss_open - rss_before) / kMiB << " MiB resident";
  }
  {
    WeightStore store(dir.path());
    EXPECT_EQ(store.total_bytes(), data_size);
    EXPECT_EQ(store.total_parameters(),
              uint64_t{1024 * 1024} + (uint64_t{4} << 30) + 1024 + store.info("tail").numel());
    EXPECT_EQ(store.get("after4g").ptr<float>()[0], 0.0f);
    EXPECT_LT(resident_bytes(), rss_before + 64 * kMiB);
  }
  // Still a hole: nothing was written or read into the file's blocks.
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_LE(static_cast<uint64_t>(st.st_blocks) * 512, 16 * kMiB);
}

}  // namespace
}  // namespace ringlm::io
