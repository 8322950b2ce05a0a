// PlanUploader: copies a step's tables (token ids, positions, wanted-logit rows, slots and
// attention rows per layer group) to the GPU once per step, into buffers it keeps between steps,
// and attaches them to the plan (kv::StepPlan::set_device_tables). Plain C++ header.
#pragma once

#include <vector>

#include "backends/cuda/device_buffer.h"
#include "backends/cuda/device_rows.h"
#include "kv/step_plan.h"

namespace ringlm::cuda {

class PlanUploader {
 public:
  // One host -> device copy for the token tables, one per group for the attention rows. The plan
  // must outlive its use on the stream; the uploader's buffers are reused by the next upload.
  // block_tokens > 0: attention summaries are bounded by the table width (see
  // DeviceRows::upload_table_bounded), for steps replayed as CUDA graphs.
  void upload(kv::StepPlan& plan, int block_tokens = 0);
  // Changes whenever one of the uploader's device buffers moves.
  uint64_t generation() const;

 private:
  std::vector<int32_t> staging_;
  DeviceBuffer tables_;
  std::vector<DeviceRows> rows_;  // per group
  uint64_t tables_generation_ = 0;
};

}  // namespace ringlm::cuda
