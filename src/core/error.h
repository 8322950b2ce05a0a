// Error handling: exceptions inside the library, each carrying the failed expression and its place.
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>

namespace ringlm {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
};

namespace detail {
[[noreturn]] void throw_error(const char* expr, const char* file, int line, const std::string& msg);

// Concatenates any streamable arguments into one message.
template <typename... Args>
std::string concat(const Args&... args) {
  std::ostringstream os;
  (os << ... << args);
  return os.str();
}
}  // namespace detail

}  // namespace ringlm

// RINGLM_CHECK(cond, "message parts", value, ...): throws ringlm::Error naming cond, file and line.
#define RINGLM_CHECK(cond, ...)                                                               \
  do {                                                                                        \
    if (!(cond)) [[unlikely]]                                                                 \
      ::ringlm::detail::throw_error(#cond, __FILE__, __LINE__,                                \
                                    ::ringlm::detail::concat("" __VA_OPT__(, ) __VA_ARGS__)); \
  } while (0)

// RINGLM_FAIL("message parts", ...): an error without a condition (an unreachable or invalid case).
#define RINGLM_FAIL(...) \
  ::ringlm::detail::throw_error(nullptr, __FILE__, __LINE__, ::ringlm::detail::concat(__VA_ARGS__))

// User-facing errors (bad files, bad flags): the message alone, no source location.
#define RINGLM_USER_CHECK(cond, ...)                                                  \
  do {                                                                                \
    if (!(cond)) [[unlikely]]                                                         \
      throw ::ringlm::Error(::ringlm::detail::concat("" __VA_OPT__(, ) __VA_ARGS__)); \
  } while (0)
