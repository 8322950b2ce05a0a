#include "engine/runner.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <deque>

#include "core/log.h"
#include "engine/sampler.h"
#include "engine/scheduler.h"
#include "ops/ops.h"
#ifdef RINGLM_HAS_CUDA
#include "backends/cuda/cuda_ops.h"
#include "backends/cuda/plan_upload.h"
#include "backends/cuda/step_graph.h"
#include "backends/cuda/step_outputs.h"
#endif

namespace ringlm::engine {

size_t auto_kv_budget(const MemoryInfo& memory, double utilization) {
  const double allowed = utilization * static_cast<double>(memory.total);
  const double used = static_cast<double>(memory.total) - static_cast<double>(memory.free);
  return allowed > used ? static_cast<size_t>(allowed - used) : 0;
}

kv::KvCacheConfig kv_cache_config(const models::Model& model, const RunnerConfig& config) {
  kv::KvCacheConfig kv;
  kv.layers = model.kv_layers();
  kv::KvFormat base = config.kv_format;
  if (config.kv_format_auto) {
    const std::string& dtype = model.config().torch_dtype;
    base = kv::KvFormat::dense(dtype == "bfloat16"  ? DType::BF16
                               : dtype == "float16" ? DType::F16
                                                    : DType::F32);
  }
  const auto& overrides = config.kv_formats;
  for (auto& layer : kv.layers) layer.format = overrides.default_format.value_or(base);
  for (const auto& [layer, format] : overrides.layers) {
    RINGLM_USER_CHECK(layer < static_cast<int>(kv.layers.size()), "KV config names layer ", layer,
                      " but the model has ", kv.layers.size(), " layers");
    kv.layers[static_cast<size_t>(layer)].format = format;
  }
  if (config.kv_quant_start >= 0) {
    bool quantized = false;
    for (auto& layer : kv.layers) {
      if (!layer.format.is_affine() && !layer.format.is_turbo()) continue;
      quantized = true;
      layer.quant_start = config.kv_quant_start;
    }
    RINGLM_USER_CHECK(quantized, "--kv-quant-start ", config.kv_quant_start,
                      " needs a quantized KV format (--kv-format int8-g64, turbo, ... or a "
                      "kv_config.json with quantized layers); every layer here is ",
                      kv.layers.front().format.name());
  }
  if (config.max_kv_size > 0)
    kv.layers = kv::apply_max_kv_size(std::move(kv.layers), config.max_kv_size, config.kv_keep);
  kv.block_tokens = config.block_tokens;
  kv.memory_bytes = config.kv_memory_bytes;
  kv.max_sequences = config.max_sequences;
  kv.max_step_tokens = config.max_step_tokens;
  kv.lookahead = config.lookahead;
  kv.device = model.device();
  return kv;
}

Runner::Runner(models::Model& model, const RunnerConfig& config) : model_(model), config_(config) {
  arena_ = std::make_unique<Arena>(
      model.activation_bytes(config.max_step_tokens, config.max_step_tokens), model.device());
  const auto logit_floats = static_cast<size_t>(config.max_step_tokens * model.vocab_size());
  if (model.device() == Device::CPU) {
    logits_.resize(logit_floats);
  } else {
    logits_device_ = DeviceMemory(model.device(), logit_floats * sizeof(float));
    argmax_device_ =
        DeviceMemory(model.device(), static_cast<size_t>(config.max_step_tokens) * sizeof(int32_t));
#ifdef RINGLM_HAS_CUDA
    plan_uploader_ = std::make_shared<cuda::PlanUploader>();
    step_graphs_ = std::make_shared<cuda::StepGraphs>();
    step_outputs_ = std::make_shared<cuda::StepOutputs>();
#endif
  }
  // The KV cache last: an automatic budget is what the buffers above leave.
  if (config.kv_memory_auto) {
    RINGLM_USER_CHECK(config.gpu_memory_utilization > 0.0 && config.gpu_memory_utilization <= 1.0,
                      "--gpu-memory-utilization must be in (0, 1], got ",
                      config.gpu_memory_utilization);
  }
  if (config.kv_memory_auto && model.device() != Device::CPU) {
    const MemoryInfo memory = memory_info(model.device());
    config_.kv_memory_bytes = auto_kv_budget(memory, config.gpu_memory_utilization);
    constexpr size_t kGiB = size_t{1} << 30;
    RINGLM_USER_CHECK(config_.kv_memory_bytes >= (size_t{64} << 20), "no GPU memory left for the ",
                      "KV cache: ", (memory.total - memory.free) / kGiB, " of ",
                      memory.total / kGiB, " GiB are in use after loading the model, and ",
                      "--gpu-memory-utilization ", config.gpu_memory_utilization, " allows ",
                      config.gpu_memory_utilization * static_cast<double>(memory.total) /
                          static_cast<double>(kGiB),
                      " GiB; raise it or set --kv-memory MiB");
    RINGLM_LOG(Info, "KV cache: ", config_.kv_memory_bytes >> 20, " MiB (",
               config.gpu_memory_utilization, " of ", memory.total >> 20, " MiB of GPU memory, ",
               (memory.total - memory.free) >> 20, " MiB in use before it)");
  }
  cache_ = std::make_unique<kv::PagedKvCache>(kv_cache_config(model, config_));
}

#ifdef RINGLM_HAS_CUDA
static_assert(sizeof(Runner::Feed) == sizeof(cuda::TokenFeed) &&
              Runner::kFedSample == cuda::kFedSampleBase);
#endif

Tensor Runner::forward(kv::StepPlan& plan, std::span<const Feed> feeds) {
  RINGLM_CHECK(forwards_++ != config_.fail_at_step, "Runner: step ", config_.fail_at_step,
               " fails (RunnerConfig::fail_at_step)");
  RINGLM_CHECK(plan.num_tokens() <= config_.max_step_tokens, "step of ", plan.num_tokens(),
               " tokens exceeds max_step_tokens ", config_.max_step_tokens);
  const auto wanted = static_cast<int64_t>(plan.logit_tokens().size());
  if (model_.device() == Device::CPU) {
    Tensor logits(logits_.data(), DType::F32, {wanted, model_.vocab_size()});
    model_.forward(plan, *cache_, *arena_, logits);
    return logits;
  }
  Tensor logits(logits_device_.data(), DType::F32, {wanted, model_.vocab_size()}, model_.device());
#ifdef RINGLM_HAS_CUDA
  const auto start = std::chrono::steady_clock::now();
  const auto queued = [&] {
    host_prep_seconds_ +=
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  };
  auto& uploader = *static_cast<cuda::PlanUploader*>(plan_uploader_.get());
  const bool decode_only =
      config_.cuda_graphs && wanted == plan.num_tokens() && plan.num_tokens() == plan.num_rows();
  // The previous step's ids into this step's inputs: after the upload, before the forward (a
  // replayed graph reads the uploaded ids where they are).
  const auto feed = [&] {
    if (feeds.empty()) return;
    Tensor ids = plan.token_ids();
    cuda::feed_tokens(ids, {reinterpret_cast<const cuda::TokenFeed*>(feeds.data()), feeds.size()},
                      reinterpret_cast<const int32_t*>(argmax_device_.data()),
                      reinterpret_cast<const int32_t*>(sampled_device_.data()));
  };
  if (!decode_only) {
    uploader.upload(plan);
    feed();
    model_.forward(plan, *cache_, *arena_, logits);  // queued kernel by kernel
    queued();
    return logits;
  }
  uploader.upload(plan, config_.block_tokens);
  feed();
  std::vector<int64_t> key = {plan.num_rows()};
  for (int g = 0; g < plan.num_groups(); ++g) {
    if (plan.table_group(g) == g) key.push_back(plan.attention_rows(g).max_blocks);
  }
  // --kv-quant-start: which tokens also go to the bf16 companions (host-driven writes).
  const std::vector<int64_t> dense_writes = plan.dense_write_ranges();
  key.push_back(static_cast<int64_t>(dense_writes.size()));
  key.insert(key.end(), dense_writes.begin(), dense_writes.end());
  key.push_back(static_cast<int64_t>(uploader.generation()));
  static_cast<cuda::StepGraphs*>(step_graphs_.get())->run(std::move(key), [&] {
    model_.forward(plan, *cache_, *arena_, logits);
  });
  queued();
#else
  (void)feeds;
#endif
  return logits;
}

int64_t Runner::graph_replays() const {
#ifdef RINGLM_HAS_CUDA
  if (step_graphs_) return static_cast<const cuda::StepGraphs*>(step_graphs_.get())->replays();
#endif
  return 0;
}

Tensor Runner::step(kv::StepPlan& plan) {
  RINGLM_CHECK(launched_.empty(), "Runner::step with ", launched_.size(), " launched steps");
  Tensor logits = forward(plan);
  if (logits.device == Device::CPU) return logits;
  logits_.resize(static_cast<size_t>(logits.numel()));
  copy_bytes(logits_.data(), Device::CPU, logits.data, logits.device, logits.nbytes());
  return Tensor(logits_.data(), DType::F32, {logits.size(0), logits.size(1)});
}

std::vector<int32_t> Runner::step_argmax(kv::StepPlan& plan) {
  RINGLM_CHECK(launched_.empty(), "Runner::step_argmax with ", launched_.size(), " launched steps");
  const Tensor logits = forward(plan);
  std::vector<int32_t> ids(static_cast<size_t>(logits.size(0)));
  if (ids.empty()) return ids;
  Tensor host_ids(ids.data(), DType::I32, {logits.size(0)});
  if (logits.device == Device::CPU) {
    ops::argmax(logits, host_ids);
    return ids;
  }
  // Not from the arena: a replayed graph leaves the arena's host-side offsets untouched.
  Tensor device_ids(argmax_device_.data(), DType::I32, {logits.size(0)}, logits.device);
  ops::argmax(logits, device_ids);
  copy_bytes(ids.data(), Device::CPU, device_ids.data, device_ids.device, host_ids.nbytes());
  return ids;
}

Runner::Selected Runner::step_select(kv::StepPlan& plan, std::span<const char> host_rows,
                                     std::span<const DeviceSample> device_samples) {
  RINGLM_CHECK(launched_.empty(), "step_select with ", launched_.size(), " launched steps");
  launch(plan, host_rows, device_samples);
  return collect();
}

void Runner::launch(kv::StepPlan& plan, std::span<const char> host_rows,
                    std::span<const DeviceSample> device_samples, std::span<const Feed> feeds) {
  RINGLM_CHECK(launched_.size() < 2, "Runner::launch: two steps are launched already");
  // A GPU step's logits live in one device buffer until collected (a CPU step computes them
  // in collect(), when the step before has been used).
  for (const Launched& l : launched_) {
    RINGLM_CHECK(model_.device() == Device::CPU ||
                     std::find(l.host_rows.begin(), l.host_rows.end(), 1) == l.host_rows.end(),
                 "Runner::launch: the launched step has host rows; collect it first");
  }
  RINGLM_CHECK(
      static_cast<int64_t>(host_rows.size()) == static_cast<int64_t>(plan.logit_tokens().size()),
      "Runner::launch: ", host_rows.size(), " row flags for ", plan.logit_tokens().size(),
      " logit rows");
  Launched l;
  l.plan = &plan;
  l.host_rows.assign(host_rows.begin(), host_rows.end());
  l.samples = static_cast<int64_t>(device_samples.size());
  if (model_.device() == Device::CPU) {
    RINGLM_CHECK(device_samples.empty() || config_.emulate_device_outputs,
                 "step_select: device samples on a CPU model");
    if (config_.emulate_device_outputs) {
      l.device_samples.assign(device_samples.begin(), device_samples.end());
      l.feeds.assign(feeds.begin(), feeds.end());
    }
    launched_.push_back(std::move(l));  // collect() runs it
    return;
  }
#ifdef RINGLM_HAS_CUDA
  cuda::begin_step_uploads();
  l.logits = forward(plan, feeds);
  if (!device_samples.empty()) queue_device_samples(l.logits, device_samples);
  const int64_t rows = l.logits.size(0);
  if (rows > 0) {
    // Not from the arena: a replayed graph leaves the arena's host-side offsets untouched.
    Tensor device_ids(argmax_device_.data(), DType::I32, {rows}, l.logits.device);
    ops::argmax(l.logits, device_ids);
  }
  l.slot = next_slot_;
  next_slot_ ^= 1;
  static_cast<cuda::StepOutputs*>(step_outputs_.get())
      ->queue(l.slot, reinterpret_cast<const int32_t*>(argmax_device_.data()), rows,
              sampled_device_.data(), l.samples);
  launched_.push_back(std::move(l));
#else
  (void)feeds;
  RINGLM_FAIL("Runner::launch: ", device_name(model_.device()), " without the CUDA backend");
#endif
}

Runner::Selected Runner::collect() {
  RINGLM_CHECK(!launched_.empty(), "Runner::collect: no launched step");
  Launched l = std::move(launched_.front());
  launched_.pop_front();
  Selected out;
  if (model_.device() == Device::CPU) {
    if (config_.emulate_device_outputs) {
      emulate_device_step(l, out);
    } else {
      out.logits = forward(*l.plan);
    }
    return out;
  }
#ifdef RINGLM_HAS_CUDA
  const cuda::StepOutputs::View ids =
      static_cast<cuda::StepOutputs*>(step_outputs_.get())->wait(l.slot);
  out.argmax.assign(ids.argmax.begin(), ids.argmax.end());
  out.sampled.assign(ids.sampled.begin(), ids.sampled.end());
  out.sampled_logprobs.assign(ids.logprobs.begin(), ids.logprobs.end());
  const int64_t rows = l.logits.size(0), vocab = l.logits.size(1);
  logits_.resize(static_cast<size_t>(rows * vocab));
  out.logits = Tensor(logits_.data(), DType::F32, {rows, vocab});
  // The asked rows, one copy per run of consecutive ones (no step launched after this one:
  // launch() refuses while a step with host rows is out).
  const size_t row_bytes = static_cast<size_t>(vocab) * sizeof(float);
  for (int64_t r = 0; r < rows;) {
    if (l.host_rows[static_cast<size_t>(r)] == 0) {
      ++r;
      continue;
    }
    int64_t end = r + 1;
    while (end < rows && l.host_rows[static_cast<size_t>(end)] != 0) ++end;
    copy_bytes(logits_.data() + r * vocab, Device::CPU, l.logits.row<float>(r), l.logits.device,
               static_cast<size_t>(end - r) * row_bytes);
    r = end;
  }
#endif
  return out;
}

void Runner::emulate_device_step(Launched& l, Selected& out) {
  for (const Feed& f : l.feeds) {
    const bool sampled = f.source >= kFedSample;
    const auto i = static_cast<size_t>(sampled ? f.source - kFedSample : f.source);
    const std::vector<int32_t>& ids = sampled ? emulated_sampled_ : emulated_argmax_;
    RINGLM_CHECK(i < ids.size(), "Runner: feed from id ", i, " of ", ids.size());
    l.plan->set_token(f.token, ids[i]);
  }
  out.logits = forward(*l.plan);
  const int64_t rows = out.logits.size(0), vocab = out.logits.size(1);
  const auto row = [&](int64_t r) {
    return std::span<const float>(out.logits.row<float>(r), static_cast<size_t>(vocab));
  };
  out.argmax.resize(static_cast<size_t>(rows));
  Tensor ids(out.argmax.data(), DType::I32, {rows});
  ops::argmax(out.logits, ids);  // as step_argmax on a CPU model
  for (const DeviceSample& s : l.device_samples) {
    SamplingParams params;
    params.temperature = s.temperature;
    params.top_p = s.top_p;
    params.min_p = s.min_p;
    params.top_k = s.top_k;
    params.want_logprobs = s.want_logprob;
    const TokenInfo info = sample_processed(row(s.row), params, s.u);
    out.sampled.push_back(info.token);
    out.sampled_logprobs.push_back(info.logprob);
  }
  emulated_argmax_ = out.argmax;
  emulated_sampled_ = out.sampled;
}

void Runner::abandon_launched() {
#ifdef RINGLM_HAS_CUDA
  if (model_.device() != Device::CPU && !launched_.empty()) {
    try {
      cuda::synchronize();
    } catch (const std::exception& e) {
      RINGLM_LOG(Warn, "runner: abandoned steps: ", e.what());
    }
  }
#endif
  launched_.clear();
}

void Runner::queue_device_samples(const Tensor& logits, std::span<const DeviceSample> samples) {
#ifdef RINGLM_HAS_CUDA
  std::vector<cuda::SampleJob> jobs;
  jobs.reserve(samples.size());
  for (const DeviceSample& s : samples) {
    RINGLM_CHECK(s.row >= 0 && s.row < logits.size(0), "step_select: device sample of row ", s.row,
                 " of ", logits.size(0));
    jobs.push_back({static_cast<int32_t>(s.row), s.top_k, s.temperature, s.top_p, s.min_p, s.u,
                    s.want_logprob});
  }
  // Tokens then logprobs in one buffer: one copy back. Growing it frees the old buffer, which
  // waits for the device first (cudaFree), so a launched step's copy of it has landed.
  const auto J = static_cast<int64_t>(jobs.size());
  const size_t bytes = jobs.size() * (sizeof(int32_t) + sizeof(float));
  if (sampled_device_.size() < bytes) sampled_device_ = DeviceMemory(logits.device, bytes);
  Tensor tokens(sampled_device_.data(), DType::I32, {J}, logits.device);
  Tensor logprobs(sampled_device_.data() + J * static_cast<int64_t>(sizeof(int32_t)), DType::F32,
                  {J}, logits.device);
  cuda::sample(logits, jobs, tokens, &logprobs);
#else
  (void)logits;
  (void)samples;
  RINGLM_FAIL("step_select: device samples without the CUDA backend");
#endif
}

GreedyResult generate_greedy(Runner& runner, const std::vector<std::vector<int32_t>>& prompts,
                             const GreedyOptions& options) {
  RINGLM_USER_CHECK(options.max_new_tokens >= 1, "max_new_tokens must be at least 1");
  GreedyResult result;
  result.tokens.resize(prompts.size());
  const int64_t budget = runner.config().max_step_tokens;
  Scheduler scheduler(runner.cache(),
                      {budget, static_cast<int>(std::min<int64_t>(options.max_rows, budget))});
  std::vector<SeqState> seqs(prompts.size());
  for (size_t i = 0; i < prompts.size(); ++i) {
    RINGLM_USER_CHECK(!prompts[i].empty(), "prompt ", i, " is empty");
    seqs[i].order = i;
    seqs[i].tokens = prompts[i];
    seqs[i].prompt_len = static_cast<int64_t>(prompts[i].size());
    scheduler.enqueue(&seqs[i]);
    result.prompt_tokens += seqs[i].prompt_len;
  }
  while (!scheduler.idle()) {
    const ScheduledStep step = scheduler.schedule();
    if (!step.failed.empty()) {
      const size_t i = step.failed.front()->order;
      RINGLM_USER_CHECK(false, "prompt ", i, " needs ",
                        static_cast<int64_t>(prompts[i].size()) + options.max_new_tokens,
                        " tokens of KV but the cache cannot hold them");
    }
    if (step.empty()) continue;
    const auto start = std::chrono::steady_clock::now();
    kv::StepPlan plan(step.rows, runner.cache());
    const std::vector<int32_t> next = runner.step_argmax(plan);
    scheduler.complete(step);
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    bool has_prefill = false;
    for (const auto& row : step.rows) has_prefill |= row.tokens.size() > 1 || !row.want_logits;
    (has_prefill ? result.prefill_seconds : result.decode_seconds) += seconds;
    ++result.steps;
    // Finished rows leave and free their KV at once.
    for (size_t r = 0; r < step.rows.size(); ++r) {
      if (plan.logits_count(static_cast<int>(r)) == 0) continue;
      SeqState* seq = step.seqs[r];
      const int32_t token = next[static_cast<size_t>(plan.logits_begin(static_cast<int>(r)))];
      auto& out = result.tokens[seq->order];
      out.push_back(token);
      seq->tokens.push_back(token);
      ++result.generated_tokens;
      if (options.on_token) options.on_token(seq->order, token);
      const bool stop = std::find(options.stop_token_ids.begin(), options.stop_token_ids.end(),
                                  token) != options.stop_token_ids.end();
      if (stop || static_cast<int64_t>(out.size()) >= options.max_new_tokens) scheduler.remove(seq);
    }
  }
  return result;
}

}  // namespace ringlm::engine
