#include "server/metrics.h"

#include <cstdio>

namespace ringlm::server {

namespace {

std::string number(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.12g", v);
  return buf;
}

void metric(std::string& out, const char* name, const char* type, const char* help, double value) {
  out += std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " " + type + "\n" +
         name + " " + number(value) + "\n";
}

}  // namespace

Histogram::Histogram(std::vector<double> upper_bounds)
    : bounds_(std::move(upper_bounds)), counts_(bounds_.size() + 1, 0) {}

void Histogram::observe(double value) {
  size_t i = 0;
  while (i < bounds_.size() && value > bounds_[i]) ++i;
  ++counts_[i];
  sum_ += value;
  ++count_;
}

void Histogram::render(const std::string& name, std::string& out) const {
  uint64_t cumulative = 0;
  for (size_t i = 0; i < bounds_.size(); ++i) {
    cumulative += counts_[i];
    out += name + "_bucket{le=\"" + number(bounds_[i]) + "\"} " + std::to_string(cumulative) + "\n";
  }
  out += name + "_bucket{le=\"+Inf\"} " + std::to_string(count_) + "\n";
  out += name + "_sum " + number(sum_) + "\n";
  out += name + "_count " + std::to_string(count_) + "\n";
}

Metrics::Metrics()
    : ttft_({0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60}),
      inter_token_({0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5}) {}

void Metrics::count_request(int status) {
  std::lock_guard<std::mutex> lock(mutex_);
  ++requests_by_status_[status];
}

void Metrics::count_client_disconnect() {
  std::lock_guard<std::mutex> lock(mutex_);
  ++client_disconnects_;
}

void Metrics::observe_ttft(double seconds) {
  std::lock_guard<std::mutex> lock(mutex_);
  ttft_.observe(seconds);
}

void Metrics::observe_inter_token(double seconds) {
  std::lock_guard<std::mutex> lock(mutex_);
  inter_token_.observe(seconds);
}

std::string Metrics::render(const engine::EngineStats& s) const {
  std::string out;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    out +=
        "# HELP ringlm_requests_total HTTP requests answered, by status code.\n"
        "# TYPE ringlm_requests_total counter\n";
    for (const auto& [status, count] : requests_by_status_)
      out += "ringlm_requests_total{status=\"" + std::to_string(status) + "\"} " +
             std::to_string(count) + "\n";
    metric(out, "ringlm_client_disconnects_total", "counter",
           "Streams whose client left before the end; their requests were cancelled.",
           static_cast<double>(client_disconnects_));
    out +=
        "# HELP ringlm_time_to_first_token_seconds Time from request arrival to its first "
        "token.\n# TYPE ringlm_time_to_first_token_seconds histogram\n";
    ttft_.render("ringlm_time_to_first_token_seconds", out);
    out +=
        "# HELP ringlm_inter_token_latency_seconds Time between a choice's successive token "
        "events, divided by the tokens they carry.\n"
        "# TYPE ringlm_inter_token_latency_seconds histogram\n";
    inter_token_.render("ringlm_inter_token_latency_seconds", out);
  }
  const auto d = [](int64_t v) { return static_cast<double>(v); };
  metric(out, "ringlm_prompt_tokens_total", "counter", "Prompt tokens processed.",
         d(s.prompt_tokens_total));
  metric(out, "ringlm_generation_tokens_total", "counter", "Tokens generated.",
         d(s.generation_tokens_total));
  metric(out, "ringlm_requests_finished_total", "counter", "Engine requests finished.",
         d(s.requests_finished_total));
  metric(out, "ringlm_requests_waiting", "gauge", "Requests queued.", d(s.requests_waiting));
  metric(out, "ringlm_requests_running", "gauge", "Requests running.", d(s.requests_running));
  metric(out, "ringlm_kv_blocks_used", "gauge", "KV blocks held by running requests.",
         d(s.kv_blocks_used));
  metric(out, "ringlm_kv_blocks_free", "gauge", "KV blocks free.", d(s.kv_blocks_free));
  metric(out, "ringlm_kv_blocks_cached", "gauge", "KV blocks held only by the prefix cache.",
         d(s.kv_blocks_cached));
  metric(out, "ringlm_prefix_cache_hits_total", "counter", "Prefix cache hits.",
         d(s.prefix_cache_hits));
  metric(out, "ringlm_prefix_cache_queries_total", "counter", "Prefix cache lookups.",
         d(s.prefix_cache_queries));
  metric(out, "ringlm_preemptions_total", "counter", "Requests preempted for KV room.",
         d(s.preemptions_total));
  metric(out, "ringlm_engine_steps_total", "counter", "Engine steps launched.", d(s.steps_total));
  metric(out, "ringlm_engine_step_wait_seconds_total", "counter",
         "Engine thread time waiting for launched steps' results.", s.step_wait_seconds_total);
  metric(out, "ringlm_engine_host_seconds_total", "counter",
         "Engine thread time on host work between steps (scheduling, sampling, stops, events).",
         s.host_seconds_total);
  return out;
}

}  // namespace ringlm::server
