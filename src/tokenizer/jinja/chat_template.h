// Chat-template rendering with the variables transformers' apply_chat_template passes:
//   render(messages=..., tools=..., documents=..., add_generation_prompt=...,
//          **special_tokens_map, **chat_template_kwargs)
// `tools` and `documents` are None (not undefined) when absent, as in transformers; special tokens
// (bos_token, eos_token, ...) and extra kwargs (enable_thinking, date_string, builtin_tools,
// reasoning_effort, ...) are top-level variables; extra kwargs override special tokens.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "tokenizer/jinja/template.h"

namespace ringlm::jinja {

struct ChatTemplateInputs {
  nlohmann::ordered_json messages = nlohmann::ordered_json::array();
  nlohmann::ordered_json tools;      // null: no tools (the template sees None)
  nlohmann::ordered_json documents;  // null: no documents
  bool add_generation_prompt = false;
  // transformers' continue_final_message: cut the rendering right after the final message's
  // content so that generation continues it. Incompatible with add_generation_prompt.
  bool continue_final_message = false;
  // The tokenizer's special_tokens_map, e.g. {"bos_token": "<s>", "eos_token": "</s>"}.
  nlohmann::ordered_json special_tokens = nlohmann::ordered_json::object();
  // chat_template_kwargs: {"enable_thinking": false}, {"date_string": "26 Jul 2024"}, ...
  nlohmann::ordered_json extra = nlohmann::ordered_json::object();
  RenderOptions options;
};

// Renders a parsed template; throws TemplateError (template errors, raise_exception) or
// ringlm::Error (bad inputs, continue_final_message failures).
std::string render_chat(const Template& tmpl, const ChatTemplateInputs& in);
std::string render_chat(const std::string& template_source, const ChatTemplateInputs& in);

}  // namespace ringlm::jinja
