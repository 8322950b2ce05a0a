#include "cli/args.h"

#include <cerrno>
#include <cstdlib>

#include "core/error.h"

namespace ringlm::cli {

Args::Args(int argc, char** argv, const std::set<std::string>& known,
           const std::set<std::string>& booleans) {
  for (int i = 0; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg.rfind("--", 0) != 0) {
      positional_.push_back(arg);
      continue;
    }
    std::string name = arg.substr(2), value;
    const size_t eq = name.find('=');
    const bool inline_value = eq != std::string::npos;
    if (inline_value) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
    }
    const bool boolean = booleans.count(name) != 0;
    RINGLM_USER_CHECK(boolean || known.count(name) != 0, "unknown flag --", name);
    if (boolean) {
      RINGLM_USER_CHECK(!inline_value || value == "true" || value == "false", "--", name,
                        " takes no value");
      if (inline_value && value == "false") {
        values_.erase(name);  // --flag=false: as if absent
      } else {
        values_[name] = "true";
      }
      continue;
    }
    if (!inline_value) {
      RINGLM_USER_CHECK(i + 1 < argc, "flag --", name, " needs a value");
      value = argv[++i];
    }
    values_[name] = value;
  }
}

std::string Args::str(const std::string& name, const std::string& fallback) const {
  auto it = values_.find(name);
  return it == values_.end() ? fallback : it->second;
}

std::string Args::required(const std::string& name) const {
  RINGLM_USER_CHECK(has(name), "missing required flag --", name);
  return str(name);
}

int64_t Args::integer(const std::string& name, int64_t fallback) const {
  if (!has(name)) return fallback;
  const std::string text = str(name);
  char* end = nullptr;
  errno = 0;
  const long long v = std::strtoll(text.c_str(), &end, 10);
  RINGLM_USER_CHECK(!text.empty() && *end == '\0' && errno == 0, "--", name,
                    " expects an integer, got '", text, "'");
  return v;
}

double Args::number(const std::string& name, double fallback) const {
  if (!has(name)) return fallback;
  const std::string text = str(name);
  char* end = nullptr;
  errno = 0;
  const double v = std::strtod(text.c_str(), &end);
  RINGLM_USER_CHECK(!text.empty() && *end == '\0' && errno == 0, "--", name,
                    " expects a number, got '", text, "'");
  return v;
}

std::vector<int32_t> Args::int_list(const std::string& name) const {
  std::vector<int32_t> out;
  const std::string text = required(name);
  size_t start = 0;
  while (start <= text.size()) {
    const size_t comma = text.find(',', start);
    const std::string item =
        text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    char* end = nullptr;
    errno = 0;
    const long v = std::strtol(item.c_str(), &end, 10);
    RINGLM_USER_CHECK(!item.empty() && *end == '\0' && errno == 0 && v >= 0 && v <= INT32_MAX, "--",
                      name, ": '", item, "' is not a token id");
    out.push_back(static_cast<int32_t>(v));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

}  // namespace ringlm::cli
