#include <gtest/gtest.h>

#include <atomic>
#include <numeric>

#include "core/arena.h"
#include "core/tensor.h"
#include "core/thread_pool.h"

namespace ringlm {
namespace {

TEST(ThreadPool, CoversEveryIndexExactlyOnceWithGrainAlignedChunks) {
  ThreadPool pool(3);
  for (int64_t n : {1, 2, 7, 64, 1000, 1001}) {
    for (int64_t grain : {1, 4, 16}) {
      std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
      pool.parallel_for(n, grain, [&](int64_t b, int64_t e) {
        EXPECT_EQ(b % grain, 0);
        for (int64_t i = b; i < e; ++i) hits[static_cast<size_t>(i)]++;
      });
      for (auto& h : hits) ASSERT_EQ(h.load(), 1) << n << " " << grain;
    }
  }
}

TEST(ThreadPool, NestedCallsRunInline) {
  ThreadPool pool(2);
  std::atomic<int64_t> sum{0};
  pool.parallel_for(4, 1, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      pool.parallel_for(10, 1, [&](int64_t b2, int64_t e2) { sum += e2 - b2; });
    }
  });
  EXPECT_EQ(sum.load(), 40);
}

TEST(Arena, GivesAlignedStableAddressesAfterReset) {
  Arena arena(1 << 16);
  Tensor a = arena.alloc(DType::F32, {3, 5});
  Tensor b = arena.alloc(DType::BF16, {7});
  EXPECT_EQ(reinterpret_cast<uintptr_t>(a.data) % Arena::kAlignment, 0u);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(b.data) % Arena::kAlignment, 0u);
  EXPECT_GE(static_cast<char*>(b.data) - static_cast<char*>(a.data), 60);
  arena.reset();
  Tensor a2 = arena.alloc(DType::F32, {3, 5});
  EXPECT_EQ(a2.data, a.data);
  EXPECT_THROW(arena.alloc(DType::F32, {1 << 20}), Error);
}

TEST(Tensor, ViewsAndShapeChecks) {
  std::vector<float> buf(24);
  std::iota(buf.begin(), buf.end(), 0.0f);
  Tensor t(buf.data(), DType::F32, {4, 6});
  EXPECT_TRUE(t.is_contiguous());
  EXPECT_EQ(t.numel(), 24);
  Tensor rows = t.slice_rows(1, 3);
  EXPECT_EQ(rows.size(0), 2);
  EXPECT_EQ(*rows.row<float>(1), 12.0f);
  Tensor r = t.reshape({2, 3, 4});
  EXPECT_EQ(r.size(-1), 4);
  EXPECT_THROW(t.reshape({5, 5}), Error);
  EXPECT_THROW(check_shape(t, {4, 5}, "x"), Error);
  EXPECT_NO_THROW(check_shape(t, {-1, 6}, "x"));
  try {
    check_shape(t, {4, 5}, "weights");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("weights: shape F32[4, 6] does not match [4, 5]"),
              std::string::npos)
        << e.what();
  }
}

TEST(Errors, CheckNamesExpressionFileAndLine) {
  try {
    RINGLM_CHECK(1 + 1 == 3, "math is ", "broken");
    FAIL();
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("math is broken"), std::string::npos);
    EXPECT_NE(what.find("1 + 1 == 3"), std::string::npos);
    EXPECT_NE(what.find("runtime_test.cc"), std::string::npos);
  }
}

}  // namespace
}  // namespace ringlm
