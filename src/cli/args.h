// Command-line flags: `--name value`, `--name=value` and boolean `--name`. Unknown flags and
// malformed values are errors that name the flag.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

namespace ringlm::cli {

class Args {
 public:
  // `known` lists accepted flag names (without dashes); `booleans` those that take no value (also
  // accepted without being in `known`; --flag=false is the same as leaving it out).
  Args(int argc, char** argv, const std::set<std::string>& known,
       const std::set<std::string>& booleans = {});

  bool has(const std::string& name) const { return values_.count(name) != 0; }
  std::string str(const std::string& name, const std::string& fallback = "") const;
  std::string required(const std::string& name) const;
  int64_t integer(const std::string& name, int64_t fallback) const;
  double number(const std::string& name, double fallback) const;
  // Comma-separated integers ("1,2,3").
  std::vector<int32_t> int_list(const std::string& name) const;
  const std::vector<std::string>& positional() const { return positional_; }

 private:
  std::map<std::string, std::string> values_;
  std::vector<std::string> positional_;
};

}  // namespace ringlm::cli
