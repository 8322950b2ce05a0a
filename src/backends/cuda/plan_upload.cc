#include "backends/cuda/plan_upload.h"

#include <algorithm>

#include "backends/cuda/runtime.h"

namespace ringlm::cuda {

uint64_t PlanUploader::generation() const {
  uint64_t g = tables_generation_;
  for (const DeviceRows& rows : rows_) g += rows.generation();
  return g + (static_cast<uint64_t>(rows_.size()) << 48);
}

void PlanUploader::upload(kv::StepPlan& plan, int block_tokens) {
  const int64_t T = plan.num_tokens();
  const auto wanted = static_cast<int64_t>(plan.logit_tokens().size());
  const int groups = plan.num_groups();
  // Layout, in int32 elements: token ids [T], positions [T], logit rows [wanted], then the slots
  // [T] of each table group.
  staging_.clear();
  auto append = [&](const Tensor& host) {
    const auto* p = host.ptr<const int32_t>();
    staging_.insert(staging_.end(), p, p + host.numel());
  };
  append(plan.token_ids());
  append(plan.positions());
  append(plan.logit_token_ids());
  std::vector<int64_t> slot_offset(static_cast<size_t>(groups), -1);
  for (int g = 0; g < groups; ++g) {
    if (plan.table_group(g) != g) continue;
    slot_offset[static_cast<size_t>(g)] = static_cast<int64_t>(staging_.size());
    append(plan.slots(g));
  }
  const size_t bytes = std::max<size_t>(staging_.size(), 1) * sizeof(int32_t);
  if (bytes > tables_.size()) {
    // Kernels queued by the previous step may still read the old buffer.
    RINGLM_CUDA_CHECK(cudaStreamSynchronize(Context::get().stream()));
    tables_ = DeviceBuffer(bytes + bytes / 2);
    ++tables_generation_;
  }
  copy_to_device(tables_.data(), staging_.data(), staging_.size() * sizeof(int32_t));

  auto* base = static_cast<int32_t*>(tables_.data());
  kv::StepPlan::DeviceTables device;
  device.token_ids = Tensor(base, DType::I32, {T}, Device::CUDA);
  device.positions = Tensor(base + T, DType::I32, {T}, Device::CUDA);
  device.logit_tokens = Tensor(base + 2 * T, DType::I32, {wanted}, Device::CUDA);
  rows_.resize(static_cast<size_t>(groups));
  device.slots.resize(static_cast<size_t>(groups));
  device.rows_mirror.assign(static_cast<size_t>(groups), nullptr);
  for (int g = 0; g < groups; ++g) {
    const auto gi = static_cast<size_t>(g);
    if (slot_offset[gi] < 0) continue;
    device.slots[gi] = Tensor(base + slot_offset[gi], DType::I32, {T}, Device::CUDA);
    if (block_tokens > 0) {
      rows_[gi].upload_table_bounded(plan.attention_rows(g), block_tokens);
    } else {
      rows_[gi].upload(plan.attention_rows(g));
    }
    device.rows_mirror[gi] = &rows_[gi];
  }
  plan.set_device_tables(std::move(device));
}

}  // namespace ringlm::cuda
