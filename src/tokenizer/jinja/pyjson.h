// Python's json.dumps over interpreter values: what transformers' `tojson` filter produces
// (json.dumps(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False) by default).
#pragma once

#include <optional>
#include <string>

#include "tokenizer/jinja/value.h"

namespace ringlm::jinja {

struct JsonDumpOptions {
  bool ensure_ascii = false;
  std::optional<std::string> indent;          // nullopt: one line; else the per-level indent string
  std::optional<std::string> item_separator;  // defaults: ", " (no indent) or "," (indent)
  std::string key_separator = ": ";
  bool sort_keys = false;
  size_t max_bytes = 64u << 20;
};

// Throws TypeError for values JSON cannot represent (Undefined, callables, namespaces, ...).
std::string json_dumps(const Value& v, const JsonDumpOptions& opt);

}  // namespace ringlm::jinja
