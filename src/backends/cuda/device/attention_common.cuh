// What the CUDA attention kernels share: the argument block, the visible keys of a query (causal,
// window, attention sinks) and the per-row split of decode queries into parts.
#pragma once

#include <cstdint>

#include "core/dtype.h"

namespace ringlm::cuda::device {

// Kernels keep scores in log2 units (exp2 is one instruction).
constexpr float kLog2e = 1.4426950408889634f, kLn2 = 0.6931471805599453f;

// Decode queries are split into parts of `split` visible keys (flash decoding). The split depends
// only on the query's own key count, never on the batch, so a row's bits do not either: the
// smallest multiple of min_keys that gives at most part_limit parts (per K/V format:
// attention.cu split_rule_for, or the cuda::set_decode_part_limit / set_decode_min_split
// overrides). Short contexts get min_keys-key parts; long ones up to part_limit blocks per kv head.
// balanced: the same number of parts, each the smallest multiple of 64 keys that covers the count
// in that many — no short last part (544 keys: 192 + 192 + 160 instead of 256 + 256 + 32).
// single_part_keys: counts up to it take one part (0: none; cuda::set_decode_single_part).
struct DecodeSplit {
  int part_limit;         // most parts a query is split into
  int min_keys;           // fewest keys in a part (a multiple of 64: whole tiles for every warp)
  bool balanced = false;  // as many parts, of equal length (rounded up to 64): no short last part
  int single_part_keys = 0;

  __host__ __device__ int split(int count) const {
    if (count <= single_part_keys) return (count + 63) / 64 * 64;  // one part
    const int keys = (count + part_limit - 1) / part_limit;
    int split = (keys + min_keys - 1) / min_keys * min_keys;
    split = split > min_keys ? split : min_keys;
    if (!balanced) return split;
    const int parts = (count + split - 1) / split;
    const int even = (count + parts - 1) / parts;
    return (even + 63) / 64 * 64;  // never more parts than the unbalanced split
  }
  __host__ __device__ int parts(int count) const {
    const int s = split(count);
    return (count + s - 1) / s;
  }
  // An upper bound of parts(count) over every count <= max_count.
  int parts_bound(int max_count) const {
    if (max_count <= single_part_keys) return 1;
    const int parts = (max_count + min_keys - 1) / min_keys;
    return parts < 1 ? 1 : (parts > part_limit ? part_limit : parts);
  }
};

struct AttnArgs {
  const float* q;              // [T, q_heads, D]
  float* out;                  // [T, q_heads, D]
  const int32_t* query_start;  // device tables (ops::AttentionRows layout)
  const int32_t* context_len;
  const int32_t* block_table;
  int num_rows, max_blocks;
  int q_heads, kv_heads, head_dim, block_tokens;
  int block_shift;  // log2(block_tokens) when it is a power of two, else -1
  float scale, softcap;
  int window, sink_tokens;
  int query_pos_begin, query_pos_end;  // only queries at these positions are computed
  bool split_decode;                   // rows with one query go through the split-K kernels
  DecodeSplit split_rule;              // how a decode query's keys are split into parts
  int max_parts;                       // parts per decode query (stride of the partials)
  float* part_ml;                      // [num_rows, q_heads, max_parts, 2]: m, l
  float* part_acc;                     // [num_rows, q_heads, max_parts, D]
  // The tensor-core decode kernels fetch the first tiles of keys older than the query's own
  // before waiting for the kernel before them (no kernel of the step writes those; pdl.cuh).
  bool early_fetch;
  // Warps per block of the 16-bit (cp.async) and TurboQuant k8v3 tensor-core decode kernels: 4,
  // or 8 (twice the warps per SM when the grid is a block or two per SM: one-row steps; the
  // warps' order of summation differs, so it is a function of the step's shape only).
  int decode_warps;
  // Affine K/V at head dims <= 128: the tensor-core decode kernel loads a tile's codes two tiles
  // ahead (device/decode_tiles.cuh AffineTiles); false: at use (ReaderTiles). Same bits.
  bool affine_prefetch;
  // Decode-only steps whose output feeds a 16-bit matmul (ops::matmul_input_dtype): the merges
  // write each output row rounded to out_rounded_dtype here (the bits the matmul's input
  // conversion would give) instead of f32 to out. Null: to out.
  void* out_rounded;  // [T, q_heads, D] of out_rounded_dtype
  DType out_rounded_dtype;
  // TurboQuant decode-only steps: the merge also applies the deferred inverse rotation with these
  // signs (F32[D], ±1; device/decode_merge.cuh); null: the caller un-rotates.
  const float* merge_unrotate_signs;
  // The tensor-core decode kernels: one counter per block task (row, kv head, head group), zero
  // between launches; the last of a task's parts to finish merges the task's heads (and resets
  // it). Null: a merge kernel runs after them.
  int* merge_tickets;
  // The 16-bit tensor-core decode kernels, when every decode row of the step has one part: each
  // block writes its rows' outputs as the merge would (its weight 2^0 = 1, its sum from zero, the
  // division by l), with no partials and no merge kernel.
  bool direct_out;
};

__host__ __device__ inline bool query_wanted(const AttnArgs& a, int pos) {
  return pos >= a.query_pos_begin && pos < a.query_pos_end;
}

// KV slot of position p of a row whose block table is `table`: a shift instead of an integer
// division (~20 instructions) in the key loops when block_tokens is a power of two.
__device__ __forceinline__ int64_t kv_slot(const AttnArgs& a, const int32_t* table, int p) {
  const int block = a.block_shift >= 0 ? p >> a.block_shift : p / a.block_tokens;
  return static_cast<int64_t>(table[block]) * a.block_tokens + (p - block * a.block_tokens);
}

// Query token t of a step: its row, the row's query count and its position (query_start,
// context_len: the step's device tables, ops::AttentionRows layout).
struct QueryLocation {
  int row, n, pos;
};
__device__ inline QueryLocation locate_query(const int32_t* query_start, const int32_t* context_len,
                                             int num_rows, int t) {
  // The last row r with query_start[r] <= t (empty rows share their start with the next).
  int r = 0;
  for (int hi = num_rows - 1; r < hi;) {
    const int mid = (r + hi + 1) / 2;
    if (query_start[mid] <= t) {
      r = mid;
    } else {
      hi = mid - 1;
    }
  }
  QueryLocation at;
  at.row = r;
  const int q0 = query_start[r];
  at.n = query_start[r + 1] - q0;
  at.pos = context_len[r] - at.n + (t - q0);
  return at;
}

// The keys a query at position pos sees, in order: the sinks [0, sinks), then [lo, pos].
// Index i of that list is key position i < sinks ? i : lo + i − sinks.
struct VisibleKeys {
  int sinks, lo, count;
  __host__ __device__ VisibleKeys(int pos, int window, int sink_tokens) {
    if (window > 0) {
      sinks = sink_tokens < pos + 1 ? sink_tokens : pos + 1;
      const int first = pos - window + 1;
      lo = first > sinks ? first : sinks;
    } else {
      sinks = 0;
      lo = 0;
    }
    count = sinks + (pos - lo + 1);
  }
  __host__ __device__ int position(int i) const { return i < sinks ? i : lo + (i - sinks); }
};

}  // namespace ringlm::cuda::device
