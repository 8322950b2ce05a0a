// Tool calls in model output, back to OpenAI `tool_calls`. Each model family writes them its
// own way (the chat templates in tests/fixtures/chat_templates show what they are taught):
//   Llama 3.x:   {"name": "f", "parameters": {...}}  (alone, optionally after <|python_tag|>,
//                several separated by ';')
//   Qwen/Hermes: <tool_call>\n{"name": "f", "arguments": {...}}\n</tool_call>  (after any text)
//   Mistral:     [TOOL_CALLS][{"name": "f", "arguments": {...}}, ...]  or, v11+ tokenizers,
//                [TOOL_CALLS]f[ARGS]{...}
// Output that does not parse as calls stays content: nothing the model wrote is lost.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/engine.h"

namespace ringlm::server {

enum class ToolFormat { None, Llama3Json, Hermes, Mistral };

// The format a chat template teaches (None when it teaches none we parse).
ToolFormat detect_tool_format(const std::string& chat_template);
const char* tool_format_name(ToolFormat format);
// The text that starts tool calls in this format ("" for None). Llama 3 also starts with '{'.
const char* tool_call_marker(ToolFormat format);

// Mistral's [TOOL_CALLS] and Llama 3's <|python_tag|> are special tokens, which the engine's
// detokenizer leaves out of the text. When an event carries the marker's token id and its text
// lacks the marker, the marker is put back in front of the event's text (exact when the event
// holds one token, as decode events do).
void restore_tool_marker(engine::Event& event, int32_t marker_id, const std::string& marker);

struct ToolCall {
  std::string id;  // call_... (9 alphanumerics for Mistral, which its templates require)
  std::string name;
  std::string arguments;  // JSON object text
};

struct ParsedOutput {
  std::string content;  // text outside the calls (the whole text when there are none)
  std::vector<ToolCall> calls;
};

ParsedOutput parse_tool_calls(ToolFormat format, const std::string& text);

// Streaming: passes content through as it comes, holding back text that may start a tool call;
// once a call starts, everything after it is held and parsed at the end.
class ToolCallStreamSplitter {
 public:
  explicit ToolCallStreamSplitter(ToolFormat format) : format_(format) {}
  // Returns the content that can be streamed now.
  std::string push(const std::string& delta);
  // The held text, parsed; its content part is what push() has not returned yet.
  ParsedOutput finish();

 private:
  ToolFormat format_;
  std::string pending_;  // held back: may start a call (or does)
  bool in_call_ = false;
  bool seen_text_ = false;  // non-whitespace already streamed (Llama 3 JSON must come first)
};

}  // namespace ringlm::server
