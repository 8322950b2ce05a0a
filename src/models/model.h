// A loaded model: weights (owned through their mapping) plus the forward pass of its family.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/arena.h"
#include "io/model_config.h"
#include "io/safetensors.h"
#include "kv/paged_kv_cache.h"
#include "kv/step_plan.h"

namespace ringlm::models {

class Model {
 public:
  virtual ~Model() = default;

  const io::ModelConfig& config() const { return config_; }
  int64_t vocab_size() const { return config_.vocab_size; }
  // Where the weights live and the forward runs (its KV cache and arena must be there too).
  Device device() const { return weights_->device(); }
  const io::WeightStore& weights() const { return *weights_; }
  // One entry per layer: KV heads, head_dim, sliding window, donor (shared KV). The caller picks
  // the storage format and may bound full layers (kv::apply_max_kv_size).
  virtual std::vector<kv::LayerKvSpec> kv_layers() const = 0;
  // Arena bytes one step of up to `max_tokens` tokens and `max_logits` logit rows needs.
  virtual size_t activation_bytes(int64_t max_tokens, int64_t max_logits) const = 0;
  // Runs the step: writes this step's K/V into `cache` and the wanted logits.
  virtual void forward(const kv::StepPlan& plan, kv::PagedKvCache& cache, Arena& arena,
                       Tensor& logits) = 0;  // F32[plan.logit_tokens().size(), vocab]

 protected:
  Model(io::ModelConfig config, std::unique_ptr<io::WeightStore> weights)
      : config_(std::move(config)), weights_(std::move(weights)) {}
  io::ModelConfig config_;
  std::unique_ptr<io::WeightStore> weights_;
};

// Reads config.json, picks the family by model_type and maps the weights (and, for Device::CUDA,
// copies them to the GPU). Unknown model_type -> ringlm::Error listing the supported ones.
std::unique_ptr<Model> load_model(const std::string& model_dir, Device device = Device::CPU);
std::vector<std::string> supported_model_types();

}  // namespace ringlm::models
