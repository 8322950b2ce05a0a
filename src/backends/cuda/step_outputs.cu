// Step outputs to the host through pinned memory, and input tokens fed from the previous step's
// outputs on the device (step_outputs.h).
#include <algorithm>
#include <cstring>

#include "backends/cuda/runtime.h"
#include "backends/cuda/step_outputs.h"

namespace ringlm::cuda {

namespace {

__global__ void feed_tokens_kernel(int32_t* token_ids, const TokenFeed* feeds, int count,
                                   const int32_t* argmax, const int32_t* sampled) {
  const int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i >= count) return;
  const TokenFeed f = feeds[i];
  token_ids[f.token] =
      f.source >= kFedSampleBase ? sampled[f.source - kFedSampleBase] : argmax[f.source];
}

constexpr size_t kRecordBytes = (sizeof(DeviceErrorRecord) + 15) / 16 * 16;

}  // namespace

void begin_step_uploads() {
  Context::get().next_staging_half();
}

void feed_tokens(Tensor& token_ids, std::span<const TokenFeed> feeds, const int32_t* argmax,
                 const int32_t* sampled) {
  if (feeds.empty()) return;
  Context& ctx = Context::get();
  const size_t bytes = feeds.size_bytes();
  // Stream-ordered scratch: the copy lands after the previous step's kernels read theirs.
  auto* device = static_cast<TokenFeed*>(ctx.scratch(Scratch::TokenFeeds, bytes));
  ctx.copy_to_device(device, feeds.data(), bytes);
  const int count = static_cast<int>(feeds.size());
  constexpr int kThreads = 128;
  feed_tokens_kernel<<<(count + kThreads - 1) / kThreads, kThreads, 0, ctx.stream()>>>(
      token_ids.ptr<int32_t>(), device, count, argmax, sampled);
  check_launch("feed_tokens_kernel");
}

StepOutputs::StepOutputs() {
  for (Slot& s : slots_) {
    cudaEvent_t event = nullptr;
    RINGLM_CUDA_CHECK(cudaEventCreateWithFlags(&event, cudaEventDisableTiming));
    s.done = event;
  }
}

StepOutputs::~StepOutputs() {
  for (Slot& s : slots_) {
    if (s.done != nullptr) (void)cudaEventDestroy(static_cast<cudaEvent_t>(s.done));
    if (s.host != nullptr) (void)cudaFreeHost(s.host);
  }
}

void StepOutputs::queue(int slot, const int32_t* argmax, int64_t rows, const void* sampled,
                        int64_t samples) {
  RINGLM_CHECK(slot == 0 || slot == 1, "StepOutputs: slot ", slot);
  Slot& s = slots_[slot];
  const size_t id_bytes = static_cast<size_t>(rows) * sizeof(int32_t);
  const size_t sample_bytes = static_cast<size_t>(samples) * (sizeof(int32_t) + sizeof(float));
  const size_t bytes = kRecordBytes + id_bytes + sample_bytes;
  if (bytes > s.bytes) {
    // The slot's last copy was waited for (the caller collects a slot before queueing it again).
    if (s.host != nullptr) RINGLM_CUDA_CHECK(cudaFreeHost(s.host));
    s.host = nullptr;
    s.bytes = 0;
    const size_t grown = std::max<size_t>(bytes, 4096);
    RINGLM_CUDA_CHECK(cudaMallocHost(&s.host, grown));
    s.bytes = grown;
  }
  Context& ctx = Context::get();
  auto* host = static_cast<unsigned char*>(s.host);
  RINGLM_CUDA_CHECK(cudaMemcpyAsync(host, ctx.errors(), sizeof(DeviceErrorRecord),
                                    cudaMemcpyDeviceToHost, ctx.stream()));
  if (id_bytes > 0)
    RINGLM_CUDA_CHECK(cudaMemcpyAsync(host + kRecordBytes, argmax, id_bytes, cudaMemcpyDeviceToHost,
                                      ctx.stream()));
  if (sample_bytes > 0)
    RINGLM_CUDA_CHECK(cudaMemcpyAsync(host + kRecordBytes + id_bytes, sampled, sample_bytes,
                                      cudaMemcpyDeviceToHost, ctx.stream()));
  RINGLM_CUDA_CHECK(cudaEventRecord(static_cast<cudaEvent_t>(s.done), ctx.stream()));
  s.rows = rows;
  s.samples = samples;
}

StepOutputs::View StepOutputs::wait(int slot) {
  RINGLM_CHECK(slot == 0 || slot == 1, "StepOutputs: slot ", slot);
  Slot& s = slots_[slot];
  RINGLM_CUDA_CHECK(cudaEventSynchronize(static_cast<cudaEvent_t>(s.done)));
  DeviceErrorRecord record{};
  std::memcpy(&record, s.host, sizeof(record));
  // The record names the failing op: synchronize() waits for the stream, reads it again,
  // clears it and throws.
  if (record.code != 0) Context::get().synchronize();
  const auto* host = static_cast<const unsigned char*>(s.host);
  View view;
  const auto* ids = reinterpret_cast<const int32_t*>(host + kRecordBytes);
  view.argmax = {ids, static_cast<size_t>(s.rows)};
  view.sampled = {ids + s.rows, static_cast<size_t>(s.samples)};
  view.logprobs = {reinterpret_cast<const float*>(ids + s.rows + s.samples),
                   static_cast<size_t>(s.samples)};
  return view;
}

}  // namespace ringlm::cuda
