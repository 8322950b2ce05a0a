#include "server/anthropic.h"

#include "server/api_error.h"

namespace ringlm::server {

namespace {

std::string text_of_blocks(const Json& content, const std::string& at) {
  if (content.is_string()) return content.get<std::string>();
  if (!content.is_array()) bad_request(at, at + " must be a string or an array of blocks");
  std::string text;
  for (const auto& b : content) {
    if (!b.is_object() || b.value("type", "") != "text" || !b.contains("text") ||
        !b["text"].is_string())
      bad_request(at, at + " blocks must be text blocks here");
    if (!text.empty()) text += "\n";
    text += b["text"].get<std::string>();
  }
  return text;
}

Json tools_to_openai(const Json* tools) {
  if (!tools) return Json();
  if (!tools->is_array()) bad_request("tools", "'tools' must be an array");
  Json out = Json::array();
  for (size_t i = 0; i < tools->size(); ++i) {
    const Json& t = (*tools)[i];
    const std::string at = "tools[" + std::to_string(i) + "]";
    if (!t.is_object() || !t.contains("name") || !t["name"].is_string())
      bad_request(at + ".name", at + ".name must be a string");
    Json fn;
    fn["name"] = t["name"];
    if (t.contains("description")) fn["description"] = t["description"];
    fn["parameters"] = t.contains("input_schema") ? t["input_schema"] : Json::object();
    out.push_back({{"type", "function"}, {"function", fn}});
  }
  return out.empty() ? Json() : out;
}

}  // namespace

Json anthropic_to_chat_messages(const Json& body) {
  Json out = Json::array();
  if (const Json* system = field(body, "system"))
    out.push_back({{"role", "system"}, {"content", text_of_blocks(*system, "system")}});
  const Json* messages = field(body, "messages");
  if (!messages) bad_request("messages", "'messages' is required");
  if (!messages->is_array() || messages->empty())
    bad_request("messages", "'messages' must be a non-empty array");
  for (size_t i = 0; i < messages->size(); ++i) {
    const Json& m = (*messages)[i];
    const std::string at = "messages[" + std::to_string(i) + "]";
    if (!m.is_object() || !m.contains("role") || !m["role"].is_string())
      bad_request(at + ".role", at + ".role must be a string");
    const std::string role = m["role"].get<std::string>();
    if (role != "user" && role != "assistant")
      bad_request(at + ".role", at + ".role must be \"user\" or \"assistant\"");
    if (!m.contains("content")) bad_request(at + ".content", at + ".content is required");
    const Json& content = m["content"];
    if (content.is_string()) {
      out.push_back({{"role", role}, {"content", content}});
      continue;
    }
    if (!content.is_array())
      bad_request(at + ".content", at + ".content must be a string or an array of blocks");
    std::string text;
    Json calls = Json::array();
    for (const auto& b : content) {
      const std::string type = b.is_object() ? b.value("type", "") : "";
      if (type == "text" && b.contains("text") && b["text"].is_string()) {
        if (!text.empty()) text += "\n";
        text += b["text"].get<std::string>();
      } else if (type == "tool_use" && role == "assistant") {
        if (!b.contains("name") || !b["name"].is_string())
          bad_request(at + ".content", "tool_use blocks need a 'name'");
        calls.push_back(
            {{"id", b.value("id", "")},
             {"type", "function"},
             {"function",
              {{"name", b["name"]},
               {"arguments", dump(b.contains("input") ? b["input"] : Json::object())}}}});
      } else if (type == "tool_result" && role == "user") {
        const Json result = b.contains("content") ? b["content"] : Json("");
        out.push_back({{"role", "tool"},
                       {"tool_call_id", b.value("tool_use_id", "")},
                       {"content", text_of_blocks(result, at + ".content[].content")}});
      } else {
        bad_request(at + ".content",
                    at + ".content block type '" + type + "' is not supported here");
      }
    }
    if (!text.empty() || !calls.empty()) {
      Json msg = {{"role", role}, {"content", text}};
      if (!calls.empty()) msg["tool_calls"] = calls;
      out.push_back(std::move(msg));
    }
  }
  return out;
}

GenerationRequest parse_messages_request(const Json& body, const ParseContext& ctx) {
  GenerationRequest out;
  out.api = Api::Messages;
  string_field(body, "model");
  const auto max_tokens = integer_field(body, "max_tokens");
  if (!max_tokens) bad_request("max_tokens", "'max_tokens' is required");
  for (const char* openai_only : {"n", "logprobs", "stop"}) {
    if (field(body, openai_only))
      bad_request(openai_only, std::string("'") + openai_only +
                                   "' is not a Messages API field (stop_sequences for stop)");
  }
  Json tools = tools_to_openai(field(body, "tools"));
  if (const Json* tc = field(body, "tool_choice")) {
    const std::string type = tc->is_object() ? tc->value("type", "") : "";
    if (type == "none") {
      tools = Json();
    } else if (type != "auto") {
      bad_request("tool_choice",
                  "tool_choice 'any' or 'tool' needs constrained decoding, which this server "
                  "does not have; use 'auto'");
    }
  }
  out.parse_tools = !tools.is_null();
  const Json messages = ChatPrompter::normalize_messages(anthropic_to_chat_messages(body));
  out.engine.prompt = ctx.prompter.encode(messages, ChatPrompter::normalize_tools(&tools), Json());
  if (out.engine.prompt.empty()) bad_request("messages", "the rendered prompt is empty");
  Json sampling = Json::object();
  // logit_bias is a ringlm extension (tests force outputs with it).
  for (const char* key : {"temperature", "top_p", "top_k", "stream", "logit_bias"}) {
    if (body.contains(key)) sampling[key] = body[key];
  }
  if (body.contains("stop_sequences")) {
    if (!body["stop_sequences"].is_null() && !body["stop_sequences"].is_array())
      bad_request("stop_sequences", "'stop_sequences' must be an array of strings");
    sampling["stop"] = body["stop_sequences"];
  }
  parse_sampling(sampling, 1.0, out);
  set_max_tokens(max_tokens, "max_tokens", *max_tokens, ctx, out);
  return out;
}

std::string anthropic_stop_reason(engine::FinishReason reason, const std::string& stop_matched,
                                  bool tool_use) {
  if (tool_use) return "tool_use";
  if (reason == engine::FinishReason::Length) return "max_tokens";
  if (reason == engine::FinishReason::Stop && !stop_matched.empty()) return "stop_sequence";
  return "end_turn";
}

namespace {

Json tool_use_block(const ToolCall& call) {
  Json input;
  try {
    input = Json::parse(call.arguments);
  } catch (const nlohmann::json::exception&) {
    input = Json::object();
  }
  return {{"type", "tool_use"}, {"id", "toolu_" + call.id}, {"name", call.name}, {"input", input}};
}

Json anthropic_usage(const engine::Usage& usage) {
  return {{"input_tokens", usage.prompt_tokens},
          {"output_tokens", usage.completion_tokens},
          {"cache_read_input_tokens", usage.cached_tokens}};
}

}  // namespace

Json anthropic_response(const ResponseMeta& meta, const GenerationRequest& request,
                        const ChoiceResult& choice, const engine::Usage& usage,
                        ToolFormat tool_format) {
  ParsedOutput parsed = request.parse_tools ? parse_tool_calls(tool_format, choice.text)
                                            : ParsedOutput{choice.text, {}};
  Json content = Json::array();
  if (!parsed.content.empty() || parsed.calls.empty())
    content.push_back({{"type", "text"}, {"text", parsed.content}});
  for (const auto& call : parsed.calls) content.push_back(tool_use_block(call));
  Json out;
  out["id"] = meta.id;
  out["type"] = "message";
  out["role"] = "assistant";
  out["model"] = meta.model;
  out["content"] = std::move(content);
  out["stop_reason"] =
      anthropic_stop_reason(choice.finish, choice.stop_matched, !parsed.calls.empty());
  out["stop_sequence"] = choice.stop_matched.empty() ? Json() : Json(choice.stop_matched);
  out["usage"] = anthropic_usage(usage);
  return out;
}

AnthropicStream::AnthropicStream(ResponseMeta meta, const GenerationRequest& request,
                                 ToolFormat tool_format)
    : meta_(std::move(meta)),
      request_(request),
      splitter_(request.parse_tools ? tool_format : ToolFormat::None) {}

std::string AnthropicStream::sse(const char* name, const Json& data) {
  return std::string("event: ") + name + "\ndata: " + dump(data) + "\n\n";
}

std::string AnthropicStream::start() {
  Json message = {{"id", meta_.id},
                  {"type", "message"},
                  {"role", "assistant"},
                  {"model", meta_.model},
                  {"content", Json::array()},
                  {"stop_reason", nullptr},
                  {"stop_sequence", nullptr},
                  {"usage",
                   {{"input_tokens", static_cast<int64_t>(request_.engine.prompt.size())},
                    {"output_tokens", 0}}}};
  return sse("message_start", {{"type", "message_start"}, {"message", message}}) +
         sse("content_block_start", {{"type", "content_block_start"},
                                     {"index", 0},
                                     {"content_block", {{"type", "text"}, {"text", ""}}}}) +
         sse("ping", {{"type", "ping"}});
}

std::string AnthropicStream::on_event(const engine::Event& event) {
  std::string out;
  auto text_delta = [&](const std::string& text) {
    if (text.empty()) return;
    out += sse("content_block_delta", {{"type", "content_block_delta"},
                                       {"index", 0},
                                       {"delta", {{"type", "text_delta"}, {"text", text}}}});
  };
  text_delta(splitter_.push(event.text));
  if (event.finish == engine::FinishReason::None) return out;
  if (event.finish == engine::FinishReason::Error) {
    return out +
           sse("error", {{"type", "error"},
                         {"error",
                          {{"type", "api_error"},
                           {"message", event.error.empty() ? "generation failed" : event.error}}}});
  }
  finish_ = event.finish;
  stop_matched_ = event.stop_matched;
  ParsedOutput rest = splitter_.finish();
  text_delta(rest.content);
  out += sse("content_block_stop", {{"type", "content_block_stop"}, {"index", 0}});
  for (size_t i = 0; i < rest.calls.size(); ++i) {
    const int index = static_cast<int>(i) + 1;
    Json block = tool_use_block(rest.calls[i]);
    block["input"] = Json::object();
    out += sse("content_block_start",
               {{"type", "content_block_start"}, {"index", index}, {"content_block", block}});
    out +=
        sse("content_block_delta",
            {{"type", "content_block_delta"},
             {"index", index},
             {"delta", {{"type", "input_json_delta"}, {"partial_json", rest.calls[i].arguments}}}});
    out += sse("content_block_stop", {{"type", "content_block_stop"}, {"index", index}});
  }
  tool_use_ = !rest.calls.empty();
  return out;
}

std::string AnthropicStream::on_done(const engine::Usage& usage) {
  Json delta = {{"stop_reason", anthropic_stop_reason(finish_, stop_matched_, tool_use_)},
                {"stop_sequence", stop_matched_.empty() ? Json() : Json(stop_matched_)}};
  return sse("message_delta", {{"type", "message_delta"},
                               {"delta", delta},
                               {"usage", {{"output_tokens", usage.completion_tokens}}}}) +
         sse("message_stop", {{"type", "message_stop"}});
}

}  // namespace ringlm::server
