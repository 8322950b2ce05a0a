// `ringlm serve MODEL_DIR`: the OpenAI/Anthropic-compatible HTTP server. SIGINT/SIGTERM stop
// it gracefully: new requests get 503, in-flight ones finish, then it exits 0.
#include <pthread.h>

#include <csignal>
#include <cstdio>
#include <filesystem>
#include <thread>

#include "cli/args.h"
#include "cli/commands.h"
#include "cli/common.h"
#include "cli/text_io.h"
#include "engine/engine.h"
#include "server/http_server.h"

namespace ringlm::cli {

namespace {

std::string default_model_name(const std::string& dir) {
  std::filesystem::path p(dir);
  while (!p.empty() && p.filename().empty()) p = p.parent_path();  // "dir/" -> "dir"
  return p.filename().string().empty() ? dir : p.filename().string();
}

}  // namespace

int run_serve(int argc, char** argv) {
  // Signals go to one waiting thread, not to whichever thread they hit: block them before any
  // thread (compute pool, engine, HTTP pool) starts so that every thread inherits the mask.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  std::signal(SIGPIPE, SIG_IGN);  // a client that hangs up is a failed write, not a crash

  Args args(argc, argv,
            {"host",
             "port",
             "api-key",
             "max-batch",
             "max-num-tokens-per-step",
             "max-step-tokens",
             "kv-memory",
             "gpu-memory-utilization",
             "kv-quant",
             "kv-format",
             "kv-quant-start",
             "max-kv-size",
             "kv-keep",
             "prompt-cache-bytes",
             "max-model-len",
             "served-model-name",
             "threads",
             "http-threads",
             "max-body-bytes",
             "model",
             "device",
             "kv-config"},
            {"no-prefix-cache", "no-device-sampling", "no-overlap-steps"});
  RINGLM_USER_CHECK(args.positional().size() + (args.has("model") ? 1 : 0) == 1,
                    "usage: ringlm serve MODEL_DIR [flags]");
  const std::string dir = args.has("model") ? args.str("model") : args.positional()[0];
  apply_threads(args);

  const Device device = device_flag(args);
  engine::EngineConfig config;
  config.runner = runner_config(args);
  // On a GPU, vLLM's serving defaults: 256 rows and 2,048 tokens per step (a step of 64 rows or
  // of a 512-token prefill chunk leaves most of an 8B model's weight reads unshared).
  const bool gpu = device != Device::CPU;
  if (gpu && !args.has("max-step-tokens")) config.runner.max_step_tokens = 2048;
  if (gpu) config.max_batch = 256;
  if (args.has("kv-quant")) {
    config.runner.kv_format = kv::KvFormat::parse(args.str("kv-quant"));
    config.runner.kv_format_auto = false;
  }
  if (args.has("max-num-tokens-per-step")) {
    config.runner.max_step_tokens = args.integer("max-num-tokens-per-step", 0);
    RINGLM_USER_CHECK(config.runner.max_step_tokens >= 1,
                      "--max-num-tokens-per-step must be at least 1");
  }
  const int64_t max_batch = args.integer("max-batch", config.max_batch);
  RINGLM_USER_CHECK(max_batch >= 1 && max_batch <= 4096, "--max-batch must be in [1, 4096]");
  config.max_batch = static_cast<int>(max_batch);
  config.runner.max_sequences = config.max_batch;
  config.max_model_len = args.integer("max-model-len", 0);
  RINGLM_USER_CHECK(config.max_model_len >= 0, "--max-model-len must be >= 0");
  const int64_t cache_bytes = args.integer("prompt-cache-bytes", 0);
  RINGLM_USER_CHECK(cache_bytes >= 0, "--prompt-cache-bytes must be >= 0");
  config.prompt_cache_bytes = static_cast<size_t>(cache_bytes);
  config.enable_prefix_cache = !args.has("no-prefix-cache");
  // GPU: sampled choices take their tokens from the device sampler unless this says the host.
  config.runner.device_sampling = !args.has("no-device-sampling");
  // The next step is queued before the last one's tokens reach the host (EngineConfig).
  config.overlap_steps = overlap_steps(args);

  server::ServerConfig http;
  http.host = args.str("host", http.host);
  const int64_t port = args.integer("port", http.port);
  RINGLM_USER_CHECK(port >= 0 && port <= 65535, "--port must be in [0, 65535]");
  http.port = static_cast<int>(port);
  http.api_key = args.str("api-key", "");
  http.model_name = args.str("served-model-name", default_model_name(dir));
  const int64_t http_threads = args.integer("http-threads", http.http_threads);
  RINGLM_USER_CHECK(http_threads >= 1 && http_threads <= 4096,
                    "--http-threads must be in [1, 4096]");
  http.http_threads = static_cast<int>(http_threads);
  const int64_t body = args.integer("max-body-bytes", static_cast<int64_t>(http.max_body_bytes));
  RINGLM_USER_CHECK(body >= 1024, "--max-body-bytes must be at least 1024");
  http.max_body_bytes = static_cast<size_t>(body);

  auto model = models::load_model(dir, device);
  const Tokenizer tokenizer = Tokenizer::load(dir);
  config.eos_token_ids = stop_tokens(dir, tokenizer);  // generation_config.json's as well
  engine::Engine engine(*model, tokenizer, config);
  server::HttpServer server(engine, http);
  const int bound = server.bind();
  std::fprintf(stderr, "ringlm serve: %s on http://%s:%d (max_model_len %lld)\n",
               http.model_name.c_str(), http.host.c_str(), bound,
               static_cast<long long>(engine.max_model_len()));
  std::printf("listening on http://%s:%d\n", http.host.c_str(), bound);
  std::fflush(stdout);

  std::thread stopper([&] {
    int signal = 0;
    sigwait(&stop_signals, &signal);
    std::fprintf(stderr, "ringlm serve: signal %d, draining\n", signal);
    server.shutdown();
  });
  server.serve();
  stopper.join();
  std::fprintf(stderr, "ringlm serve: stopped\n");
  return 0;
}

}  // namespace ringlm::cli
