// Engine tests: the fixture models with the byte-level tokenizer of tests/fixtures/models/llama3
// (512 ids, like every fixture), and a collector of each request's events.
#pragma once

#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "models/golden_util.h"

namespace ringlm::testing {

inline const Tokenizer& fixture_tokenizer() {
  static const Tokenizer tokenizer = Tokenizer::load(fixture_model_dir("llama3"));
  return tokenizer;
}

struct ChoiceResult {
  std::string text;
  std::vector<engine::TokenInfo> tokens;
  engine::FinishReason finish = engine::FinishReason::None;
  std::string stop_matched;
  std::string error;
  int events_after_finish = 0;
};

struct RequestResult {
  std::vector<ChoiceResult> choices;
  engine::Usage usage;
  bool done = false;
  int done_order = -1;  // 0 for the first request to finish
};

// Submits requests and waits for them; results by submission index.
class Collector {
 public:
  explicit Collector(engine::Engine& engine) : engine_(engine) {}

  // on_token(index, choice, token count so far) runs on the engine thread after each event.
  size_t submit(engine::Request request,
                std::function<void(engine::RequestId, const engine::Event&)> hook = {}) {
    std::lock_guard lock(mu_);
    const size_t index = results_.size();
    results_.push_back(std::make_unique<RequestResult>());
    results_.back()->choices.resize(static_cast<size_t>(request.n));
    auto id = std::make_shared<engine::RequestId>(0);
    engine::RequestCallbacks cb;
    cb.on_event = [this, index, hook, id](const engine::Event& e) {
      {
        std::lock_guard l(mu_);
        ChoiceResult& c = results_[index]->choices.at(static_cast<size_t>(e.choice));
        if (c.finish != engine::FinishReason::None) ++c.events_after_finish;
        c.text += e.text;
        c.tokens.insert(c.tokens.end(), e.tokens.begin(), e.tokens.end());
        if (e.finish != engine::FinishReason::None) {
          c.finish = e.finish;
          c.stop_matched = e.stop_matched;
          c.error = e.error;
        }
      }
      if (hook) hook(*id, e);
    };
    cb.on_done = [this, index](const engine::Usage& u) {
      std::lock_guard l(mu_);
      results_[index]->usage = u;
      results_[index]->done = true;
      results_[index]->done_order = finished_++;
      done_.notify_all();
    };
    *id = engine_.submit(std::move(request), std::move(cb));
    return index;
  }

  void wait_all() {
    std::unique_lock lock(mu_);
    done_.wait(lock, [&] {
      for (const auto& r : results_)
        if (!r->done) return false;
      return true;
    });
  }

  const RequestResult& result(size_t index) {
    std::lock_guard lock(mu_);
    return *results_.at(index);
  }

 private:
  engine::Engine& engine_;
  std::mutex mu_;
  std::condition_variable done_;
  std::vector<std::unique_ptr<RequestResult>> results_;
  int finished_ = 0;
};

}  // namespace ringlm::testing
