// Language-feature golden test: each snippet of tests/fixtures/chat_templates/snippets.json
// (literals, operators, whitespace control, scoping, filters, tests, methods, errors) renders
// byte-identically to python3-jinja2 in transformers' configuration, or raises where it raises.
#include <gtest/gtest.h>

#include <ctime>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "tokenizer/jinja/template.h"

namespace ringlm::jinja {
namespace {

TEST(JinjaSnippets, MatchJinja2) {
  std::ifstream f(std::filesystem::path(RINGLM_FIXTURES_DIR) / "chat_templates" / "snippets.json");
  ASSERT_TRUE(f.good());
  auto snippets = nlohmann::ordered_json::parse(f);
  RenderOptions opt;
  // strftime_now snippets: the golden script pins 2025-03-14 09:26:53 local time.
  std::tm tm{};
  tm.tm_year = 125;
  tm.tm_mon = 2;
  tm.tm_mday = 14;
  tm.tm_hour = 9;
  tm.tm_min = 26;
  tm.tm_sec = 53;
  tm.tm_isdst = -1;
  opt.now = std::chrono::system_clock::from_time_t(std::mktime(&tm));
  int rendered = 0, raised = 0;
  for (const auto& sn : snippets) {
    if (sn.contains("skip")) continue;
    const std::string src = sn["template"];
    SCOPED_TRACE(src);
    auto run = [&] { return Template::parse(src).render(sn["context"], opt); };
    if (sn.contains("output")) {
      std::string got;
      ASSERT_NO_THROW(got = run());
      EXPECT_EQ(got, sn["output"].get<std::string>());
      ++rendered;
    } else {
      EXPECT_THROW(run(), TemplateError) << "jinja2: " << sn["error"];
      ++raised;
    }
  }
  EXPECT_GT(rendered, 150);
  std::cout << "[ snippets ] " << rendered << " byte-identical, " << raised << " raise in both\n";
}

}  // namespace
}  // namespace ringlm::jinja
