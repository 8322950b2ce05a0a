#include "cli/common.h"

#include <cstdlib>
#include <filesystem>

#include "core/device_memory.h"
#include "core/thread_pool.h"

namespace ringlm::cli {

void apply_threads(const Args& args) {
  const int64_t threads = args.integer("threads", 0);
  RINGLM_USER_CHECK(threads >= 0 && threads <= 1024, "--threads must be between 0 and 1024");
  if (threads > 0) ThreadPool::set_global_threads(static_cast<int>(threads));
}

engine::RunnerConfig runner_config(const Args& args) {
  engine::RunnerConfig config;
  const int64_t mib = args.integer("kv-memory", static_cast<int64_t>(config.kv_memory_bytes >> 20));
  RINGLM_USER_CHECK(mib >= 1, "--kv-memory must be at least 1 (MiB)");
  config.kv_memory_bytes = static_cast<size_t>(mib) << 20;
  // Without --kv-memory a GPU model's KV budget is what --gpu-memory-utilization of the GPU
  // leaves after the weights and buffers (engine::auto_kv_budget); the CPU keeps 512 MiB.
  config.kv_memory_auto = !args.has("kv-memory");
  config.gpu_memory_utilization =
      args.number("gpu-memory-utilization", config.gpu_memory_utilization);  // Runner checks it
  config.max_step_tokens = args.integer("max-step-tokens", config.max_step_tokens);
  RINGLM_USER_CHECK(config.max_step_tokens >= 1, "--max-step-tokens must be at least 1");
  // Without --kv-format, K/V are stored in the checkpoint's dtype; --kv-format sets every layer;
  // otherwise --kv-config FILE or the model's kv_config.json (if any) gives per-layer formats.
  config.kv_format_auto = !args.has("kv-format");
  if (args.has("kv-format")) {
    config.kv_format = kv::KvFormat::parse(args.str("kv-format"));
  } else if (args.has("kv-config")) {
    config.kv_formats = kv::load_kv_config(args.str("kv-config"));
  } else if (args.has("model") && std::filesystem::exists(args.str("model") + "/kv_config.json")) {
    config.kv_formats = kv::load_kv_config(args.str("model") + "/kv_config.json");
  }
  // The precision transition: bf16 K/V for the queries before position S, quantized after.
  if (args.has("kv-quant-start")) {
    const int64_t start = args.integer("kv-quant-start", -1);
    RINGLM_USER_CHECK(start >= 0 && start <= INT32_MAX,
                      "--kv-quant-start must be a position >= 0, ", "got ", start);
    config.kv_quant_start = start;
  }
  const int64_t max_kv = args.integer("max-kv-size", 0);
  const int64_t keep = args.integer("kv-keep", config.kv_keep);
  RINGLM_USER_CHECK(max_kv >= 0 && max_kv <= INT32_MAX, "--max-kv-size must be >= 0");
  RINGLM_USER_CHECK(keep >= 0 && keep <= INT32_MAX, "--kv-keep must be >= 0");
  RINGLM_USER_CHECK(max_kv == 0 || max_kv > keep, "--max-kv-size ", max_kv,
                    " must exceed --kv-keep ", keep);
  config.max_kv_size = static_cast<int>(max_kv);
  config.kv_keep = static_cast<int>(keep);
  return config;
}

Device device_flag(const Args& args) {
  const Device device = args.has("device") ? parse_device(args.str("device")) : Device::CPU;
  check_device_usable(device);
  return device;
}

bool overlap_steps(const Args& args) {
  const char* env = std::getenv("RINGLM_OVERLAP_STEPS");
  return !args.has("no-overlap-steps") && !(env != nullptr && std::string(env) == "0");
}

std::vector<std::vector<int32_t>> parse_prompts(const std::string& text, int64_t vocab_size) {
  std::vector<std::vector<int32_t>> prompts;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t semi = text.find(';', start);
    const std::string part =
        text.substr(start, semi == std::string::npos ? std::string::npos : semi - start);
    std::string flag = "--prompt-tokens=" + part;
    char* argv[] = {flag.data()};
    Args one(1, argv, {"prompt-tokens"});
    std::vector<int32_t> ids = one.int_list("prompt-tokens");
    for (int32_t id : ids) {
      RINGLM_USER_CHECK(id < vocab_size, "token id ", id, " is out of range (vocab_size ",
                        vocab_size, ")");
    }
    prompts.push_back(std::move(ids));
    if (semi == std::string::npos) break;
    start = semi + 1;
  }
  return prompts;
}

}  // namespace ringlm::cli
