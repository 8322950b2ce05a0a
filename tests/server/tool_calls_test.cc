// Tool-call parsers on the exact text each family's chat template writes for an assistant turn
// with tool calls (the template is the spec of what the model was trained to emit).
#include "server/tool_calls.h"

#include <fstream>
#include <sstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tokenizer/jinja/chat_template.h"

namespace ringlm::server {
namespace {

using Json = nlohmann::ordered_json;

std::string read_template(const std::string& name) {
  std::ifstream f(std::string(RINGLM_FIXTURES_DIR) + "/chat_templates/" + name);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// The template's rendering of [user, assistant(tool_calls)], cut to the assistant's output:
// from the family's first output character to (not including) `end_of_turn`.
std::string rendered_call(const std::string& tmpl, const std::string& start,
                          const std::string& end_of_turn, const Json& calls,
                          const Json& special = Json::object()) {
  jinja::ChatTemplateInputs in;
  in.messages = Json::array({{{"role", "user"}, {"content", "Weather in Paris and Oslo?"}},
                             {{"role", "assistant"}, {"content", ""}, {"tool_calls", calls}}});
  in.special_tokens = special;
  const std::string text = jinja::render_chat(tmpl, in);
  const size_t b = text.find(start);
  EXPECT_NE(b, std::string::npos) << text;
  const size_t e = text.find(end_of_turn, b);
  EXPECT_NE(e, std::string::npos) << text;
  return text.substr(b, e - b);
}

Json call(const std::string& id, const std::string& name, const Json& args) {
  return {{"id", id}, {"type", "function"}, {"function", {{"name", name}, {"arguments", args}}}};
}

TEST(ToolCalls, DetectsTheFormatFromTheTemplate) {
  EXPECT_EQ(detect_tool_format(read_template("qwen2_5.jinja")), ToolFormat::Hermes);
  EXPECT_EQ(detect_tool_format(read_template("qwen3.jinja")), ToolFormat::Hermes);
  EXPECT_EQ(detect_tool_format(read_template("mistral_nemo.jinja")), ToolFormat::Mistral);
  EXPECT_EQ(detect_tool_format(read_template("mistral_v0_3.jinja")), ToolFormat::Mistral);
  EXPECT_EQ(detect_tool_format(read_template("llama3_1.jinja")), ToolFormat::Llama3Json);
  EXPECT_EQ(detect_tool_format(read_template("llama3_2.jinja")), ToolFormat::Llama3Json);
  EXPECT_EQ(detect_tool_format(read_template("gemma3.jinja")), ToolFormat::None);
}

TEST(ToolCalls, HermesTwoCallsFromTheQwenTemplate) {
  const Json calls = Json::array({call("a", "get_weather", {{"city", "Paris"}}),
                                  call("b", "get_weather", {{"city", "Oslo"}, {"days", 3}})});
  const std::string out =
      rendered_call(read_template("qwen2_5.jinja"), "<tool_call>", "<|im_end|>", calls);
  const ParsedOutput p = parse_tool_calls(ToolFormat::Hermes, out);
  ASSERT_EQ(p.calls.size(), 2u) << out;
  EXPECT_EQ(p.calls[0].name, "get_weather");
  EXPECT_EQ(Json::parse(p.calls[0].arguments), Json({{"city", "Paris"}}));
  EXPECT_EQ(Json::parse(p.calls[1].arguments), Json({{"city", "Oslo"}, {"days", 3}}));
  EXPECT_EQ(p.content, "");
  EXPECT_EQ(p.calls[0].id.rfind("call_", 0), 0u);
}

TEST(ToolCalls, HermesContentBeforeTheCallIsKept) {
  const ParsedOutput p = parse_tool_calls(
      ToolFormat::Hermes,
      "Let me check.\n<tool_call>\n{\"name\": \"f\", \"arguments\": {\"x\": 1}}\n</tool_call>");
  ASSERT_EQ(p.calls.size(), 1u);
  EXPECT_EQ(p.content, "Let me check.");
}

TEST(ToolCalls, MistralArrayFromTheNemoTemplate) {
  const Json calls = Json::array({call("abcDEF123", "get_weather", {{"city", "Paris"}})});
  const std::string out = rendered_call(read_template("mistral_nemo.jinja"), "[TOOL_CALLS]", "</s>",
                                        calls, {{"eos_token", "</s>"}, {"bos_token", "<s>"}});
  const ParsedOutput p = parse_tool_calls(ToolFormat::Mistral, out);
  ASSERT_EQ(p.calls.size(), 1u) << out;
  EXPECT_EQ(p.calls[0].name, "get_weather");
  EXPECT_EQ(Json::parse(p.calls[0].arguments), Json({{"city", "Paris"}}));
  EXPECT_EQ(p.calls[0].id.size(), 9u);  // what Mistral templates demand on the way back
}

TEST(ToolCalls, MistralSmallSpacedArrayAndV11Form) {
  const Json calls = Json::array({call("abcDEF123", "get_weather", {{"city", "Paris"}})});
  const std::string out =
      rendered_call(read_template("mistral_small_3_1.jinja"), "[TOOL_CALLS]", "</s>", calls,
                    {{"eos_token", "</s>"}, {"bos_token", "<s>"}});
  ParsedOutput p = parse_tool_calls(ToolFormat::Mistral, out);
  ASSERT_EQ(p.calls.size(), 1u) << out;
  EXPECT_EQ(Json::parse(p.calls[0].arguments), Json({{"city", "Paris"}}));
  p = parse_tool_calls(ToolFormat::Mistral,
                       "[TOOL_CALLS]get_weather[ARGS]{\"city\": \"Oslo\"}[TOOL_CALLS]now[ARGS]{}");
  ASSERT_EQ(p.calls.size(), 2u);
  EXPECT_EQ(p.calls[0].name, "get_weather");
  EXPECT_EQ(p.calls[1].name, "now");
  EXPECT_EQ(p.calls[1].arguments, "{}");
}

TEST(ToolCalls, Llama3JsonFromTheLlama31Template) {
  const Json calls = Json::array({call("x", "get_weather", {{"city", "Paris"}})});
  Json tools =
      Json::array({{{"type", "function"},
                    {"function", {{"name", "get_weather"}, {"parameters", Json::object()}}}}});
  jinja::ChatTemplateInputs in;
  in.messages = Json::array({{{"role", "user"}, {"content", "Weather?"}},
                             {{"role", "assistant"}, {"content", ""}, {"tool_calls", calls}}});
  in.tools = tools;
  in.special_tokens = {{"bos_token", "<|begin_of_text|>"}};
  const std::string text = jinja::render_chat(read_template("llama3_1.jinja"), in);
  const std::string header = "<|start_header_id|>assistant<|end_header_id|>\n\n";
  const size_t b = text.rfind(header) + header.size();
  const std::string out = text.substr(b, text.find("<|eot_id|>", b) - b);
  ParsedOutput p = parse_tool_calls(ToolFormat::Llama3Json, out);
  ASSERT_EQ(p.calls.size(), 1u) << out;
  EXPECT_EQ(p.calls[0].name, "get_weather");
  EXPECT_EQ(Json::parse(p.calls[0].arguments), Json({{"city", "Paris"}}));
  // python_tag form and several calls separated by ';'.
  p = parse_tool_calls(ToolFormat::Llama3Json,
                       "<|python_tag|>{\"name\": \"a\", \"parameters\": {}}; {\"name\": \"b\", "
                       "\"parameters\": {\"k\": \"v;}\"}}");
  ASSERT_EQ(p.calls.size(), 2u);
  EXPECT_EQ(Json::parse(p.calls[1].arguments), Json({{"k", "v;}"}}));
}

TEST(ToolCalls, TextThatIsNotACallStaysContent) {
  for (const char* text : {"The answer is {not json}", "<tool_call>{broken</tool_call>",
                           "[TOOL_CALLS] not a call", "{\"no_name\": 1}"}) {
    for (ToolFormat f : {ToolFormat::Hermes, ToolFormat::Mistral, ToolFormat::Llama3Json}) {
      const ParsedOutput p = parse_tool_calls(f, text);
      EXPECT_TRUE(p.calls.empty()) << text;
      EXPECT_EQ(p.content, text);
    }
  }
  // Llama 3: JSON inside prose is prose.
  EXPECT_TRUE(
      parse_tool_calls(ToolFormat::Llama3Json, "Sure: {\"name\": \"f\", \"parameters\": {}}")
          .calls.empty());
}

TEST(ToolCalls, SpecialMarkerTokensArePutBack) {
  engine::Event e;
  e.text = "[{\"name\": \"f\", \"arguments\": {}}]";
  e.tokens = {{7, -0.1f, {}}};
  restore_tool_marker(e, 5, "[TOOL_CALLS]");  // another token: unchanged
  EXPECT_EQ(e.text.rfind("[{", 0), 0u);
  engine::Event m;
  m.tokens = {{5, -0.1f, {}}};  // the marker token alone: its text was skipped
  restore_tool_marker(m, 5, "[TOOL_CALLS]");
  EXPECT_EQ(m.text, "[TOOL_CALLS]");
  restore_tool_marker(m, 5, "[TOOL_CALLS]");  // already there: not twice
  EXPECT_EQ(m.text, "[TOOL_CALLS]");
  EXPECT_EQ(parse_tool_calls(ToolFormat::Mistral, m.text + e.text).calls.size(), 1u);
}

TEST(ToolCalls, StreamSplitterHoldsBackOnlyWhatMayStartACall) {
  ToolCallStreamSplitter s(ToolFormat::Hermes);
  std::string streamed;
  const std::string full =
      "Checking.\n<tool_call>\n{\"name\": \"f\", \"arguments\": {\"x\": 1}}\n</tool_call>";
  for (char c : full) streamed += s.push(std::string(1, c));  // one byte per event
  EXPECT_EQ(streamed, "Checking.\n");
  const ParsedOutput p = s.finish();
  EXPECT_EQ(p.content, "");
  ASSERT_EQ(p.calls.size(), 1u);
  EXPECT_EQ(p.calls[0].name, "f");

  // "<tool" that turns out not to be a marker is released.
  ToolCallStreamSplitter t(ToolFormat::Hermes);
  EXPECT_EQ(t.push("a <tool"), "a ");
  EXPECT_EQ(t.push("box> b"), "<toolbox> b");
  EXPECT_EQ(t.finish().content, "");

  // A held call that fails to parse comes back as content.
  ToolCallStreamSplitter u(ToolFormat::Hermes);
  EXPECT_EQ(u.push("x<tool_call>{oops"), "x");
  const ParsedOutput q = u.finish();
  EXPECT_TRUE(q.calls.empty());
  EXPECT_EQ(q.content, "<tool_call>{oops");

  // Llama 3: a leading '{' is held to the end; leading prose streams.
  ToolCallStreamSplitter l(ToolFormat::Llama3Json);
  EXPECT_EQ(l.push("  {\"name\": \"f\", "), "");
  EXPECT_EQ(l.push("\"parameters\": {}}"), "");
  EXPECT_EQ(l.finish().calls.size(), 1u);
  ToolCallStreamSplitter m(ToolFormat::Llama3Json);
  EXPECT_EQ(m.push("Hello {"), "Hello {");
}

}  // namespace
}  // namespace ringlm::server
