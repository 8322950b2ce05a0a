// OpenAI chat messages (and tools) -> prompt token ids through the checkpoint's chat template,
// as transformers' apply_chat_template(add_generation_prompt=True) and vLLM do: content given as
// an array of text parts is joined with "\n"; assistant tool-call arguments given as JSON text
// are parsed to objects (what templates expect); "developer" is "system".
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "server/json_fields.h"
#include "server/tool_calls.h"
#include "tokenizer/jinja/template.h"
#include "tokenizer/tokenizer.h"

namespace ringlm::server {

class ChatPrompter {
 public:
  // Parses the tokenizer's default chat template once; a checkpoint without one can still serve
  // /v1/completions (chat requests then get a 400).
  explicit ChatPrompter(const Tokenizer& tokenizer);

  bool has_template() const { return parsed_ != nullptr; }
  ToolFormat tool_format() const { return tool_format_; }
  // The tool-call marker's token id when the tokenizer has it as a special token (then the
  // detokenized text lacks it: restore_tool_marker), else -1.
  int32_t tool_marker_token() const { return tool_marker_token_; }

  // Validates and normalizes OpenAI messages; a 400 naming the bad message otherwise.
  static Json normalize_messages(const Json& messages);
  // Validates OpenAI tools ([{"type": "function", "function": {"name", ...}}]); null if none.
  static Json normalize_tools(const Json* tools);

  // The rendered prompt text (messages and tools already normalized). 400 on template errors.
  std::string render(const Json& messages, const Json& tools, const Json& template_kwargs) const;
  std::vector<int32_t> encode(const Json& messages, const Json& tools,
                              const Json& template_kwargs) const;

 private:
  const Tokenizer& tokenizer_;
  std::shared_ptr<const jinja::Template> parsed_;
  Json special_tokens_ = Json::object();
  ToolFormat tool_format_ = ToolFormat::None;
  int32_t tool_marker_token_ = -1;
};

}  // namespace ringlm::server
