// What the CUDA attention kernels share: the argument block, the visible keys of a query (causal,
// window, attention sinks) and the per-row split of decode queries into parts.
#pragma once

#include <cstdint>

namespace ringlm::cuda::device {

// Kernels keep scores in log2 units (exp2 is one instruction).
constexpr float kLog2e = 1.4426950408889634f, kLn2 = 0.6931471805599453f;

struct AttnArgs {
  const float* q;              // [T, q_heads, D]
  float* out;                  // [T, q_heads, D]
  const int32_t* query_start;  // device tables (ops::AttentionRows layout)
  const int32_t* context_len;
  const int32_t* block_table;
  int num_rows, max_blocks;
  int q_heads, kv_heads, head_dim, block_tokens;
  float scale, softcap;
  int window, sink_tokens;
  bool split_decode;  // rows with one query go through the split-K kernels
  int max_parts;      // parts per decode query (stride of the partials)
  float* part_ml;     // [num_rows, q_heads, max_parts, 2]: m, l
  float* part_acc;    // [num_rows, q_heads, max_parts, D]
};

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

// Decode queries are split into parts of `split` visible keys (flash decoding). The split depends
// only on the query's own key count, never on the batch, so a row's bits do not either: the
// smallest kMinSplit·2^k that gives at most kMaxParts parts. Short contexts get 64-key parts
// (several blocks per kv head even at batch 1); long ones up to kMaxParts blocks per kv head,
// enough warps to keep an H200's memory busy at batch 1.
constexpr int kMinSplit = 64, kMaxParts = 128;
__host__ __device__ inline int decode_split(int count) {
  int split = kMinSplit;
  while ((count + split - 1) / split > kMaxParts) split *= 2;
  return split;
}
__host__ __device__ inline int decode_parts(int count) {
  const int split = decode_split(count);
  return (count + split - 1) / split;
}
// An upper bound of decode_parts over every count <= max_count.
inline int decode_parts_bound(int max_count) {
  const int parts = (max_count + kMinSplit - 1) / kMinSplit;
  return parts < 1 ? 1 : (parts > kMaxParts ? kMaxParts : parts);
}

}  // namespace ringlm::cuda::device
