#include "server/chat_prompt.h"

#include "server/api_error.h"
#include "tokenizer/jinja/chat_template.h"

namespace ringlm::server {

namespace {

std::string where(size_t i) {
  return "messages[" + std::to_string(i) + "]";
}

// Content as a string (or null): text parts joined with "\n".
Json normalize_content(const Json& content, const std::string& at) {
  if (content.is_null() || content.is_string()) return content;
  if (!content.is_array())
    bad_request(at + ".content", at + ".content must be a string or an array of text parts");
  std::string text;
  bool first = true;
  for (const auto& part : content) {
    if (!part.is_object() || !part.contains("type") || !part["type"].is_string())
      bad_request(at + ".content", at + ".content parts must be objects with a 'type'");
    const std::string type = part["type"].get<std::string>();
    if (type != "text" && type != "input_text")
      bad_request(at + ".content",
                  at + ".content part type '" + type + "' is not supported (text only)");
    if (!part.contains("text") || !part["text"].is_string())
      bad_request(at + ".content", at + ".content text parts need a string 'text'");
    if (!first) text += "\n";
    text += part["text"].get<std::string>();
    first = false;
  }
  return text;
}

Json normalize_tool_calls(const Json& calls, const std::string& at) {
  if (!calls.is_array()) bad_request(at + ".tool_calls", at + ".tool_calls must be an array");
  Json out = Json::array();
  for (const auto& call : calls) {
    if (!call.is_object() || !call.contains("function") || !call["function"].is_object())
      bad_request(at + ".tool_calls", at + ".tool_calls entries need a 'function' object");
    Json c = call;
    Json& fn = c["function"];
    if (!fn.contains("name") || !fn["name"].is_string())
      bad_request(at + ".tool_calls", at + ".tool_calls[].function.name must be a string");
    if (fn.contains("arguments") && fn["arguments"].is_string()) {
      try {
        fn["arguments"] = Json::parse(fn["arguments"].get<std::string>());
      } catch (const nlohmann::json::exception&) {
        bad_request(at + ".tool_calls", at + ".tool_calls[].function.arguments is not valid JSON");
      }
    }
    if (!c.contains("type")) c["type"] = "function";
    out.push_back(std::move(c));
  }
  return out;
}

}  // namespace

ChatPrompter::ChatPrompter(const Tokenizer& tokenizer) : tokenizer_(tokenizer) {
  const auto source = tokenizer.chat_template();
  if (source) {
    parsed_ = std::make_shared<const jinja::Template>(jinja::Template::parse(*source));
    tool_format_ = detect_tool_format(*source);
    const int32_t id = tokenizer.token_to_id(tool_call_marker(tool_format_));
    if (id >= 0 && tokenizer.is_special(id)) tool_marker_token_ = id;
  }
  const auto& c = tokenizer.config();
  if (c.bos_token) special_tokens_["bos_token"] = *c.bos_token;
  if (c.eos_token) special_tokens_["eos_token"] = *c.eos_token;
  if (c.pad_token) special_tokens_["pad_token"] = *c.pad_token;
  if (c.unk_token) special_tokens_["unk_token"] = *c.unk_token;
}

Json ChatPrompter::normalize_messages(const Json& messages) {
  if (!messages.is_array()) bad_request("messages", "'messages' must be an array");
  if (messages.empty()) bad_request("messages", "'messages' must not be empty");
  Json out = Json::array();
  for (size_t i = 0; i < messages.size(); ++i) {
    const Json& m = messages[i];
    const std::string at = where(i);
    if (!m.is_object()) bad_request(at, at + " must be an object");
    if (!m.contains("role") || !m["role"].is_string())
      bad_request(at + ".role", at + ".role must be a string");
    std::string role = m["role"].get<std::string>();
    if (role == "developer") role = "system";
    if (role != "system" && role != "user" && role != "assistant" && role != "tool")
      bad_request(at + ".role", at + ".role '" + role +
                                    "' is not one of system, developer, user, assistant, tool");
    Json n = m;
    n["role"] = role;
    n["content"] = normalize_content(m.contains("content") ? m["content"] : Json(), at);
    if (n["content"].is_null() && role != "assistant")
      bad_request(at + ".content", at + ".content is required for role '" + role + "'");
    if (m.contains("tool_calls") && !m["tool_calls"].is_null()) {
      if (role != "assistant")
        bad_request(at + ".tool_calls", "only assistant messages have tool_calls");
      n["tool_calls"] = normalize_tool_calls(m["tool_calls"], at);
    } else {
      n.erase("tool_calls");
    }
    // Templates test `message.content is string`; an assistant turn of calls gets "".
    if (n["content"].is_null()) n["content"] = "";
    out.push_back(std::move(n));
  }
  return out;
}

Json ChatPrompter::normalize_tools(const Json* tools) {
  if (!tools || tools->is_null()) return Json();
  if (!tools->is_array()) bad_request("tools", "'tools' must be an array");
  if (tools->empty()) return Json();
  for (size_t i = 0; i < tools->size(); ++i) {
    const Json& t = (*tools)[i];
    const std::string at = "tools[" + std::to_string(i) + "]";
    if (!t.is_object() || !t.contains("function") || !t["function"].is_object())
      bad_request(at, at + " must be {\"type\": \"function\", \"function\": {...}}");
    if (t.contains("type") && t["type"] != "function")
      bad_request(at + ".type", at + ".type must be \"function\"");
    const Json& fn = t["function"];
    if (!fn.contains("name") || !fn["name"].is_string() || fn["name"].get<std::string>().empty())
      bad_request(at + ".function.name", at + ".function.name must be a non-empty string");
  }
  return *tools;
}

std::string ChatPrompter::render(const Json& messages, const Json& tools,
                                 const Json& template_kwargs) const {
  if (!parsed_)
    bad_request("messages",
                "this model has no chat template (tokenizer_config.json chat_template); use "
                "/v1/completions");
  jinja::ChatTemplateInputs in;
  in.messages = messages;
  in.tools = tools;
  in.add_generation_prompt = true;
  in.special_tokens = special_tokens_;
  in.extra = template_kwargs.is_null() ? Json::object() : template_kwargs;
  if (!in.extra.is_object())
    bad_request("chat_template_kwargs", "'chat_template_kwargs' must be an object");
  try {
    return jinja::render_chat(*parsed_, in);
  } catch (const std::exception& e) {
    bad_request("messages", std::string("the chat template failed: ") + e.what());
  }
}

std::vector<int32_t> ChatPrompter::encode(const Json& messages, const Json& tools,
                                          const Json& template_kwargs) const {
  // The template writes the special tokens itself (as transformers' apply_chat_template).
  return tokenizer_.encode(render(messages, tools, template_kwargs),
                           /*add_special_tokens=*/false);
}

}  // namespace ringlm::server
