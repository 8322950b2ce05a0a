// Response bodies and SSE streams from engine events: OpenAI chat/completions, Anthropic's event
// grammar, and the Prometheus text of /metrics.
#include <gtest/gtest.h>

#include "server/anthropic.h"
#include "server/metrics.h"
#include "server/openai_format.h"
#include "server_util.h"

namespace ringlm::server {
namespace {

using test::fixture_tokenizer;

engine::Event event(int choice, const std::string& text,
                    engine::FinishReason finish = engine::FinishReason::None) {
  engine::Event e;
  e.choice = choice;
  e.text = text;
  e.tokens.push_back({65, -0.5f, {{65, -0.5f}, {66, -1.5f}}});
  e.finish = finish;
  return e;
}

// The JSON payloads of "data: " lines, [DONE] excluded.
std::vector<Json> data_lines(const std::string& sse) {
  std::vector<Json> out;
  size_t pos = 0;
  while ((pos = sse.find("data: ", pos)) != std::string::npos) {
    const size_t end = sse.find("\n\n", pos);
    const std::string payload = sse.substr(pos + 6, end - pos - 6);
    if (payload != "[DONE]") out.push_back(Json::parse(payload));
    pos = end;
  }
  return out;
}

std::vector<std::string> event_names(const std::string& sse) {
  std::vector<std::string> out;
  size_t pos = 0;
  while ((pos = sse.find("event: ", pos)) != std::string::npos) {
    const size_t end = sse.find('\n', pos);
    out.push_back(sse.substr(pos + 7, end - pos - 7));
    pos = end;
  }
  return out;
}

TEST(ServerFormat, ChatResponseWithToolCallsAndLogprobs) {
  GenerationRequest req;
  req.api = Api::Chat;
  req.parse_tools = true;
  req.logprobs = true;
  ChoiceResult c;
  c.add(event(0, "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": 1}}\n</tool_call>",
              engine::FinishReason::Stop),
        true);
  engine::Usage usage{10, 1, 4};
  const Json r = openai_response({"chatcmpl-x", 123, "m"}, req, {c}, usage, fixture_tokenizer(),
                                 ToolFormat::Hermes);
  EXPECT_EQ(r["object"], "chat.completion");
  EXPECT_EQ(r["choices"][0]["finish_reason"], "tool_calls");
  EXPECT_TRUE(r["choices"][0]["message"]["content"].is_null());
  EXPECT_EQ(r["choices"][0]["message"]["tool_calls"][0]["function"]["name"], "f");
  EXPECT_EQ(r["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"], "{\"a\":1}");
  const Json& lp = r["choices"][0]["logprobs"]["content"][0];
  EXPECT_EQ(lp["token"], "A");
  EXPECT_EQ(lp["bytes"], Json::array({65}));
  EXPECT_EQ(lp["top_logprobs"][1]["token"], "B");
  EXPECT_EQ(r["usage"]["total_tokens"], 11);
  EXPECT_EQ(r["usage"]["prompt_tokens_details"]["cached_tokens"], 4);
}

TEST(ServerFormat, ChatStreamChunks) {
  GenerationRequest req;
  req.api = Api::Chat;
  req.engine.n = 2;
  req.stream = req.include_usage = true;
  OpenAiStream s({"chatcmpl-x", 1, "m"}, req, fixture_tokenizer(), ToolFormat::Hermes);
  std::string sse = s.on_event(event(1, "Hel"));
  sse += s.on_event(event(1, "lo", engine::FinishReason::Length));
  sse += s.on_event(event(0, "", engine::FinishReason::Stop));
  sse += s.on_done({3, 3, 0});
  ASSERT_EQ(sse.substr(sse.size() - 14), "data: [DONE]\n\n");
  const auto chunks = data_lines(sse);
  ASSERT_EQ(chunks.size(), 7u) << sse;
  EXPECT_EQ(chunks[0]["choices"][0]["delta"], Json({{"role", "assistant"}, {"content", ""}}));
  EXPECT_EQ(chunks[0]["choices"][0]["index"], 1);
  EXPECT_EQ(chunks[1]["choices"][0]["delta"]["content"], "Hel");
  EXPECT_TRUE(chunks[1]["usage"].is_null());
  EXPECT_EQ(chunks[3]["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(chunks[5]["choices"][0]["finish_reason"], "stop");
  EXPECT_EQ(chunks[6]["choices"], Json::array());
  EXPECT_EQ(chunks[6]["usage"]["completion_tokens"], 3);
  // Tool calls come out as one tool_calls delta at the end; the content before streams.
  GenerationRequest tools = req;
  tools.engine.n = 1;
  tools.parse_tools = true;
  OpenAiStream t({"chatcmpl-y", 1, "m"}, tools, fixture_tokenizer(), ToolFormat::Hermes);
  std::string tsse = t.on_event(event(0, "Ok <tool_"));
  tsse += t.on_event(event(0, "call>{\"name\": \"f\", \"arguments\": {}}</tool_call>",
                           engine::FinishReason::Stop));
  const auto tc = data_lines(tsse);
  ASSERT_EQ(tc.size(), 3u) << tsse;
  EXPECT_EQ(tc[1]["choices"][0]["delta"]["content"], "Ok ");
  EXPECT_EQ(tc[2]["choices"][0]["delta"]["tool_calls"][0]["index"], 0);
  EXPECT_EQ(tc[2]["choices"][0]["delta"]["tool_calls"][0]["function"]["name"], "f");
  EXPECT_EQ(tc[2]["choices"][0]["finish_reason"], "tool_calls");
}

TEST(ServerFormat, ErrorsMidStream) {
  GenerationRequest req;
  req.api = Api::Chat;
  OpenAiStream s({"chatcmpl-x", 1, "m"}, req, fixture_tokenizer(), ToolFormat::None);
  engine::Event e = event(0, "", engine::FinishReason::Error);
  e.error = "out of memory";
  const auto chunks = data_lines(s.on_event(e));
  ASSERT_EQ(chunks.size(), 2u);
  EXPECT_EQ(chunks[1]["error"]["message"], "out of memory");
  req.api = Api::Messages;
  AnthropicStream a({"msg_x", 1, "m"}, req, ToolFormat::None);
  const std::string sse = a.on_event(e);
  EXPECT_EQ(event_names(sse), std::vector<std::string>{"error"});
  EXPECT_EQ(data_lines(sse)[0]["error"]["message"], "out of memory");
}

TEST(ServerFormat, CompletionLogprobs) {
  GenerationRequest req;
  req.api = Api::Completion;
  req.logprobs = true;
  ChoiceResult c;
  c.add(event(0, "A"), true);
  c.add(event(0, "A", engine::FinishReason::Length), true);
  const Json r =
      openai_response({"cmpl-x", 1, "m"}, req, {c}, {}, fixture_tokenizer(), ToolFormat::None);
  EXPECT_EQ(r["object"], "text_completion");
  EXPECT_EQ(r["choices"][0]["text"], "AA");
  EXPECT_EQ(r["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(r["choices"][0]["logprobs"]["tokens"], Json::array({"A", "A"}));
  EXPECT_EQ(r["choices"][0]["logprobs"]["text_offset"], Json::array({0, 1}));
  EXPECT_EQ(r["choices"][0]["logprobs"]["top_logprobs"][0]["B"], -1.5);
}

TEST(ServerFormat, AnthropicStreamGrammar) {
  GenerationRequest req;
  req.api = Api::Messages;
  req.engine.prompt = {1, 2, 3};
  req.parse_tools = true;
  AnthropicStream s({"msg_x", 1, "m"}, req, ToolFormat::Hermes);
  std::string sse = s.start();
  sse += s.on_event(event(0, "Hi "));
  sse += s.on_event(event(0, "<tool_call>{\"name\": \"f\", \"arguments\": {\"a\": 1}}</tool_call>",
                          engine::FinishReason::Stop));
  sse += s.on_done({3, 2, 0});
  EXPECT_EQ(event_names(sse),
            (std::vector<std::string>{"message_start", "content_block_start", "ping",
                                      "content_block_delta", "content_block_stop",
                                      "content_block_start", "content_block_delta",
                                      "content_block_stop", "message_delta", "message_stop"}));
  const auto data = data_lines(sse);
  EXPECT_EQ(data[0]["message"]["usage"]["input_tokens"], 3);
  EXPECT_EQ(data[3]["delta"], Json({{"type", "text_delta"}, {"text", "Hi "}}));
  EXPECT_EQ(data[5]["content_block"]["type"], "tool_use");
  EXPECT_EQ(data[5]["content_block"]["name"], "f");
  EXPECT_EQ(data[6]["delta"]["type"], "input_json_delta");
  EXPECT_EQ(Json::parse(data[6]["delta"]["partial_json"].get<std::string>()), Json({{"a", 1}}));
  EXPECT_EQ(data[8]["delta"]["stop_reason"], "tool_use");
  EXPECT_EQ(data[8]["usage"]["output_tokens"], 2);
}

TEST(ServerFormat, AnthropicResponseStopReasons) {
  GenerationRequest req;
  req.api = Api::Messages;
  ChoiceResult c;
  engine::Event e = event(0, "abc", engine::FinishReason::Stop);
  e.stop_matched = "zz";
  c.add(e, false);
  Json r = anthropic_response({"msg_x", 1, "m"}, req, c, {5, 3, 0}, ToolFormat::None);
  EXPECT_EQ(r["content"], Json::array({{{"type", "text"}, {"text", "abc"}}}));
  EXPECT_EQ(r["stop_reason"], "stop_sequence");
  EXPECT_EQ(r["stop_sequence"], "zz");
  EXPECT_EQ(r["usage"]["input_tokens"], 5);
  EXPECT_EQ(anthropic_stop_reason(engine::FinishReason::Length, "", false), "max_tokens");
  EXPECT_EQ(anthropic_stop_reason(engine::FinishReason::Stop, "", false), "end_turn");
}

TEST(ServerFormat, MetricsText) {
  Metrics m;
  m.count_request(200);
  m.count_request(200);
  m.count_request(400);
  m.observe_ttft(0.02);
  m.observe_inter_token(0.003);
  engine::EngineStats stats;
  stats.kv_blocks_used = 3;
  stats.kv_blocks_free = 61;
  const std::string text = m.render(stats);
  EXPECT_NE(text.find("ringlm_requests_total{status=\"200\"} 2\n"), std::string::npos);
  EXPECT_NE(text.find("ringlm_requests_total{status=\"400\"} 1\n"), std::string::npos);
  EXPECT_NE(text.find("ringlm_time_to_first_token_seconds_bucket{le=\"0.01\"} 0\n"),
            std::string::npos);
  EXPECT_NE(text.find("ringlm_time_to_first_token_seconds_bucket{le=\"0.025\"} 1\n"),
            std::string::npos);
  EXPECT_NE(text.find("ringlm_inter_token_latency_seconds_count 1\n"), std::string::npos);
  EXPECT_NE(text.find("ringlm_kv_blocks_used 3\n"), std::string::npos);
  EXPECT_NE(text.find("ringlm_kv_blocks_free 61\n"), std::string::npos);
}

}  // namespace
}  // namespace ringlm::server
