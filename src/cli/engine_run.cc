#include "cli/engine_run.h"

#include <condition_variable>
#include <mutex>

namespace ringlm::cli {

const std::vector<std::string>& sampling_flags() {
  static const std::vector<std::string> flags = {"temperature", "top-p", "top-k", "min-p", "seed"};
  return flags;
}

engine::SamplingParams sampling_params(const Args& args, float temperature) {
  engine::SamplingParams s;
  s.temperature = static_cast<float>(args.number("temperature", temperature));
  s.top_p = static_cast<float>(args.number("top-p", 1.0));
  s.top_k = static_cast<int>(args.integer("top-k", 0));
  s.min_p = static_cast<float>(args.number("min-p", 0.0));
  if (args.has("seed")) s.seed = static_cast<uint64_t>(args.integer("seed", 0));
  return s;
}

engine::Usage run_to_completion(engine::Engine& engine, engine::Request request,
                                std::function<void(const engine::Event&)> on_event) {
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  engine::Usage usage;
  engine::RequestCallbacks callbacks;
  callbacks.on_event = std::move(on_event);
  callbacks.on_done = [&](const engine::Usage& u) {
    std::lock_guard lock(mu);
    usage = u;
    done = true;
    cv.notify_all();
  };
  engine.submit(std::move(request), std::move(callbacks));
  std::unique_lock lock(mu);
  cv.wait(lock, [&] { return done; });
  return usage;
}

}  // namespace ringlm::cli
