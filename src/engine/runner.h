// Runner: owns the per-step resources of one model (KV cache, activation arena, logits buffer) on
// the model's device and runs steps of many rows. generate_greedy drives one or more prompts to
// completion through it with the engine's Scheduler (scheduler.h: chunked prefill, rows that join
// as soon as there is room and leave when they finish, preemption) and argmax; the Engine
// (engine.h) adds sampling, stops, text and the prefix cache.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "core/arena.h"
#include "core/device_memory.h"
#include "kv/kv_config.h"
#include "kv/paged_kv_cache.h"
#include "kv/step_plan.h"
#include "models/model.h"

namespace ringlm::engine {

struct RunnerConfig {
  size_t kv_memory_bytes = size_t{512} << 20;
  // GPU models: the KV budget is sized from the GPU instead of kv_memory_bytes — what is left of
  // gpu_memory_utilization × its memory once the weights, the activation arena and the logits
  // buffers are allocated (auto_kv_budget; vLLM's --gpu-memory-utilization). CPU models keep
  // kv_memory_bytes.
  bool kv_memory_auto = false;
  double gpu_memory_utilization = 0.9;
  int block_tokens = 16;
  int64_t max_step_tokens = 512;  // prefill chunk budget per step (all rows together)
  kv::KvFormat kv_format = kv::KvFormat::dense(DType::F32);
  // true: K/V are stored densely in the checkpoint's dtype (config.json torch_dtype: bf16 KV for a
  // bf16 model, as vLLM's kv_cache_dtype "auto"), ignoring kv_format.
  bool kv_format_auto = false;
  // Per-layer formats (kv_config.json) over kv_format: layers listed get theirs, the others the
  // overrides' default when it has one.
  kv::KvFormatOverrides kv_formats;
  int max_sequences = 16;  // rows the KV budget split plans for (sliding pools)
  int lookahead = 0;       // tokens sliding groups keep beyond the window, for rollback
  // > 0: every full-attention layer becomes sliding(max_kv_size - kv_keep) with kv_keep sink
  // tokens (mlx-lm --max-kv-size, RotatingKVCache keep).
  int max_kv_size = 0;
  int kv_keep = 4;
  // >= 0 (--kv-quant-start S, mlx-lm's quantized_kv_start): the layers with a quantized format
  // keep bf16 K/V for the queries at positions < S; queries from S on read the quantized K/V.
  // 0 is the plain quantized format; -1: off. CPU and GPU (tests/cuda/kv_quant_start_test.cc).
  int64_t kv_quant_start = -1;
  // GPU models: decode steps (every row one token) are captured as CUDA graphs per shape and
  // replayed (backends/cuda/step_graph.h).
  bool cuda_graphs = true;
  // GPU models: the engine samples a choice on the device when its sampling needs only
  // temperature, top_k, top_p and min_p (step_select's device_samples); false keeps every
  // sampled choice on the host sampler.
  bool device_sampling = true;
  // CPU models (tests): steps return what a GPU step returns — the argmax of every wanted row and
  // the device samples (engine/sampler.h's sample_processed, the GPU sampler's rules) — and fed
  // tokens come from the previous step's ids, so the engine's GPU-side choices run in CPU tests.
  bool emulate_device_outputs = false;
  // Tests: the forward of step number fail_at_step (0-based, every forward counts) throws, once —
  // how the engine recovers from a failed step.
  int64_t fail_at_step = -1;
};
// The device comes from the model (models::load_model(dir, device)).

// The auto KV budget (RunnerConfig::kv_memory_auto) from the device's memory after the runner's
// other buffers: utilization × total − (total − free), or 0 when nothing is left.
size_t auto_kv_budget(const MemoryInfo& memory, double utilization);

// The KV cache configuration a runner builds for the model (layer specs with the format and
// --max-kv-size applied, block size, budget).
kv::KvCacheConfig kv_cache_config(const models::Model& model, const RunnerConfig& config);

class Runner {
 public:
  Runner(models::Model& model, const RunnerConfig& config);

  models::Model& model() { return model_; }
  kv::PagedKvCache& cache() { return *cache_; }
  const RunnerConfig& config() const { return config_; }

  // Runs one planned step (KV room must be reserved); returns the wanted logits on the host,
  // F32[plan.logit_tokens().size(), vocab], valid until the next step.
  Tensor step(kv::StepPlan& plan);
  // Runs one step and returns the argmax of each wanted logit row (computed on the model's
  // device: a GPU step copies back only the ids).
  std::vector<int32_t> step_argmax(kv::StepPlan& plan);
  // A step for a sampler that needs whole logit rows only for some of them. GPU models: the
  // argmax of every wanted logit row is computed on the device (ids as step_argmax's), and only
  // the rows with host_rows[i] set are copied to the host — a greedy row costs 4 bytes, not a
  // vocabulary row. CPU models: argmax is empty and every row is in logits (as step()).
  // device_samples (GPU models only): choices sampled on the device from their logit row
  // (cuda::sample: engine/sampler.h's steps 5-6 without penalties, bias or suppression;
  // temperature 0 is greedy); their tokens, and the logprobs of those that want one, come back
  // in `sampled` / `sampled_logprobs`, in order.
  struct DeviceSample {
    int64_t row;  // wanted logit row
    float temperature, top_p, min_p;
    int top_k;
    double u;  // philox_uniform of the choice and token index
    bool want_logprob = false;
  };
  struct Selected {
    std::vector<int32_t> argmax;          // [wanted logit rows] or empty
    std::vector<int32_t> sampled;         // [device_samples]
    std::vector<float> sampled_logprobs;  // [device_samples]; set where want_logprob
    Tensor logits;  // host F32[wanted logit rows, vocab]; rows not asked unset
  };
  Selected step_select(kv::StepPlan& plan, std::span<const char> host_rows,
                       std::span<const DeviceSample> device_samples = {});

  // Overlapped steps: the host plans and queues step N+1 while the device runs step N.
  // launch() queues a step as step_select runs it and returns at once on a GPU (CPU models: it
  // only records the step; collect() runs it); collect() waits for the oldest launched step and
  // returns what step_select would have. At most two steps are launched and not collected, a
  // step with host rows must be collected before the next launch (its logits live in one
  // device buffer), and the plan must live until its step is collected.
  // feeds: input tokens of this step that are outputs of the step launched just before it.
  // GPU models fill them on the device before the forward (the plan may hold any id there);
  // CPU models run the forward in collect(), so the caller writes those tokens into the plan
  // (StepPlan::set_token) before collecting, and feeds are ignored (unless the runner emulates
  // device outputs: then they are applied in collect()).
  struct Feed {
    int32_t token;   // index into the plan's flattened tokens
    int32_t source;  // the previous step's wanted logit row (its argmax), or kFedSample + s:
                     // its device sample s
  };
  static constexpr int32_t kFedSample = 1 << 30;
  void launch(kv::StepPlan& plan, std::span<const char> host_rows,
              std::span<const DeviceSample> device_samples = {}, std::span<const Feed> feeds = {});
  Selected collect();
  // Steps launched and not collected.
  int launched() const { return static_cast<int>(launched_.size()); }
  // Whether steps return device ids (argmax, device samples) and take feeds: GPU models, and
  // CPU models with RunnerConfig::emulate_device_outputs.
  bool device_outputs() const {
    return model_.device() != Device::CPU || config_.emulate_device_outputs;
  }
  // Forgets the launched steps after an error (GPU models wait for the stream first).
  void abandon_launched();
  // GPU models: decode steps replayed from a captured CUDA graph so far (0 on CPU).
  int64_t graph_replays() const;
  // GPU models: host seconds spent in steps before their GPU work was queued (table uploads,
  // graph lookup and launch) — time the GPU waits for the host, as the caller's own planning
  // between steps is; 0 on CPU. Not reset: callers take differences.
  double host_prep_seconds() const { return host_prep_seconds_; }

 private:
  models::Model& model_;
  RunnerConfig config_;
  std::unique_ptr<kv::PagedKvCache> cache_;
  // Attaches the plan's device tables, fills the fed tokens and runs the forward into
  // logits_device_ (or logits_).
  Tensor forward(kv::StepPlan& plan, std::span<const Feed> feeds = {});
  // Queues cuda::sample of `samples` from device logits F32[rows, vocab] into sampled_device_:
  // tokens I32[samples] then logprobs F32[samples].
  void queue_device_samples(const Tensor& logits, std::span<const DeviceSample> samples);

  struct Launched {
    kv::StepPlan* plan = nullptr;
    std::vector<char> host_rows;
    int64_t samples = 0;
    int slot = 0;   // GPU models: cuda::StepOutputs slot
    Tensor logits;  // GPU models: the device logits
    // CPU models emulating device outputs: applied in collect()
    std::vector<DeviceSample> device_samples;
    std::vector<Feed> feeds;
  };
  std::deque<Launched> launched_;
  int next_slot_ = 0;
  // The ids the last collected step returned (CPU emulation of device outputs).
  void emulate_device_step(Launched& l, Selected& out);
  std::vector<int32_t> emulated_argmax_, emulated_sampled_;

  std::unique_ptr<Arena> arena_;
  std::vector<float> logits_;
  DeviceMemory logits_device_;   // GPU models: F32[max_step_tokens, vocab]
  DeviceMemory argmax_device_;   // GPU models: I32[max_step_tokens]
  DeviceMemory sampled_device_;  // GPU models: I32[device samples] then F32[device samples]
  double host_prep_seconds_ = 0;
  int64_t forwards_ = 0;                 // steps run, for RunnerConfig::fail_at_step
  std::shared_ptr<void> plan_uploader_;  // cuda::PlanUploader for GPU models
  std::shared_ptr<void> step_graphs_;    // cuda::StepGraphs for GPU models
  std::shared_ptr<void> step_outputs_;   // cuda::StepOutputs for GPU models
};

struct GreedyOptions {
  int64_t max_new_tokens = 32;
  // Called with (prompt index, token) as each token is produced, for streaming.
  std::function<void(size_t, int32_t)> on_token;
  std::vector<int32_t> stop_token_ids;  // generation ends after emitting one of these
  int max_rows = 16;                    // rows decoding at once
};

struct GreedyResult {
  std::vector<std::vector<int32_t>> tokens;  // per prompt, the generated ids
  int64_t prompt_tokens = 0;
  int64_t generated_tokens = 0;
  double prefill_seconds = 0;  // steps that contained prompt tokens
  double decode_seconds = 0;   // steps of decode tokens only
  int64_t steps = 0;
};

// Greedy decoding of every prompt. Rows join while KV and row slots allow, prefill in chunks of
// at most config.max_step_tokens tokens per step (mixed with decode rows), and leave when done;
// when the KV runs out the newest row is preempted and recomputed later (same tokens).
GreedyResult generate_greedy(Runner& runner, const std::vector<std::vector<int32_t>>& prompts,
                             const GreedyOptions& options);

}  // namespace ringlm::engine
