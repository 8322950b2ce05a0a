// Block metadata of one pool: reference counts and the free list, kept apart from the K/V memory
// (which the cache owns, one allocation per pool). Block 0 is the null block: never handed out,
// never freed, so a zero in a block table marks "no block" and never aliases live KV.
//
// The free list is in eviction order: allocate() takes the front, a block whose last reference
// goes is appended at the back. A freed block therefore keeps its contents for as long as possible
// before it is reused, which is what lets a prefix cache (a later issue) revive it by hash.
#pragma once

#include <cstdint>
#include <deque>
#include <vector>

namespace ringlm::kv {

class BlockPool {
 public:
  explicit BlockPool(int64_t num_blocks);  // including the null block

  int64_t num_blocks() const { return static_cast<int64_t>(refcount_.size()); }
  int64_t free_blocks() const { return static_cast<int64_t>(free_.size()); }
  int64_t used_blocks() const { return num_blocks() - 1 - free_blocks(); }

  // The front of the free list with one reference; -1 when none is free.
  int32_t allocate();
  void incref(int32_t block);
  // Drops one reference; the block goes to the back of the free list at zero.
  void decref(int32_t block);
  int32_t refcount(int32_t block) const;
  // Front (next to be reused) to back.
  const std::deque<int32_t>& free_list() const { return free_; }

 private:
  void check_live(int32_t block, const char* op) const;
  std::vector<int32_t> refcount_;
  std::deque<int32_t> free_;
};

}  // namespace ringlm::kv
