// cli::Args, the flag parser of every subcommand: value flags, boolean flags (listed only as
// booleans too: `ringlm serve --no-prefix-cache` was refused as unknown when serve listed it only
// there), --flag=false, and the errors.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "cli/args.h"
#include "core/error.h"

namespace ringlm::cli {
namespace {

Args parse(std::vector<std::string> words, const std::set<std::string>& known,
           const std::set<std::string>& booleans) {
  std::vector<char*> argv;
  for (std::string& w : words) argv.push_back(w.data());
  return Args(static_cast<int>(argv.size()), argv.data(), known, booleans);
}

TEST(Args, ValuesBooleansAndPositionals) {
  const Args a = parse({"model_dir", "--port", "8080", "--host=0.0.0.0", "--no-prefix-cache"},
                       {"port", "host"}, {"no-prefix-cache"});
  EXPECT_EQ(a.positional(), std::vector<std::string>{"model_dir"});
  EXPECT_EQ(a.integer("port", 0), 8080);
  EXPECT_EQ(a.str("host"), "0.0.0.0");
  EXPECT_TRUE(a.has("no-prefix-cache"));
  EXPECT_FALSE(a.has("missing"));
}

TEST(Args, BooleanEqualsFalseIsAbsent) {
  EXPECT_FALSE(parse({"--json=false"}, {}, {"json"}).has("json"));
  EXPECT_TRUE(parse({"--json=true"}, {}, {"json"}).has("json"));
  EXPECT_FALSE(parse({"--json", "--json=false"}, {}, {"json"}).has("json"));
}

TEST(Args, BadFlagsAreClearErrors) {
  EXPECT_THROW(parse({"--nope"}, {"port"}, {"json"}), Error);
  EXPECT_THROW(parse({"--json=maybe"}, {}, {"json"}), Error);
  EXPECT_THROW(parse({"--port"}, {"port"}, {}), Error);
}

}  // namespace
}  // namespace ringlm::cli
