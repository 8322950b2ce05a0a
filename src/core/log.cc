#include "core/log.h"

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>

namespace ringlm {

namespace {
LogLevel level_from_env() {
  const char* env = std::getenv("RINGLM_LOG");
  if (env == nullptr) return LogLevel::Info;
  if (std::strcmp(env, "debug") == 0) return LogLevel::Debug;
  if (std::strcmp(env, "warn") == 0) return LogLevel::Warn;
  if (std::strcmp(env, "error") == 0) return LogLevel::Error;
  return LogLevel::Info;
}
std::atomic<int> current_level{static_cast<int>(level_from_env())};
std::mutex output_mutex;
}  // namespace

LogLevel log_level() {
  return static_cast<LogLevel>(current_level.load(std::memory_order_relaxed));
}
void set_log_level(LogLevel level) {
  current_level.store(static_cast<int>(level));
}

void log_message(LogLevel level, const std::string& message) {
  static const char* names[] = {"debug", "info", "warn", "error"};
  const auto now =
      std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
  std::lock_guard<std::mutex> lock(output_mutex);
  std::fprintf(stderr, "[%.3f %s] %s\n", now, names[static_cast<int>(level)], message.c_str());
}

}  // namespace ringlm
