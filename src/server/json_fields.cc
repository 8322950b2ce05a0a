#include "server/json_fields.h"

#include <cmath>
#include <mutex>
#include <random>

#include "server/api_error.h"

namespace ringlm::server {

Json parse_body(const std::string& body) {
  Json parsed;
  try {
    parsed = Json::parse(body);
  } catch (const nlohmann::json::parse_error& e) {
    bad_request("", std::string("the request body is not valid JSON: ") + e.what());
  }
  if (!parsed.is_object()) bad_request("", "the request body must be a JSON object");
  return parsed;
}

const Json* field(const Json& body, const char* name) {
  auto it = body.find(name);
  if (it == body.end() || it->is_null()) return nullptr;
  return &*it;
}

std::optional<double> number_field(const Json& body, const char* name) {
  const Json* v = field(body, name);
  if (!v) return std::nullopt;
  if (!v->is_number()) bad_request(name, std::string("'") + name + "' must be a number");
  const double d = v->get<double>();
  if (!std::isfinite(d)) bad_request(name, std::string("'") + name + "' must be finite");
  return d;
}

std::optional<int64_t> integer_field(const Json& body, const char* name) {
  const Json* v = field(body, name);
  if (!v) return std::nullopt;
  if (v->is_number_integer()) return v->get<int64_t>();
  // 3.0 is an integer in JSON's number model; 3.5 is not.
  if (v->is_number_float()) {
    const double d = v->get<double>();
    if (std::isfinite(d) && d == std::floor(d) && std::fabs(d) < 9e15)
      return static_cast<int64_t>(d);
  }
  bad_request(name, std::string("'") + name + "' must be an integer");
}

std::optional<bool> bool_field(const Json& body, const char* name) {
  const Json* v = field(body, name);
  if (!v) return std::nullopt;
  if (!v->is_boolean()) bad_request(name, std::string("'") + name + "' must be a boolean");
  return v->get<bool>();
}

std::optional<std::string> string_field(const Json& body, const char* name) {
  const Json* v = field(body, name);
  if (!v) return std::nullopt;
  if (!v->is_string()) bad_request(name, std::string("'") + name + "' must be a string");
  return v->get<std::string>();
}

std::string random_id(const std::string& prefix, int length) {
  static std::mutex mutex;
  static std::mt19937_64 rng{std::random_device{}()};
  static constexpr char kAlphabet[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
  std::string id = prefix;
  std::lock_guard<std::mutex> lock(mutex);
  for (int i = 0; i < length; ++i) id += kAlphabet[rng() % (sizeof(kAlphabet) - 1)];
  return id;
}

std::string dump(const Json& value) {
  return value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace ringlm::server
