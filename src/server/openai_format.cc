#include "server/openai_format.h"

#include <span>

namespace ringlm::server {

namespace {

std::string token_text(const Tokenizer& tokenizer, int32_t id) {
  const int32_t one[1] = {id};
  return tokenizer.decode(std::span<const int32_t>(one, 1), /*skip_special_tokens=*/false);
}

Json bytes_json(const std::string& s) {
  Json out = Json::array();
  for (unsigned char c : s) out.push_back(static_cast<int>(c));
  return out;
}

const char* object_name(Api api, bool chunk) {
  if (api == Api::Completion) return "text_completion";
  return chunk ? "chat.completion.chunk" : "chat.completion";
}

}  // namespace

void ChoiceResult::add(const engine::Event& event, bool keep_tokens) {
  text += event.text;
  if (keep_tokens) tokens.insert(tokens.end(), event.tokens.begin(), event.tokens.end());
  if (event.finish != engine::FinishReason::None) {
    finish = event.finish;
    error = event.error;
    stop_matched = event.stop_matched;
  }
}

Json usage_json(const engine::Usage& usage) {
  Json u;
  u["prompt_tokens"] = usage.prompt_tokens;
  u["completion_tokens"] = usage.completion_tokens;
  u["total_tokens"] = usage.prompt_tokens + usage.completion_tokens;
  u["prompt_tokens_details"] = {{"cached_tokens", usage.cached_tokens}};
  return u;
}

std::string finish_reason_text(engine::FinishReason reason, bool tool_calls) {
  // Parsed calls are the answer however generation ended (vLLM does the same).
  if (tool_calls && reason != engine::FinishReason::Error) return "tool_calls";
  switch (reason) {
    case engine::FinishReason::Stop:
      return "stop";
    case engine::FinishReason::Length:
      return "length";
    case engine::FinishReason::Cancelled:
      return "abort";
    case engine::FinishReason::Error:
      return "error";
    case engine::FinishReason::None:
      break;
  }
  return "stop";
}

Json tool_calls_json(const std::vector<ToolCall>& calls, bool with_index) {
  Json out = Json::array();
  for (size_t i = 0; i < calls.size(); ++i) {
    Json c;
    if (with_index) c["index"] = i;
    c["id"] = calls[i].id;
    c["type"] = "function";
    c["function"] = {{"name", calls[i].name}, {"arguments", calls[i].arguments}};
    out.push_back(std::move(c));
  }
  return out;
}

Json chat_logprobs_json(const std::vector<engine::TokenInfo>& tokens, const Tokenizer& tokenizer) {
  Json content = Json::array();
  for (const auto& t : tokens) {
    const std::string s = token_text(tokenizer, t.token);
    Json top = Json::array();
    for (const auto& alt : t.top) {
      const std::string a = token_text(tokenizer, alt.token);
      top.push_back({{"token", a}, {"logprob", alt.logprob}, {"bytes", bytes_json(a)}});
    }
    content.push_back(
        {{"token", s}, {"logprob", t.logprob}, {"bytes", bytes_json(s)}, {"top_logprobs", top}});
  }
  Json out;
  out["content"] = std::move(content);
  return out;
}

Json completion_logprobs_json(const std::vector<engine::TokenInfo>& tokens,
                              const Tokenizer& tokenizer, int64_t first_offset) {
  Json toks = Json::array(), lps = Json::array(), tops = Json::array(), offsets = Json::array();
  int64_t offset = first_offset;
  for (const auto& t : tokens) {
    const std::string s = token_text(tokenizer, t.token);
    toks.push_back(s);
    lps.push_back(t.logprob);
    Json top = Json::object();
    for (const auto& alt : t.top) top[token_text(tokenizer, alt.token)] = alt.logprob;
    tops.push_back(std::move(top));
    offsets.push_back(offset);
    offset += static_cast<int64_t>(s.size());
  }
  return {
      {"tokens", toks}, {"token_logprobs", lps}, {"top_logprobs", tops}, {"text_offset", offsets}};
}

Json openai_response(const ResponseMeta& meta, const GenerationRequest& request,
                     const std::vector<ChoiceResult>& choices, const engine::Usage& usage,
                     const Tokenizer& tokenizer, ToolFormat tool_format) {
  Json out;
  out["id"] = meta.id;
  out["object"] = object_name(request.api, false);
  out["created"] = meta.created;
  out["model"] = meta.model;
  Json list = Json::array();
  for (size_t i = 0; i < choices.size(); ++i) {
    const ChoiceResult& c = choices[i];
    Json choice;
    choice["index"] = i;
    if (request.api == Api::Completion) {
      choice["text"] = c.text;
      choice["logprobs"] =
          request.logprobs ? completion_logprobs_json(c.tokens, tokenizer, 0) : Json();
      choice["finish_reason"] = finish_reason_text(c.finish, false);
    } else {
      ParsedOutput parsed =
          request.parse_tools ? parse_tool_calls(tool_format, c.text) : ParsedOutput{c.text, {}};
      Json message;
      message["role"] = "assistant";
      message["content"] =
          parsed.content.empty() && !parsed.calls.empty() ? Json() : Json(parsed.content);
      if (!parsed.calls.empty()) message["tool_calls"] = tool_calls_json(parsed.calls, false);
      choice["message"] = std::move(message);
      choice["logprobs"] = request.logprobs ? chat_logprobs_json(c.tokens, tokenizer) : Json();
      choice["finish_reason"] = finish_reason_text(c.finish, !parsed.calls.empty());
    }
    list.push_back(std::move(choice));
  }
  out["choices"] = std::move(list);
  out["usage"] = usage_json(usage);
  return out;
}

OpenAiStream::OpenAiStream(ResponseMeta meta, const GenerationRequest& request,
                           const Tokenizer& tokenizer, ToolFormat tool_format)
    : meta_(std::move(meta)),
      request_(request),
      tokenizer_(tokenizer),
      started_(static_cast<size_t>(request.engine.n), false),
      text_offsets_(static_cast<size_t>(request.engine.n), 0) {
  const ToolFormat format = request.parse_tools ? tool_format : ToolFormat::None;
  for (int i = 0; i < request.engine.n; ++i) splitters_.emplace_back(format);
}

Json OpenAiStream::chunk(Json choice) const {
  Json out;
  out["id"] = meta_.id;
  out["object"] = object_name(request_.api, true);
  out["created"] = meta_.created;
  out["model"] = meta_.model;
  out["choices"] = Json::array({std::move(choice)});
  if (request_.include_usage) out["usage"] = nullptr;
  return out;
}

std::string OpenAiStream::sse(const Json& value) const {
  return "data: " + dump(value) + "\n\n";
}

std::string OpenAiStream::on_event(const engine::Event& event) {
  const auto i = static_cast<size_t>(event.choice);
  std::string out;
  const bool chat = request_.api != Api::Completion;
  if (chat && !started_[i]) {
    started_[i] = true;
    out += sse(chunk({{"index", i},
                      {"delta", {{"role", "assistant"}, {"content", ""}}},
                      {"logprobs", nullptr},
                      {"finish_reason", nullptr}}));
  }
  const std::string content = chat ? splitters_[i].push(event.text) : event.text;
  const bool has_tokens = request_.logprobs && !event.tokens.empty();
  if (!content.empty() || has_tokens) {
    Json choice;
    choice["index"] = i;
    if (chat) {
      choice["delta"] = {{"content", content}};
      choice["logprobs"] = has_tokens ? chat_logprobs_json(event.tokens, tokenizer_) : Json();
    } else {
      choice["text"] = content;
      choice["logprobs"] =
          has_tokens ? completion_logprobs_json(event.tokens, tokenizer_, text_offsets_[i])
                     : Json();
      text_offsets_[i] += static_cast<int64_t>(content.size());
    }
    choice["finish_reason"] = nullptr;
    out += sse(chunk(std::move(choice)));
  }
  if (event.finish == engine::FinishReason::Error) {
    // vLLM's shape for an error after the stream started: a data line holding the error.
    Json error = {{"message", event.error.empty() ? "generation failed" : event.error},
                  {"type", "server_error"},
                  {"param", nullptr},
                  {"code", 500}};
    return out + sse({{"error", error}});
  }
  if (event.finish != engine::FinishReason::None) {
    bool calls = false;
    Json delta = Json::object();
    if (chat) {
      ParsedOutput rest = splitters_[i].finish();
      if (!rest.content.empty()) delta["content"] = rest.content;
      if (!rest.calls.empty()) {
        delta["tool_calls"] = tool_calls_json(rest.calls, true);
        calls = true;
      }
    }
    Json choice;
    choice["index"] = i;
    if (chat) {
      choice["delta"] = std::move(delta);
    } else {
      choice["text"] = "";
    }
    choice["logprobs"] = nullptr;
    choice["finish_reason"] = finish_reason_text(event.finish, calls);
    out += sse(chunk(std::move(choice)));
  }
  return out;
}

std::string OpenAiStream::on_done(const engine::Usage& usage) {
  std::string out;
  if (request_.include_usage) {
    Json c = chunk(Json());
    c["choices"] = Json::array();
    c["usage"] = usage_json(usage);
    out += sse(c);
  }
  return out + "data: [DONE]\n\n";
}

}  // namespace ringlm::server
