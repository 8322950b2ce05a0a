#include "kv/block_pool.h"

#include "core/error.h"

namespace ringlm::kv {

BlockPool::BlockPool(int64_t num_blocks) {
  RINGLM_USER_CHECK(num_blocks >= 2, "KV block pool of ", num_blocks,
                    " blocks is too small (need at least 2, block 0 being the null block)");
  RINGLM_USER_CHECK(num_blocks <= INT32_MAX, "KV block pool of ", num_blocks,
                    " blocks exceeds the 32-bit block ids");
  refcount_.assign(static_cast<size_t>(num_blocks), 0);
  for (int64_t b = 1; b < num_blocks; ++b) free_.push_back(static_cast<int32_t>(b));
}

int32_t BlockPool::allocate() {
  if (free_.empty()) return -1;
  const int32_t b = free_.front();
  free_.pop_front();
  refcount_[static_cast<size_t>(b)] = 1;
  return b;
}

void BlockPool::check_live(int32_t block, const char* op) const {
  RINGLM_CHECK(block > 0 && block < num_blocks(), op, ": block ", block, " is not a pool block");
  RINGLM_CHECK(refcount_[static_cast<size_t>(block)] > 0, op, ": block ", block, " is free");
}

void BlockPool::incref(int32_t block) {
  check_live(block, "incref");
  ++refcount_[static_cast<size_t>(block)];
}

void BlockPool::decref(int32_t block) {
  check_live(block, "decref");
  if (--refcount_[static_cast<size_t>(block)] == 0) free_.push_back(block);
}

int32_t BlockPool::refcount(int32_t block) const {
  RINGLM_CHECK(block >= 0 && block < num_blocks(), "refcount: block ", block, " out of range");
  return refcount_[static_cast<size_t>(block)];
}

}  // namespace ringlm::kv
