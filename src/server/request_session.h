// The bridge between one HTTP request and its engine request: engine callbacks (engine thread)
// queue events; the HTTP thread waits for them and writes the response. Also measures TTFT and
// inter-token latency for /metrics.
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <vector>

#include "engine/engine.h"
#include "server/metrics.h"

namespace ringlm::server {

class RequestSession : public std::enable_shared_from_this<RequestSession> {
 public:
  using Clock = std::chrono::steady_clock;

  RequestSession(int choices, Metrics& metrics);
  // Callbacks for Engine::submit; they keep the session alive.
  engine::RequestCallbacks callbacks();

  // Waits up to `timeout` for events; moves the queued ones into `out`. Returns true once the
  // request is done and nothing is left to take (usage() is then final).
  bool wait(std::chrono::milliseconds timeout, std::vector<engine::Event>& out);
  const engine::Usage& usage() const { return usage_; }

  engine::RequestId id = 0;

 private:
  void on_event(const engine::Event& event);
  void on_done(const engine::Usage& usage);

  Metrics& metrics_;
  const Clock::time_point arrival_ = Clock::now();
  std::vector<Clock::time_point> last_token_;  // per choice; arrival until the first token
  std::vector<bool> got_token_;
  std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<engine::Event> events_;
  bool done_ = false;
  engine::Usage usage_;
};

}  // namespace ringlm::server
