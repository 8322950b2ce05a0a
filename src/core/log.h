// Minimal leveled logging to stderr. RINGLM_LOG level from the environment (debug|info|warn|error).
#pragma once

#include <string>

#include "core/error.h"

namespace ringlm {

enum class LogLevel { Debug = 0, Info = 1, Warn = 2, Error = 3 };

LogLevel log_level();
void set_log_level(LogLevel level);
void log_message(LogLevel level, const std::string& message);

}  // namespace ringlm

#define RINGLM_LOG(level, ...)                                                                 \
  do {                                                                                         \
    if (::ringlm::LogLevel::level >= ::ringlm::log_level())                                    \
      ::ringlm::log_message(::ringlm::LogLevel::level, ::ringlm::detail::concat(__VA_ARGS__)); \
  } while (0)
