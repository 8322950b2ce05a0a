// Names of jinja2 3.1's builtin filters and tests (transformers adds no others). jinja2 checks
// them when compiling, so an unknown name outside an `if` is a template error even if unused.
#pragma once

#include <algorithm>
#include <iterator>
#include <string_view>

namespace ringlm::jinja {

inline bool is_builtin_filter(std::string_view name) {
  static constexpr std::string_view kFilters[] = {
      "abs",       "attr",       "batch",       "capitalize", "center",  "count",
      "d",         "default",    "dictsort",    "e",          "escape",  "filesizeformat",
      "first",     "float",      "forceescape", "format",     "groupby", "indent",
      "int",       "join",       "last",        "length",     "list",    "lower",
      "items",     "map",        "min",         "max",        "pprint",  "random",
      "reject",    "rejectattr", "replace",     "reverse",    "round",   "safe",
      "select",    "selectattr", "slice",       "sort",       "string",  "striptags",
      "sum",       "title",      "trim",        "truncate",   "unique",  "upper",
      "urlencode", "urlize",     "wordcount",   "wordwrap",   "xmlattr", "tojson"};
  return std::find(std::begin(kFilters), std::end(kFilters), name) != std::end(kFilters);
}

inline bool is_builtin_test(std::string_view name) {
  static constexpr std::string_view kTests[] = {
      "odd",    "even",     "divisibleby", "defined",     "undefined", "filter",   "test",
      "none",   "boolean",  "false",       "true",        "integer",   "float",    "lower",
      "upper",  "string",   "mapping",     "number",      "sequence",  "iterable", "callable",
      "sameas", "escaped",  "in",          "==",          "eq",        "equalto",  "!=",
      "ne",     ">",        "gt",          "greaterthan", "ge",        ">=",       "<",
      "lt",     "lessthan", "<=",          "le"};
  return std::find(std::begin(kTests), std::end(kTests), name) != std::end(kTests);
}

}  // namespace ringlm::jinja
