// What flows between consecutive decode steps without the host in the way (engine/runner.h's
// launch/collect): a launched step's chosen ids go back to the host through pinned memory behind
// its kernels, with an event to wait for, and the next step may take some of its input tokens
// straight from those ids on the device, so it can be queued before the host has seen them.
// Plain C++ (the kernel lives in step_outputs.cu).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "core/tensor.h"

namespace ringlm::cuda {

// An input token of a step that is an output of the step queued before it.
struct TokenFeed {
  int32_t token;   // index into the step's flattened token ids
  int32_t source;  // < kFedSampleBase: that step's argmax of wanted logit row `source`;
                   // else its device sample `source - kFedSampleBase`
};
constexpr int32_t kFedSampleBase = 1 << 30;

// Called as each step is launched: its uploads go to the other half of the backend's pinned
// staging memory (runtime.h Context::copy_to_device), so none waits for the step before it.
void begin_step_uploads();

// token_ids[f.token] = the source id, for every feed (one small kernel on the backend stream).
void feed_tokens(Tensor& token_ids,                 // I32[T] on the device
                 std::span<const TokenFeed> feeds,  // copied before the call returns
                 const int32_t* argmax,             // I32[rows of the previous step]
                 const int32_t* sampled);           // I32[samples of the previous step]

// Two slots of pinned host memory, used in turn by consecutive launched steps, so that a step's
// copy never lands on the outputs of the step before it while the host still reads them.
class StepOutputs {
 public:
  StepOutputs();
  ~StepOutputs();
  StepOutputs(const StepOutputs&) = delete;
  StepOutputs& operator=(const StepOutputs&) = delete;

  // Queues, behind the work already on the backend stream, the copies of a step's ids into
  // `slot` (0 or 1), which must not hold an uncollected step: the argmax of its wanted rows, its
  // device samples' tokens then logprobs (`sampled`: I32[samples] followed by F32[samples]), and
  // the device error record.
  void queue(int slot, const int32_t* argmax, int64_t rows, const void* sampled, int64_t samples);

  struct View {
    std::span<const int32_t> argmax;
    std::span<const int32_t> sampled;
    std::span<const float> logprobs;
  };
  // Waits for the slot's copies only (later work on the stream runs on), then throws for a
  // device-side error recorded by then. The view is valid until the slot is queued again.
  View wait(int slot);

 private:
  struct Slot {
    void* host = nullptr;  // pinned: error record, argmax, sampled, logprobs
    size_t bytes = 0;
    void* done = nullptr;  // cudaEvent_t
    int64_t rows = 0, samples = 0;
  };
  Slot slots_[2];
};

}  // namespace ringlm::cuda
