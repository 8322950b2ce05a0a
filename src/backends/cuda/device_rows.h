// DeviceRows: a device copy of a step's attention row layout (ops::AttentionRows: query ranges,
// context lengths, block tables), uploaded once per step and read by every layer's attention.
// The host tables stay the source of truth: ops::attention validates them; this is their mirror.
//
// Intended use by the step planner (kv/StepPlan) once the CUDA path is wired:
//   plan.device_rows().upload(plan.attention_rows());   // once per step, one H2D copy
//   cuda::attention(q, kv, plan.device_rows(), params, out);
#pragma once

#include <cstdint>

#include "backends/cuda/device_buffer.h"
#include "ops/ops.h"

namespace ringlm::cuda {

// What the host knows about a step's rows that picks the attention kernels (not their results:
// each query's kernel depends only on its own row, see attention.cu).
struct RowsSummary {
  int decode_rows = 0;         // rows with exactly one query
  int max_decode_context = 0;  // the longest context among them
  int other_rows = 0;          // rows with several queries (prefill chunks)
};
RowsSummary summarize_rows(const ops::AttentionRows& rows);  // host tables

class DeviceRows {
 public:
  // Copies rows' tables into one device buffer on the backend stream (grown when needed).
  // The host tables may change as soon as this returns.
  void upload(const ops::AttentionRows& rows);
  // Same, but the summary bounds every decode row's context by the table width
  // (max_blocks · block_tokens) instead of the longest actual one, so kernel launch shapes depend
  // only on the table shape (CUDA graphs replay them across steps).
  void upload_table_bounded(const ops::AttentionRows& rows, int block_tokens);
  // The uploaded layout: same num_rows and max_blocks, device pointers.
  const ops::AttentionRows& view() const { return view_; }
  const RowsSummary& summary() const { return summary_; }
  // Changes whenever the device buffer moves.
  uint64_t generation() const { return generation_; }

 private:
  DeviceBuffer buffer_;
  ops::AttentionRows view_;
  RowsSummary summary_;
  uint64_t generation_ = 0;
};

// Packs rows' tables into `dst` (device memory of at least packed_rows_bytes(rows)) and returns
// the device view (one host -> device copy on the backend stream).
size_t packed_rows_bytes(const ops::AttentionRows& rows);
ops::AttentionRows upload_rows(const ops::AttentionRows& rows, void* dst);

}  // namespace ringlm::cuda
