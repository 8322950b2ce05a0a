// How a model's layers map onto KV layer groups. A model declares one LayerKvSpec per layer (its
// KV shape, window, sinks, donor); the cache groups layers that can share one block table per
// sequence: same kind, window, sinks, format and KV shape. Gemma 3 gets one sliding group and one
// global group; Llama one full group; `--max-kv-size N` (apply_max_kv_size) turns every full layer
// into a sliding(N - keep) layer with `keep` attention sinks, as mlx-lm's RotatingKVCache.
//
// Precision transition (--kv-quant-start S, mlx-lm's quantized_kv_start): a quantized group with
// quant_start S > 0 gets a dense bf16 companion group (same layers, kind, window and sinks,
// appended after the other groups) that holds its positions < S. The query at p < S reads the
// companion (bf16 keys), the query at p >= S the quantized group (docs/kv-cache.md).
#pragma once

#include <string>
#include <vector>

#include "kv/kv_format.h"

namespace ringlm::kv {

struct LayerKvSpec {
  int kv_heads = 0;
  int head_dim = 0;
  int window = 0;        // > 0: sliding window of this many keys (including the query's own)
  int sink_tokens = 0;   // with a window: the first sink_tokens tokens stay visible forever
  int donor_layer = -1;  // >= 0: no K/V of its own; reads this earlier layer's (shared KV)
  KvFormat format;       // storage format (the runner sets it from its flags)
  // > 0 with a quantized format: positions < quant_start are also kept in bf16 for the queries
  // before it (--kv-quant-start); 0: quantized from the first token.
  int64_t quant_start = 0;
};

enum class GroupKind : uint8_t {
  Full,     // the block table grows with the sequence
  Sliding,  // blocks wholly out of window + lookahead go back to the pool during the run
  Shared,   // no storage: reads the donor group's blocks through the donor group's tables
  // Recurrent (SSM / DeltaNet state slots): see kv/recurrent_state.h; lands with hybrid models.
};
const char* group_kind_name(GroupKind kind);

struct LayerGroup {
  GroupKind kind = GroupKind::Full;
  int window = 0;
  int sink_tokens = 0;
  KvFormat format;
  int kv_heads = 0;
  int head_dim = 0;
  std::vector<int> layers;        // model layers, ascending
  int donor_group = -1;           // Shared: the group whose tables and storage it reads
  std::vector<int> donor_layers;  // Shared: per entry of `layers`, the donor layer it reads
  // Precision transition: > 0 on a quantized group with a bf16 companion (queries at positions
  // >= quant_start read this group, earlier ones the companion) and on that companion (it holds
  // positions < quant_start only).
  int64_t quant_start = 0;
  int dense_group = -1;  // the quantized group: its bf16 companion
  int dense_for = -1;  // the companion: the quantized group whose positions < quant_start it holds
  bool is_dense_companion() const { return dense_for >= 0; }
};

struct KvLayout {
  std::vector<LayerGroup> groups;
  std::vector<int> group_of_layer;  // [layers]
  std::vector<int> slot_of_layer;   // [layers]: index into its storage group's layers (shared:
                                    // the donor layer's index in the donor group)
  int num_layers() const { return static_cast<int>(group_of_layer.size()); }
};

// Groups the layers (first-seen order). Errors (ringlm::Error) name the layer: non-positive
// shapes, negative windows/sinks, sinks without a window, donors that are not earlier storage
// layers, unsupported formats.
KvLayout make_layout(const std::vector<LayerKvSpec>& layers);

// --max-kv-size N with `keep` sinks: every full-attention layer becomes sliding(N - keep) with
// `keep` sink tokens, so each query sees at most N keys: the first `keep` and the N - keep most
// recent (its own included) — the keys mlx-lm's RotatingKVCache(max_size=N, keep) holds when
// the query is written. Sliding and shared layers are left as they are. N must exceed keep.
std::vector<LayerKvSpec> apply_max_kv_size(std::vector<LayerKvSpec> layers, int max_kv_size,
                                           int keep);

}  // namespace ringlm::kv
