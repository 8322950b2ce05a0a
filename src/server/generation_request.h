// A parsed API request: what the engine runs plus how the answer is shaped. Parsers for the
// OpenAI bodies (chat completions, completions) live here; Anthropic's in anthropic.h.
#pragma once

#include <string>
#include <vector>

#include "engine/engine.h"
#include "server/chat_prompt.h"
#include "server/json_fields.h"

namespace ringlm::server {

enum class Api { Chat, Completion, Messages };

struct GenerationRequest {
  Api api = Api::Chat;
  engine::Request engine;
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage
  bool logprobs = false;       // return per-token logprobs
  int top_logprobs = 0;
  bool parse_tools = false;  // tools given and tool_choice != "none": parse calls from output
};

struct ParseContext {
  const Tokenizer& tokenizer;
  const ChatPrompter& prompter;
  int64_t max_model_len = 0;
  int64_t max_sequence_tokens = 0;  // <= max_model_len: also bounded by the KV cache
};

// Shared by every API: temperature (upper bound given), top_p, top_k, min_p, penalties,
// logit_bias, seed, stop strings and ids, ignore_eos, min_tokens, n.
void parse_sampling(const Json& body, double max_temperature, GenerationRequest& out);
// max_tokens when given (or `fallback` when not, clipped to what the context and the KV cache
// leave), at least 1, and prompt + max_tokens within the context; sets out.engine.stop.max_tokens.
void set_max_tokens(std::optional<int64_t> max_tokens, const char* param, int64_t fallback,
                    const ParseContext& ctx, GenerationRequest& out);

GenerationRequest parse_chat_request(const Json& body, const ParseContext& ctx);
GenerationRequest parse_completion_request(const Json& body, const ParseContext& ctx);

}  // namespace ringlm::server
