// Paged K/V storage of every attention layer of a model (DESIGN.md §3). Layers form groups
// (kv/layout.h); each storage group has its own block pool — fixed-size blocks of `block_tokens`
// tokens for all its layers, one allocation per pool, the pools' sizes split from one memory
// budget — and one block table per sequence. Tables use logical indexing (entry b holds the
// tokens [b·block_tokens, (b+1)·block_tokens)); entry 0 is the null block: never written,
// never read, what released entries of sliding groups become.
//
// A sequence's life: add_sequence → reserve (admission: promise the blocks its tokens will need)
// → per step: append(seq, n) (release what fell out of the window, copy-on-write a shared partial
// block, allocate new blocks), build the StepPlan, run the model → rollback / fork / extract /
// save as needed → release. Rows join and leave without touching anyone else's KV.
#pragma once

#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/device_memory.h"
#include "core/tensor.h"
#include "kv/block_pool.h"
#include "kv/layout.h"
#include "ops/ops.h"

namespace ringlm::kv {

struct KvCacheConfig {
  std::vector<LayerKvSpec> layers;  // one per model layer
  int block_tokens = 16;
  size_t memory_bytes = size_t{256} << 20;  // budget for all pools together
  // Design point of the budget split: sliding pools get room for this many sequences at their
  // per-sequence cap; full pools share the rest (see docs/kv-cache.md).
  int max_sequences = 16;
  // Largest number of tokens one sequence appends in one step (a prefill chunk): a sliding
  // sequence holds its window plus this during the step.
  int64_t max_step_tokens = 512;
  // Tokens a sliding group keeps beyond its window so that rollback(k <= lookahead) works
  // (speculative decoding).
  int lookahead = 0;
  // Explicit block counts per group (including the null block; 0 for shared groups), instead of
  // the budget split. Tests use it to make small pools.
  std::vector<int64_t> group_blocks;
  // Oracle runs only: sliding groups keep every block (attention still applies the window).
  bool keep_all_blocks = false;
  Device device = Device::CPU;  // where the pools live (the model's device)
};

using SequenceId = int64_t;
constexpr int64_t kUnlimitedTokens = std::numeric_limits<int64_t>::max();

// One sequence's K/V gathered into contiguous memory (tests, persistence).
struct ExtractedKv {
  int64_t length = 0;                           // tokens in the sequence
  std::vector<std::vector<int32_t>> positions;  // per group: held positions, ascending
  struct Layer {
    int group = -1;  // storage layers only (shared layers are left empty)
    KvFormat format;
    DType dtype = DType::F32;  // of k and v: the dense dtype, or U32 codes for affine formats
    int64_t kv_heads = 0, head_dim = 0;
    // Dense: [positions of its group, kv_heads, head_dim] in `dtype`; affine: the codes,
    // U32[positions, kv_heads, head_dim·bits/32].
    std::vector<std::byte> k, v;
    // Affine only: BF16[positions, kv_heads, head_dim/group_size].
    std::vector<std::byte> k_scales, k_biases, v_scales, v_biases;
    Tensor k_tensor() const;
    Tensor v_tensor() const;
    // K or V of the held positions as f32 (dequantized for affine formats): F32[positions,
    // kv_heads, head_dim].
    std::vector<float> dequantized(bool value) const;
  };
  std::vector<Layer> layers;  // per model layer
  // Per model layer: a transitioning layer's bf16 K/V of the positions < quant_start its bf16
  // companion group still holds (group = the companion); group -1 for the other layers.
  std::vector<Layer> dense_layers;
};

class PagedKvCache {
 public:
  explicit PagedKvCache(const KvCacheConfig& config);
  ~PagedKvCache();
  PagedKvCache(const PagedKvCache&) = delete;
  PagedKvCache& operator=(const PagedKvCache&) = delete;

  const KvCacheConfig& config() const { return config_; }
  const KvLayout& layout() const { return layout_; }
  int num_groups() const { return static_cast<int>(layout_.groups.size()); }
  const LayerGroup& group(int g) const { return layout_.groups[static_cast<size_t>(g)]; }
  int block_tokens() const { return config_.block_tokens; }

  // ---- Pools ----
  int64_t num_blocks(int g) const;      // including the null block; 0 for shared groups
  size_t bytes_per_block(int g) const;  // K and V of every layer of the group
  int64_t free_blocks(int g) const;
  int64_t used_blocks(int g) const;
  int64_t used_blocks() const;  // all pools together
  const BlockPool& pool(int g) const;
  // Most blocks a sequence of the sliding group holds at once: its window, the lookahead and
  // one step's tokens, plus one for misalignment, plus the sink blocks. kUnlimitedTokens for
  // full groups.
  int64_t cap_blocks(int g) const;
  // Blocks a sequence of `tokens` tokens holds at its peak in group g.
  int64_t peak_blocks(int g, int64_t tokens) const;

  // ---- Sequences ----
  SequenceId add_sequence();
  bool has_sequence(SequenceId seq) const { return seqs_.count(seq) != 0; }
  int64_t length(SequenceId seq) const;  // tokens whose K/V the sequence holds (or is writing)
  // Admission: promises the blocks `total_tokens` tokens need at their peak in every group, so
  // later appends up to that length cannot run out. false (nothing changed) if the pools cannot
  // promise them next to the other sequences' promises.
  bool reserve(SequenceId seq, int64_t total_tokens);
  int64_t reserved_tokens(SequenceId seq) const;
  // How many tokens beyond its reservation the sequence could still be promised now (the
  // minimum over groups; kUnlimitedTokens when every group is a sliding group at its cap).
  int64_t tokens_available(SequenceId seq) const;
  // The same for one group (kUnlimitedTokens for a sliding group that can reach its cap and for
  // shared groups, which hold nothing).
  int64_t tokens_available(SequenceId seq, int g) const;
  // Makes room for the next n tokens (positions [length, length + n)) and sets length += n:
  // releases sliding blocks no future query can see, copies a shared partial last block, and
  // allocates. false (length unchanged) if the pools lack blocks beyond the promises.
  bool append(SequenceId seq, int64_t n);
  // Drops the last k tokens (speculative decoding). Blocks wholly past the new end are released.
  // ringlm::Error if a sliding group no longer holds the keys the next query needs (k beyond
  // the lookahead).
  void rollback(SequenceId seq, int64_t k);
  // A new sequence with the same tokens, sharing every block by reference count; the partial
  // last block is copied when either sequence writes into it. The fork is promised nothing beyond
  // its length; sharing can make the parent's promise need a block more (the copy), so after a
  // fork (or a rollback into a shared block) append may return false on an exhausted pool.
  SequenceId fork(SequenceId seq);
  // Drops the sequence; blocks whose last reference goes return to their pool's free list.
  void release(SequenceId seq);
  std::vector<SequenceId> sequences() const;

  // ---- Blocks held outside sequences (the engine's prefix cache) ----
  // One more / one less reference to a live block of storage group g.
  void retain_block(int g, int32_t block);
  void release_block(int g, int32_t block);
  // First logical block a sequence of `length` tokens still holds in group g past its sink blocks
  // (0 for full groups): the blocks of a sliding group below it were released.
  int64_t needed_blocks_begin(int g, int64_t length) const;
  // Whether a sequence of `length` tokens must still hold logical block b of storage group g for
  // the queries to come (after rollbacks within the lookahead): false for the blocks a sliding
  // group released, and for every block of a bf16 companion once length - lookahead >= its
  // quant_start, and for its blocks past quant_start (never written).
  bool block_needed(int g, int64_t length, int64_t b) const;
  // A new sequence of `length` tokens (a whole number of blocks) made of existing blocks, each of
  // which gets a reference: per group, ceil(length / block_tokens) entries (shared groups: an
  // empty table). Every entry must be a live block, except, in sliding groups, entries past the
  // sinks and below needed_blocks_begin, which may be 0. The sequence is promised its length.
  SequenceId adopt(const std::vector<std::vector<int32_t>>& tables, int64_t length);

  // Block table of the sequence in group g (a shared group reads its donor's).
  const std::vector<int32_t>& block_table(SequenceId seq, int g) const;
  // Slot (block · block_tokens + offset) of position pos in group g; the block must be held.
  int32_t slot(SequenceId seq, int g, int64_t pos) const;
  // Storage of a layer ([num_blocks, block_tokens, kv_heads, head_dim], or codes and scale/bias
  // planes for an affine format, see ops::KvLayerView); a shared layer gets its donor layer's.
  ops::KvLayerView layer_view(int layer) const;
  // Precision transition: the bf16 companion group of the layer's (table) group, or -1 when the
  // layer is not transitioning; and the layer's storage in that companion.
  int dense_group_of_layer(int layer) const;
  ops::KvLayerView dense_layer_view(int layer) const;
  // Sets every stored K/V byte to zero (benchmarks fill contexts without computing them).
  void zero_storage();
  // The group whose tables a group's layers read: itself, or the donor of a shared group.
  int table_group(int g) const;

  // ---- Row KV out and in (kv/kv_persist.cc) ----
  ExtractedKv extract(SequenceId seq) const;
  // Writes the sequence's held K/V and its layout to a safetensors file.
  void save(SequenceId seq, const std::string& path) const;
  // Maps a file written by save() and copies it into a new sequence. ringlm::Error naming the
  // file and field if its layout differs from this cache's or the pools lack blocks.
  SequenceId load(const std::string& path);

 private:
  struct Sequence {
    int64_t length = 0;
    int64_t reserved = 0;
    std::vector<std::vector<int32_t>> tables;  // per group (empty for shared groups)
  };
  struct Storage {
    // [layers][K|V][planes][num_blocks, block_tokens, heads, ...]: dense formats have one plane
    // (the values), affine formats three (codes, scales, biases), turbo formats three for K
    // (codes, scales, zero points) and two for V (codes, scales).
    DeviceMemory memory;
    std::unique_ptr<BlockPool> pool;
    size_t k_tensor_bytes = 0;  // K of one layer, all blocks, all planes
    size_t v_tensor_bytes = 0;  // V of one layer (differs from K for turbo formats)
  };
  // One plane of a K or V region: where it starts in the region, and the bytes of one token.
  struct Plane {
    size_t offset = 0;
    size_t token_bytes = 0;
  };
  std::vector<Plane> planes(int g, bool value) const;
  // Start of K (value = false) or V of the storage slot `slot` of group g.
  std::byte* region(int g, size_t slot, bool value) const;

  Sequence& seq_ref(SequenceId seq);
  const Sequence& seq_ref(SequenceId seq) const;
  bool is_storage(int g) const { return group(g).kind != GroupKind::Shared; }
  void split_budget();
  // Blocks the sequence may still take from group g's free list under its promise.
  int64_t outstanding(const Sequence& s, int g, int64_t reserved) const;
  int64_t kept_blocks(const Sequence& s, int g) const;
  int64_t outstanding_total(int g) const;
  // First logical block a sliding group still needs at `length` (blocks below, past the sinks,
  // can go).
  int64_t first_needed_block(int g, int64_t length) const;
  void release_unneeded(Sequence& s, int g);
  // bf16 companion: the first logical block it never writes (positions >= quant_start).
  int64_t dense_end_block(int g) const;
  // true for a full group (or keep_all_blocks): blocks stay until the sequence ends.
  bool keeps_blocks(int g) const;
  ops::KvLayerView group_view(int g, size_t slot) const;
  void copy_block(int g, int32_t from, int32_t to);
  void drop_table(std::vector<int32_t>& table, int g, size_t from);

  KvCacheConfig config_;
  KvLayout layout_;
  std::vector<Storage> storage_;  // per group (empty for shared groups)
  std::unordered_map<SequenceId, Sequence> seqs_;
  SequenceId next_id_ = 1;
};

}  // namespace ringlm::kv
