// Errors at the HTTP edge: a status, an error type and a message, written as OpenAI's
// {"error": {"message", "type", "param", "code"}} or Anthropic's
// {"type": "error", "error": {"type", "message"}}.
#pragma once

#include <stdexcept>
#include <string>

namespace ringlm::server {

class ApiError : public std::runtime_error {
 public:
  ApiError(int status, std::string type, const std::string& message, std::string param = "")
      : std::runtime_error(message),
        status_(status),
        type_(std::move(type)),
        param_(std::move(param)) {}
  int status() const { return status_; }
  const std::string& type() const { return type_; }
  const std::string& param() const { return param_; }  // "" = null

 private:
  int status_;
  std::string type_;
  std::string param_;
};

// A 400 invalid_request_error naming the offending field.
[[noreturn]] void bad_request(const std::string& param, const std::string& message);

std::string openai_error_body(const ApiError& error);
std::string anthropic_error_body(const ApiError& error);
// The Anthropic error type for an HTTP status (invalid_request_error, authentication_error,
// not_found_error, request_too_large, api_error, overloaded_error).
std::string anthropic_error_type(int status);

}  // namespace ringlm::server
