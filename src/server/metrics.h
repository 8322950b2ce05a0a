// Prometheus text exposition for GET /metrics: request counts by HTTP status, TTFT and
// inter-token latency histograms (measured at the server, per streamed event), and the
// engine's gauges and counters (queue, running, KV blocks, prefix cache, tokens).
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "engine/engine.h"

namespace ringlm::server {

class Histogram {
 public:
  explicit Histogram(std::vector<double> upper_bounds);
  void observe(double value);
  // Appends `name`_bucket/_sum/_count lines.
  void render(const std::string& name, std::string& out) const;

 private:
  std::vector<double> bounds_;
  std::vector<uint64_t> counts_;  // per bucket (not cumulative); last = +Inf
  double sum_ = 0;
  uint64_t count_ = 0;
};

class Metrics {
 public:
  Metrics();
  void count_request(int status);
  void count_client_disconnect();  // a stream whose client left: its request was cancelled
  void observe_ttft(double seconds);
  void observe_inter_token(double seconds);
  std::string render(const engine::EngineStats& stats) const;

 private:
  mutable std::mutex mutex_;
  std::map<int, uint64_t> requests_by_status_;
  uint64_t client_disconnects_ = 0;
  Histogram ttft_;
  Histogram inter_token_;
};

}  // namespace ringlm::server
