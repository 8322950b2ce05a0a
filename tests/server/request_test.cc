// OpenAI and Anthropic request bodies -> engine requests, and the 400s bad ones get.
#include <gtest/gtest.h>

#include "server/anthropic.h"
#include "server/generation_request.h"
#include "server_util.h"

namespace ringlm::server {
namespace {

using test::expect_api_error;
using test::fixture_tokenizer;

struct Fixture {
  ChatPrompter prompter{fixture_tokenizer()};
  ParseContext ctx{fixture_tokenizer(), prompter, 1024, 1024};
  GenerationRequest chat(const std::string& body) {
    return parse_chat_request(parse_body(body), ctx);
  }
  GenerationRequest completion(const std::string& body) {
    return parse_completion_request(parse_body(body), ctx);
  }
  GenerationRequest messages(const std::string& body) {
    return parse_messages_request(parse_body(body), ctx);
  }
};

TEST(ServerRequest, ChatRendersTheTemplateWithTextParts) {
  Fixture f;
  const auto r =
      f.chat(R"({"model": "m", "messages": [{"role": "developer", "content": "Be brief."},
      {"role": "user", "content": [{"type": "text", "text": "Hi"}, {"type": "text", "text": "there"}]}]})");
  EXPECT_EQ(fixture_tokenizer().decode(r.engine.prompt),
            "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi\nthere<|im_end|>\n"
            "<|im_start|>assistant\n");
  // No max_tokens: up to the end of the context.
  EXPECT_EQ(r.engine.stop.max_tokens, 1024 - static_cast<int64_t>(r.engine.prompt.size()));
  EXPECT_FALSE(r.stream);
  EXPECT_EQ(r.engine.n, 1);
}

TEST(ServerRequest, DefaultMaxTokensStopsAtTheKvCapacity) {
  Fixture f;
  f.ctx.max_sequence_tokens = 200;  // a KV cache smaller than the context
  const auto r = f.chat(R"({"messages": [{"role": "user", "content": "x"}]})");
  EXPECT_EQ(r.engine.stop.max_tokens, 200 - static_cast<int64_t>(r.engine.prompt.size()));
  // An explicit max_tokens is the user's: the engine's validation judges it against the KV.
  EXPECT_EQ(f.chat(R"({"messages": [{"role": "user", "content": "x"}], "max_tokens": 500})")
                .engine.stop.max_tokens,
            500);
  f.ctx.max_sequence_tokens = 5;
  test::expect_api_error([&] { f.chat(R"({"messages": [{"role": "user", "content": "x"}]})"); },
                         400, "messages", "KV cache holds at most 5");
}

TEST(ServerRequest, ChatSamplingFields) {
  Fixture f;
  const auto r = f.chat(R"({"messages": [{"role": "user", "content": "x"}], "temperature": 0.5,
      "top_p": 0.9, "top_k": 40, "min_p": 0.05, "repetition_penalty": 1.1, "presence_penalty": 0.5,
      "frequency_penalty": -0.5, "logit_bias": {"65": 10, "66": -100}, "seed": 7,
      "stop": ["a", "bc"], "n": 3, "max_completion_tokens": 9, "logprobs": true, "top_logprobs": 2,
      "stream": true, "stream_options": {"include_usage": true}})");
  const auto& s = r.engine.sampling;
  EXPECT_FLOAT_EQ(s.temperature, 0.5f);
  EXPECT_FLOAT_EQ(s.top_p, 0.9f);
  EXPECT_EQ(s.top_k, 40);
  EXPECT_FLOAT_EQ(s.min_p, 0.05f);
  EXPECT_FLOAT_EQ(s.repetition_penalty, 1.1f);
  EXPECT_FLOAT_EQ(s.presence_penalty, 0.5f);
  EXPECT_FLOAT_EQ(s.frequency_penalty, -0.5f);
  ASSERT_EQ(s.logit_bias.size(), 2u);
  EXPECT_EQ(s.logit_bias[1], (std::pair<int32_t, float>{66, -100.0f}));
  EXPECT_EQ(s.seed, 7u);
  EXPECT_EQ(r.engine.stop.stop_strings, (std::vector<std::string>{"a", "bc"}));
  EXPECT_EQ(r.engine.n, 3);
  EXPECT_EQ(r.engine.stop.max_tokens, 9);
  EXPECT_TRUE(s.want_logprobs);
  EXPECT_EQ(s.logprobs, 2);
  EXPECT_TRUE(r.stream);
  EXPECT_TRUE(r.include_usage);
}

TEST(ServerRequest, ChatErrorsNameTheField) {
  Fixture f;
  const std::string m = R"("messages": [{"role": "user", "content": "x"}])";
  auto chat = [&](const std::string& extra) {
    return [&, extra] { f.chat("{" + m + extra + "}"); };
  };
  expect_api_error([&] { f.chat("{not json"); }, 400, "", "not valid JSON");
  expect_api_error([&] { f.chat("[1]"); }, 400, "", "JSON object");
  expect_api_error([&] { f.chat("{}"); }, 400, "messages", "required");
  expect_api_error(chat(R"(, "temperature": "hot")"), 400, "temperature", "must be a number");
  expect_api_error(chat(R"(, "temperature": 2.5)"), 400, "temperature", "[0.000000, 2.000000]");
  expect_api_error(chat(R"(, "top_p": 0)"), 400, "top_p", "(0.000000, 1.000000]");
  expect_api_error(chat(R"(, "n": 0)"), 400, "n", "between 1 and");
  expect_api_error(chat(R"(, "n": 1.5)"), 400, "n", "integer");
  expect_api_error(chat(R"(, "stop": [1])"), 400, "stop", "strings");
  expect_api_error(chat(R"(, "logit_bias": {"x": 1})"), 400, "logit_bias", "not a token id");
  expect_api_error(chat(R"(, "logit_bias": {"5": 101})"), 400, "logit_bias", "100");
  expect_api_error(chat(R"(, "top_logprobs": 3)"), 400, "top_logprobs", "logprobs");
  expect_api_error(chat(R"(, "max_tokens": 0)"), 400, "max_tokens", "at least 1");
  expect_api_error(chat(R"(, "max_tokens": 5000)"), 400, "max_tokens", "context of 1024");
  expect_api_error(chat(R"(, "stream_options": {"include_usage": true})"), 400, "stream_options",
                   "stream");
  expect_api_error(chat(R"(, "tool_choice": "required", "tools": [{"type": "function",
      "function": {"name": "f"}}])"),
                   400, "tool_choice", "constrained");
  expect_api_error([&] { f.chat(R"({"messages": [{"role": "robot", "content": "x"}]})"); }, 400,
                   "messages[0].role", "not one of");
  expect_api_error(
      [&] { f.chat(R"({"messages": [{"role": "user", "content": [{"type": "image_url"}]}]})"); },
      400, "messages[0].content", "not supported");
}

TEST(ServerRequest, ToolsReachTheTemplate) {
  Fixture f;
  const auto r = f.chat(R"({"messages": [{"role": "user", "content": "Weather?"}],
      "tools": [{"type": "function", "function": {"name": "get_weather", "parameters": {}}}]})");
  EXPECT_TRUE(r.parse_tools);
  const std::string text = fixture_tokenizer().decode(r.engine.prompt);
  EXPECT_NE(text.find("<tools>\n{\"type\": \"function\", \"function\": {\"name\": \"get_weather\""),
            std::string::npos)
      << text;
  // An assistant tool call and its result render back (arguments given as JSON text).
  const auto round = f.chat(R"({"messages": [{"role": "user", "content": "Weather?"},
      {"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function",
        "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}}]},
      {"role": "tool", "tool_call_id": "call_1", "content": "sunny"}]})");
  const std::string t2 = fixture_tokenizer().decode(round.engine.prompt);
  EXPECT_NE(t2.find("<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}"
                    "\n</tool_call>"),
            std::string::npos)
      << t2;
  EXPECT_NE(t2.find("<tool_response>\nsunny\n</tool_response>"), std::string::npos) << t2;
  EXPECT_FALSE(f.chat(R"({"messages": [{"role": "user", "content": "x"}], "tool_choice": "none",
      "tools": [{"type": "function", "function": {"name": "f"}}]})")
                   .parse_tools);
}

TEST(ServerRequest, Completions) {
  Fixture f;
  auto r = f.completion(R"({"prompt": "the", "logprobs": 3})");
  EXPECT_EQ(r.engine.prompt, fixture_tokenizer().encode("the"));
  EXPECT_EQ(r.engine.stop.max_tokens, 16);  // OpenAI's default for completions
  EXPECT_TRUE(r.logprobs);
  EXPECT_EQ(r.engine.sampling.logprobs, 3);
  r = f.completion(R"({"prompt": [[5, 6, 7]], "max_tokens": 4})");
  EXPECT_EQ(r.engine.prompt, (std::vector<int32_t>{5, 6, 7}));
  expect_api_error([&] { f.completion(R"({"prompt": ["a", "b"]})"); }, 400, "prompt", "one prompt");
  expect_api_error([&] { f.completion(R"({"prompt": ""})"); }, 400, "prompt", "empty");
  expect_api_error([&] { f.completion(R"({"prompt": [1, -2]})"); }, 400, "prompt", "non-negative");
  expect_api_error([&] { f.completion(R"({"prompt": "x", "echo": true})"); }, 400, "echo",
                   "not supported");
  expect_api_error([&] { f.completion(R"({"prompt": "x", "logprobs": 21})"); }, 400, "logprobs",
                   "between 0 and 20");
}

TEST(ServerRequest, AnthropicMessages) {
  Fixture f;
  const auto r = f.messages(R"({"model": "m", "max_tokens": 7, "system": "Be brief.",
      "stop_sequences": ["zz"], "temperature": 0.2, "top_k": 5,
      "messages": [{"role": "user", "content": [{"type": "text", "text": "Weather?"}]},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1", "name": "get_weather",
          "input": {"city": "Paris"}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1",
          "content": "sunny"}]}],
      "tools": [{"name": "get_weather", "description": "d", "input_schema": {"type": "object"}}]})");
  EXPECT_EQ(r.engine.stop.max_tokens, 7);
  EXPECT_EQ(r.engine.stop.stop_strings, (std::vector<std::string>{"zz"}));
  EXPECT_FLOAT_EQ(r.engine.sampling.temperature, 0.2f);
  EXPECT_EQ(r.engine.sampling.top_k, 5);
  EXPECT_TRUE(r.parse_tools);
  const std::string text = fixture_tokenizer().decode(r.engine.prompt);
  EXPECT_EQ(text.rfind("<|im_start|>system\nBe brief.", 0), 0u) << text;
  EXPECT_NE(text.find("\"arguments\": {\"city\": \"Paris\"}"), std::string::npos) << text;
  EXPECT_NE(text.find("<tool_response>\nsunny\n</tool_response>"), std::string::npos) << text;
  expect_api_error([&] { f.messages(R"({"messages": [{"role": "user", "content": "x"}]})"); }, 400,
                   "max_tokens", "required");
  expect_api_error(
      [&] {
        f.messages(R"({"max_tokens": 5, "temperature": 1.5,
                       "messages": [{"role": "user", "content": "x"}]})");
      },
      400, "temperature", "1.000000]");
  expect_api_error(
      [&] { f.messages(R"({"max_tokens": 5, "messages": [{"role": "system", "content": "x"}]})"); },
      400, "messages[0].role", "user");
}

TEST(ServerRequest, ErrorBodies) {
  const ApiError e(400, "invalid_request_error", "bad \"x\"", "temperature");
  EXPECT_EQ(
      openai_error_body(e),
      R"({"error":{"message":"bad \"x\"","type":"invalid_request_error","param":"temperature","code":400}})");
  EXPECT_EQ(anthropic_error_body(ApiError(401, "authentication_error", "no key")),
            R"({"type":"error","error":{"type":"authentication_error","message":"no key"}})");
  EXPECT_EQ(anthropic_error_type(413), "request_too_large");
}

}  // namespace
}  // namespace ringlm::server
