// Typed access to tokenizer.json / tokenizer_config.json fields with errors that name the field.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "core/error.h"
#include "tokenizer/pattern.h"

namespace ringlm::tok {

using json = nlohmann::json;

inline const json& field(const json& j, const char* key, const std::string& where) {
  RINGLM_USER_CHECK(j.is_object(), where, ": expected an object");
  auto it = j.find(key);
  RINGLM_USER_CHECK(it != j.end(), where, ": missing field '", key, "'");
  return *it;
}

inline std::string get_string(const json& j, const char* key, const std::string& where) {
  const json& v = field(j, key, where);
  RINGLM_USER_CHECK(v.is_string(), where, ".", key, ": expected a string");
  return v.get<std::string>();
}

inline std::string get_string_or(const json& j, const char* key, const std::string& dflt,
                                 const std::string& where) {
  RINGLM_USER_CHECK(j.is_object(), where, ": expected an object");
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return dflt;
  RINGLM_USER_CHECK(it->is_string(), where, ".", key, ": expected a string");
  return it->get<std::string>();
}

inline bool get_bool_or(const json& j, const char* key, bool dflt, const std::string& where) {
  RINGLM_USER_CHECK(j.is_object(), where, ": expected an object");
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return dflt;
  RINGLM_USER_CHECK(it->is_boolean(), where, ".", key, ": expected a boolean");
  return it->get<bool>();
}

inline int64_t get_int_or(const json& j, const char* key, int64_t dflt, const std::string& where) {
  RINGLM_USER_CHECK(j.is_object(), where, ": expected an object");
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return dflt;
  RINGLM_USER_CHECK(it->is_number_integer(), where, ".", key, ": expected an integer");
  return it->get<int64_t>();
}

// Also bounds nesting (Sequence in Sequence ...): the path in `where` grows with depth.
inline std::string type_of(const json& j, const std::string& where) {
  RINGLM_USER_CHECK(where.size() < 1024, where.substr(0, 80), "...: components nested too deeply");
  return get_string(j, "type", where);
}

// {"String": "..."} or {"Regex": "..."} (the HF pattern encoding).
Pattern parse_pattern(const json& j, const std::string& where);

// SplitDelimiterBehavior names.
SplitBehavior parse_behavior(const json& j, const std::string& where);

}  // namespace ringlm::tok
