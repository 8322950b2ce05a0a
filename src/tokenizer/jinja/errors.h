// Template errors. Inside the interpreter a failure throws Fault (the message only); the render and
// parse entry points turn it into TemplateError, which adds the template line.
#pragma once

#include <stdexcept>
#include <string>

#include "core/error.h"

namespace ringlm::jinja {

// What went wrong, in jinja2's own exception classes (the oracle compares that an error happens;
// the kind helps a reader map our message to Python's).
enum class ErrorKind {
  Syntax,     // TemplateSyntaxError
  Undefined,  // UndefinedError: an operation on an undefined value
  Type,       // TypeError / ValueError raised by a Python operation
  Security,   // SecurityError: a mutating method in the immutable sandbox
  Raised,     // raise_exception(msg) from the template itself
  Limit,      // our resource limits (output size, recursion, iterations)
};

class Fault : public std::runtime_error {
 public:
  Fault(ErrorKind kind, const std::string& msg) : std::runtime_error(msg), kind_(kind) {}
  ErrorKind kind() const { return kind_; }

 private:
  ErrorKind kind_;
};

[[noreturn]] inline void fail(ErrorKind kind, const std::string& msg) {
  throw Fault(kind, msg);
}
[[noreturn]] inline void type_error(const std::string& msg) {
  throw Fault(ErrorKind::Type, msg);
}

class TemplateError : public ringlm::Error {
 public:
  TemplateError(ErrorKind kind, int line, const std::string& msg)
      : ringlm::Error(format(kind, line, msg)), kind_(kind), line_(line), detail_(msg) {}
  ErrorKind kind() const { return kind_; }
  int line() const { return line_; }
  // The bare message; for ErrorKind::Raised it is exactly the template's raise_exception text.
  const std::string& detail() const { return detail_; }

 private:
  static std::string format(ErrorKind kind, int line, const std::string& msg) {
    const char* what = kind == ErrorKind::Syntax      ? "syntax error"
                       : kind == ErrorKind::Raised    ? "raise_exception"
                       : kind == ErrorKind::Undefined ? "undefined value"
                       : kind == ErrorKind::Security  ? "sandbox violation"
                       : kind == ErrorKind::Limit     ? "resource limit"
                                                      : "error";
    return "chat template " + std::string(what) + " at line " + std::to_string(line) + ": " + msg;
  }
  ErrorKind kind_;
  int line_;
  std::string detail_;
};

}  // namespace ringlm::jinja
