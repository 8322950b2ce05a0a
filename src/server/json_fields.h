// Typed reads of request-body fields: absent or null gives the fallback, a wrong type is a 400
// naming the field.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

namespace ringlm::server {

using Json = nlohmann::ordered_json;

// Parses a request body; malformed JSON or a non-object is a 400.
Json parse_body(const std::string& body);

// The field, or nullptr when absent or null.
const Json* field(const Json& body, const char* name);
std::optional<double> number_field(const Json& body, const char* name);
std::optional<int64_t> integer_field(const Json& body, const char* name);
std::optional<bool> bool_field(const Json& body, const char* name);
std::optional<std::string> string_field(const Json& body, const char* name);

// Unique ids: "<prefix><24 random alphanumerics>".
std::string random_id(const std::string& prefix, int length = 24);

// JSON text that never throws on invalid UTF-8 (replaced by U+FFFD).
std::string dump(const Json& value);

}  // namespace ringlm::server
