#include "tokenizer/jinja/chat_template.h"

#include "tokenizer/jinja/pystr.h"

namespace ringlm::jinja {

namespace {

// transformers' continue_final_message post-processing of the rendered chat.
std::string cut_after_final_message(const std::string& rendered,
                                    const nlohmann::ordered_json& messages) {
  RINGLM_USER_CHECK(messages.is_array() && !messages.empty(),
                    "continue_final_message needs at least one message");
  const auto& last = messages.back();
  RINGLM_USER_CHECK(last.is_object() && last.contains("content"),
                    "continue_final_message: the final message has no content");
  std::string final_message;
  const auto& content = last["content"];
  if (content.is_array()) {
    bool found = false;
    for (auto it = content.rbegin(); it != content.rend() && !found; ++it) {
      if (it->is_object() && it->contains("text") && (*it)["text"].is_string()) {
        final_message = (*it)["text"].get<std::string>();
        found = true;
      }
    }
    RINGLM_USER_CHECK(found,
                      "continue_final_message is set but we could not find any text to continue in "
                      "the final message!");
  } else {
    RINGLM_USER_CHECK(content.is_string(),
                      "continue_final_message: final content must be a string");
    final_message = content.get<std::string>();
  }
  std::string stripped = py::strip(final_message, std::nullopt, true, true);
  size_t loc = rendered.rfind(stripped);
  RINGLM_USER_CHECK(loc != std::string::npos,
                    "continue_final_message is set but the final message does not appear in the "
                    "chat after applying the chat template!");
  std::string lstripped = py::strip(final_message, std::nullopt, true, false);
  // Python: rendered[loc:loc+len(lstripped)] == final_message holds only when the message has no
  // leading whitespace and the template kept its trailing whitespace.
  if (rendered.compare(loc, lstripped.size(), final_message) == 0)
    return rendered.substr(0, loc + lstripped.size());
  return rendered.substr(0, loc + stripped.size());
}

}  // namespace

std::string render_chat(const Template& tmpl, const ChatTemplateInputs& in) {
  RINGLM_USER_CHECK(!(in.continue_final_message && in.add_generation_prompt),
                    "continue_final_message and add_generation_prompt are not compatible");
  RINGLM_USER_CHECK(in.special_tokens.is_object(), "special_tokens must be a JSON object");
  RINGLM_USER_CHECK(in.extra.is_object(), "chat template kwargs must be a JSON object");
  nlohmann::ordered_json ctx = nlohmann::ordered_json::object();
  ctx["messages"] = in.messages;
  ctx["tools"] = in.tools;
  ctx["documents"] = in.documents;
  ctx["add_generation_prompt"] = in.add_generation_prompt;
  for (auto it = in.special_tokens.begin(); it != in.special_tokens.end(); ++it)
    ctx[it.key()] = it.value();
  for (auto it = in.extra.begin(); it != in.extra.end(); ++it) {
    const std::string& k = it.key();
    RINGLM_USER_CHECK(
        k != "messages" && k != "tools" && k != "documents" && k != "add_generation_prompt",
        "chat template kwarg '", k, "' collides with a reserved argument");
    ctx[k] = it.value();
  }
  std::string out = tmpl.render(ctx, in.options);
  if (in.continue_final_message) out = cut_after_final_message(out, in.messages);
  return out;
}

std::string render_chat(const std::string& template_source, const ChatTemplateInputs& in) {
  return render_chat(Template::parse(template_source), in);
}

}  // namespace ringlm::jinja
