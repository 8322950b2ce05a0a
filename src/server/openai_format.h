// OpenAI response bodies and stream chunks (chat.completion, chat.completion.chunk,
// text_completion) from engine events.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "server/generation_request.h"
#include "server/json_fields.h"
#include "server/tool_calls.h"

namespace ringlm::server {

struct ResponseMeta {
  std::string id;       // chatcmpl-... / cmpl-... / msg_...
  int64_t created = 0;  // Unix seconds
  std::string model;    // the served model name
};

// One choice's output, accumulated from its events.
struct ChoiceResult {
  std::string text;
  std::vector<engine::TokenInfo> tokens;  // only kept when logprobs were asked for
  engine::FinishReason finish = engine::FinishReason::None;
  std::string error;         // finish == Error
  std::string stop_matched;  // finish == Stop on a stop string
  void add(const engine::Event& event, bool keep_tokens);
};

Json usage_json(const engine::Usage& usage);
// "stop", "length", "tool_calls" (whenever calls were parsed); cancelled/error choices report
// "abort"/"error".
std::string finish_reason_text(engine::FinishReason reason, bool tool_calls);
Json tool_calls_json(const std::vector<ToolCall>& calls, bool with_index);

// Chat logprobs: {"content": [{"token", "logprob", "bytes", "top_logprobs"}]}.
Json chat_logprobs_json(const std::vector<engine::TokenInfo>& tokens, const Tokenizer& tokenizer);
// Completions logprobs: {"tokens", "token_logprobs", "top_logprobs", "text_offset"}.
Json completion_logprobs_json(const std::vector<engine::TokenInfo>& tokens,
                              const Tokenizer& tokenizer, int64_t first_offset);

// The whole non-streamed response.
Json openai_response(const ResponseMeta& meta, const GenerationRequest& request,
                     const std::vector<ChoiceResult>& choices, const engine::Usage& usage,
                     const Tokenizer& tokenizer, ToolFormat tool_format);

// SSE for a streamed response: "data: {chunk}\n\n" lines, then "data: [DONE]\n\n".
class OpenAiStream {
 public:
  OpenAiStream(ResponseMeta meta, const GenerationRequest& request, const Tokenizer& tokenizer,
               ToolFormat tool_format);
  std::string on_event(const engine::Event& event);
  std::string on_done(const engine::Usage& usage);

 private:
  Json chunk(Json choice) const;
  std::string sse(const Json& chunk) const;

  ResponseMeta meta_;
  const GenerationRequest& request_;
  const Tokenizer& tokenizer_;
  std::vector<ToolCallStreamSplitter> splitters_;
  std::vector<bool> started_;
  std::vector<int64_t> text_offsets_;
};

}  // namespace ringlm::server
