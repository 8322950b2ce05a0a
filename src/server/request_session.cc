#include "server/request_session.h"

namespace ringlm::server {

RequestSession::RequestSession(int choices, Metrics& metrics)
    : metrics_(metrics),
      last_token_(static_cast<size_t>(choices), arrival_),
      got_token_(static_cast<size_t>(choices), false) {}

engine::RequestCallbacks RequestSession::callbacks() {
  auto self = shared_from_this();
  engine::RequestCallbacks cb;
  cb.on_event = [self](const engine::Event& e) { self->on_event(e); };
  cb.on_done = [self](const engine::Usage& u) { self->on_done(u); };
  return cb;
}

void RequestSession::on_event(const engine::Event& event) {
  const auto now = Clock::now();
  const auto choice = static_cast<size_t>(event.choice);
  if (!event.tokens.empty() && choice < last_token_.size()) {
    const double since = std::chrono::duration<double>(now - last_token_[choice]).count();
    if (!got_token_[choice]) {
      if (choice == 0) metrics_.observe_ttft(since);
      got_token_[choice] = true;
    } else {
      const double per_token = since / static_cast<double>(event.tokens.size());
      for (size_t i = 0; i < event.tokens.size(); ++i) metrics_.observe_inter_token(per_token);
    }
    last_token_[choice] = now;
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    events_.push_back(event);
  }
  cv_.notify_all();
}

void RequestSession::on_done(const engine::Usage& usage) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    usage_ = usage;
    done_ = true;
  }
  cv_.notify_all();
}

bool RequestSession::wait(std::chrono::milliseconds timeout, std::vector<engine::Event>& out) {
  std::unique_lock<std::mutex> lock(mutex_);
  cv_.wait_for(lock, timeout, [&] { return done_ || !events_.empty(); });
  while (!events_.empty()) {
    out.push_back(std::move(events_.front()));
    events_.pop_front();
  }
  return done_;
}

}  // namespace ringlm::server
