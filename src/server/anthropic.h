// The Anthropic Messages API (/v1/messages): request -> GenerationRequest through the chat
// template, and the response and its streaming event grammar (message_start,
// content_block_start, ping, content_block_delta (text_delta / input_json_delta),
// content_block_stop, message_delta, message_stop).
#pragma once

#include <string>
#include <vector>

#include "server/generation_request.h"
#include "server/openai_format.h"

namespace ringlm::server {

// Anthropic content blocks -> OpenAI-style messages the chat template understands.
Json anthropic_to_chat_messages(const Json& body);
GenerationRequest parse_messages_request(const Json& body, const ParseContext& ctx);

// "end_turn", "max_tokens", "stop_sequence", "tool_use".
std::string anthropic_stop_reason(engine::FinishReason reason, const std::string& stop_matched,
                                  bool tool_use);

Json anthropic_response(const ResponseMeta& meta, const GenerationRequest& request,
                        const ChoiceResult& choice, const engine::Usage& usage,
                        ToolFormat tool_format);

class AnthropicStream {
 public:
  AnthropicStream(ResponseMeta meta, const GenerationRequest& request, ToolFormat tool_format);
  std::string start();  // message_start, the text block's start, a ping
  std::string on_event(const engine::Event& event);
  std::string on_done(const engine::Usage& usage);

 private:
  static std::string sse(const char* name, const Json& data);

  ResponseMeta meta_;
  const GenerationRequest& request_;
  ToolCallStreamSplitter splitter_;
  engine::FinishReason finish_ = engine::FinishReason::None;
  std::string stop_matched_;
  bool tool_use_ = false;
};

}  // namespace ringlm::server
