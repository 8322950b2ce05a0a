#include "server/api_error.h"

#include <nlohmann/json.hpp>

namespace ringlm::server {

void bad_request(const std::string& param, const std::string& message) {
  throw ApiError(400, "invalid_request_error", message, param);
}

std::string openai_error_body(const ApiError& error) {
  nlohmann::ordered_json e;
  e["message"] = error.what();
  e["type"] = error.type();
  e["param"] =
      error.param().empty() ? nlohmann::ordered_json() : nlohmann::ordered_json(error.param());
  e["code"] = error.status();
  nlohmann::ordered_json body;
  body["error"] = e;
  return body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::string anthropic_error_type(int status) {
  switch (status) {
    case 400:
    case 405:
      return "invalid_request_error";
    case 401:
      return "authentication_error";
    case 404:
      return "not_found_error";
    case 413:
      return "request_too_large";
    case 503:
      return "overloaded_error";
    default:
      return "api_error";
  }
}

std::string anthropic_error_body(const ApiError& error) {
  nlohmann::ordered_json body;
  body["type"] = "error";
  body["error"] = {{"type", anthropic_error_type(error.status())}, {"message", error.what()}};
  return body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace ringlm::server
