// Golden test: every real chat template in tests/fixtures/chat_templates renders every conversation
// of conversations.json byte-identically to jinja2 (expected/*.json, made by
// tools/golden/render_templates.py with Debian's python3-jinja2), or raises where jinja2 raises.
#include <gtest/gtest.h>

#include <ctime>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <sstream>

#include "tokenizer/jinja/chat_template.h"

namespace ringlm::jinja {
namespace {

namespace fs = std::filesystem;
using ojson = nlohmann::ordered_json;

const fs::path kDir = fs::path(RINGLM_FIXTURES_DIR) / "chat_templates";

std::string read_file(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

ojson read_json(const fs::path& p) {
  return ojson::parse(read_file(p));
}

// The golden script pins strftime_now to this local wall-clock time.
std::chrono::system_clock::time_point fixed_now(const std::string& iso) {
  std::tm tm{};
  std::istringstream in(iso);
  in >> std::get_time(&tm, "%Y-%m-%dT%H:%M:%S");
  tm.tm_isdst = -1;
  return std::chrono::system_clock::from_time_t(std::mktime(&tm));
}

std::vector<std::string> template_names() {
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(kDir / "expected"))
    if (e.path().extension() == ".json") names.push_back(e.path().stem().string());
  std::sort(names.begin(), names.end());
  return names;
}

class ChatTemplateGolden : public ::testing::TestWithParam<std::string> {};

TEST_P(ChatTemplateGolden, MatchesJinja2) {
  const std::string name = GetParam();
  ojson expected = read_json(kDir / "expected" / (name + ".json"));
  ojson cases = read_json(kDir / "conversations.json");
  Template tmpl = Template::parse(read_file(kDir / expected["template"].get<std::string>()));
  int rendered = 0, raised = 0;
  for (const auto& c : cases) {
    const std::string case_name = c["name"];
    SCOPED_TRACE(name + " / " + case_name);
    ChatTemplateInputs in;
    in.messages = c["messages"];
    if (c.contains("tools")) in.tools = c["tools"];
    if (c.contains("documents")) in.documents = c["documents"];
    in.add_generation_prompt = c.value("add_generation_prompt", false);
    in.continue_final_message = c.value("continue_final_message", false);
    in.special_tokens = expected["special_tokens"];
    if (c.contains("extra")) in.extra = c["extra"];
    in.options.now = fixed_now(expected["fixed_now"]);
    const ojson& want = expected["results"][case_name];
    if (want.contains("output")) {
      std::string got;
      ASSERT_NO_THROW(got = render_chat(tmpl, in));
      EXPECT_EQ(got, want["output"].get<std::string>());
      ++rendered;
    } else {
      EXPECT_THROW(render_chat(tmpl, in), ringlm::Error) << "jinja2 raised " << want["error"];
      ++raised;
    }
  }
  EXPECT_GE(rendered, 10) << "each template needs at least 10 rendered conversations";
  std::cout << "[ " << name << " ] " << rendered << " byte-identical, " << raised
            << " raise in both\n";
}

INSTANTIATE_TEST_SUITE_P(Templates, ChatTemplateGolden, ::testing::ValuesIn(template_names()),
                         [](const ::testing::TestParamInfo<std::string>& p) { return p.param; });

}  // namespace
}  // namespace ringlm::jinja
