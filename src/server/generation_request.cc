#include "server/generation_request.h"

#include <limits>

#include "server/api_error.h"

namespace ringlm::server {

namespace {

constexpr int kMaxChoices = 128;
constexpr int kMaxTopLogprobs = engine::kMaxLogprobs;
constexpr size_t kMaxStopStrings = 16;

void check_range(const char* name, double v, double lo, double hi, bool lo_open = false) {
  if (v < lo || v > hi || (lo_open && v == lo)) {
    bad_request(name, std::string("'") + name + "' is " + std::to_string(v) + "; it must be in " +
                          (lo_open ? "(" : "[") + std::to_string(lo) + ", " + std::to_string(hi) +
                          "]");
  }
}

std::vector<std::string> parse_stop(const Json& body, const char* name) {
  std::vector<std::string> out;
  const Json* stop = field(body, name);
  if (!stop) return out;
  if (stop->is_string()) {
    out.push_back(stop->get<std::string>());
  } else if (stop->is_array()) {
    for (const auto& s : *stop) {
      if (!s.is_string())
        bad_request(name, std::string("'") + name + "' must be a string or an array of strings");
      out.push_back(s.get<std::string>());
    }
  } else {
    bad_request(name, std::string("'") + name + "' must be a string or an array of strings");
  }
  if (out.size() > kMaxStopStrings)
    bad_request(name, std::string("at most ") + std::to_string(kMaxStopStrings) +
                          " stop strings are allowed");
  for (const auto& s : out)
    if (s.empty()) bad_request(name, "stop strings must not be empty");
  return out;
}

}  // namespace

void parse_sampling(const Json& body, double max_temperature, GenerationRequest& out) {
  engine::SamplingParams& s = out.engine.sampling;
  if (auto v = number_field(body, "temperature")) {
    check_range("temperature", *v, 0.0, max_temperature);
    s.temperature = static_cast<float>(*v);
  }
  if (auto v = number_field(body, "top_p")) {
    check_range("top_p", *v, 0.0, 1.0, /*lo_open=*/true);
    s.top_p = static_cast<float>(*v);
  }
  if (auto v = integer_field(body, "top_k")) {
    if (*v < -1 || *v > std::numeric_limits<int>::max())
      bad_request("top_k", "'top_k' must be -1 or 0 (off) or a positive integer");
    s.top_k = *v < 0 ? 0 : static_cast<int>(*v);
  }
  if (auto v = number_field(body, "min_p")) {
    check_range("min_p", *v, 0.0, 1.0);
    s.min_p = static_cast<float>(*v);
  }
  if (auto v = number_field(body, "repetition_penalty")) {
    if (*v <= 0) bad_request("repetition_penalty", "'repetition_penalty' must be > 0");
    s.repetition_penalty = static_cast<float>(*v);
  }
  if (auto v = number_field(body, "presence_penalty")) {
    check_range("presence_penalty", *v, -2.0, 2.0);
    s.presence_penalty = static_cast<float>(*v);
  }
  if (auto v = number_field(body, "frequency_penalty")) {
    check_range("frequency_penalty", *v, -2.0, 2.0);
    s.frequency_penalty = static_cast<float>(*v);
  }
  if (const Json* bias = field(body, "logit_bias")) {
    if (!bias->is_object())
      bad_request("logit_bias", "'logit_bias' must be an object of token id -> bias");
    for (auto it = bias->begin(); it != bias->end(); ++it) {
      int64_t id = -1;
      try {
        size_t used = 0;
        id = std::stoll(it.key(), &used);
        if (used != it.key().size()) id = -1;
      } catch (const std::exception&) {
        id = -1;
      }
      if (id < 0 || id > std::numeric_limits<int32_t>::max())
        bad_request("logit_bias", "logit_bias key '" + it.key() + "' is not a token id");
      if (!it.value().is_number()) bad_request("logit_bias", "logit_bias values must be numbers");
      const double b = it.value().get<double>();
      check_range("logit_bias", b, -100.0, 100.0);
      s.logit_bias.emplace_back(static_cast<int32_t>(id), static_cast<float>(b));
    }
  }
  if (auto v = integer_field(body, "seed")) s.seed = static_cast<uint64_t>(*v);
  out.engine.stop.stop_strings = parse_stop(body, "stop");
  if (const Json* ids = field(body, "stop_token_ids")) {
    if (!ids->is_array()) bad_request("stop_token_ids", "'stop_token_ids' must be an array");
    for (const auto& id : *ids) {
      if (!id.is_number_integer() || id.get<int64_t>() < 0 ||
          id.get<int64_t>() > std::numeric_limits<int32_t>::max())
        bad_request("stop_token_ids", "'stop_token_ids' must hold token ids");
      out.engine.stop.stop_token_ids.push_back(static_cast<int32_t>(id.get<int64_t>()));
    }
  }
  if (auto v = bool_field(body, "ignore_eos")) out.engine.stop.ignore_eos = *v;
  if (auto v = integer_field(body, "min_tokens")) {
    if (*v < 0) bad_request("min_tokens", "'min_tokens' must be >= 0");
    out.engine.stop.min_tokens = *v;
  }
  if (auto v = integer_field(body, "n")) {
    if (*v < 1 || *v > kMaxChoices)
      bad_request("n", "'n' must be between 1 and " + std::to_string(kMaxChoices));
    out.engine.n = static_cast<int>(*v);
  }
  if (auto v = bool_field(body, "stream")) out.stream = *v;
  if (const Json* so = field(body, "stream_options")) {
    if (!so->is_object()) bad_request("stream_options", "'stream_options' must be an object");
    if (!out.stream)
      bad_request("stream_options", "'stream_options' is only allowed when 'stream' is true");
    if (auto v = bool_field(*so, "include_usage")) out.include_usage = *v;
  }
}

void set_max_tokens(std::optional<int64_t> max_tokens, const char* param, int64_t fallback,
                    const ParseContext& ctx, GenerationRequest& out) {
  const int64_t prompt = static_cast<int64_t>(out.engine.prompt.size());
  if (prompt >= ctx.max_model_len) {
    bad_request("messages", "the prompt is " + std::to_string(prompt) +
                                " tokens; this model's context is " +
                                std::to_string(ctx.max_model_len) + " tokens");
  }
  const int64_t room = ctx.max_model_len - prompt;
  if (max_tokens) {
    if (*max_tokens < 1) bad_request(param, std::string("'") + param + "' must be at least 1");
    if (*max_tokens > room) {
      bad_request(param, "the prompt (" + std::to_string(prompt) + " tokens) plus " + param + " (" +
                             std::to_string(*max_tokens) +
                             ") is more than this model's context of " +
                             std::to_string(ctx.max_model_len) + " tokens");
    }
    out.engine.stop.max_tokens = *max_tokens;
  } else {
    const int64_t cap = ctx.max_sequence_tokens > 0 ? ctx.max_sequence_tokens : ctx.max_model_len;
    if (prompt >= cap) {
      bad_request("messages", "the prompt is " + std::to_string(prompt) +
                                  " tokens; the KV cache holds at most " + std::to_string(cap) +
                                  " tokens for one request");
    }
    out.engine.stop.max_tokens = std::min(fallback, cap - prompt);
  }
}

GenerationRequest parse_chat_request(const Json& body, const ParseContext& ctx) {
  GenerationRequest out;
  out.api = Api::Chat;
  string_field(body, "model");  // type-checked; any name is served by the one model
  const Json* messages = field(body, "messages");
  if (!messages) bad_request("messages", "'messages' is required");
  const Json normalized = ChatPrompter::normalize_messages(*messages);
  Json tools = ChatPrompter::normalize_tools(field(body, "tools"));
  std::string tool_choice = "auto";
  if (const Json* tc = field(body, "tool_choice")) {
    if (tc->is_string()) {
      tool_choice = tc->get<std::string>();
      if (tool_choice != "auto" && tool_choice != "none" && tool_choice != "required")
        bad_request("tool_choice", "'tool_choice' must be \"auto\", \"none\" or \"required\"");
    } else if (tc->is_object()) {
      tool_choice = "named";
    } else {
      bad_request("tool_choice", "'tool_choice' must be a string or an object");
    }
    if (tool_choice == "required" || tool_choice == "named")
      bad_request("tool_choice",
                  "tool_choice \"required\" or a named function needs constrained decoding, "
                  "which this server does not have; use \"auto\"");
  }
  if (tool_choice == "none") tools = Json();
  out.parse_tools = !tools.is_null();
  const Json* kwargs = field(body, "chat_template_kwargs");
  out.engine.prompt = ctx.prompter.encode(normalized, tools, kwargs ? *kwargs : Json());
  if (out.engine.prompt.empty()) bad_request("messages", "the rendered prompt is empty");
  parse_sampling(body, 2.0, out);
  if (auto lp = bool_field(body, "logprobs")) out.logprobs = *lp;
  if (auto top = integer_field(body, "top_logprobs")) {
    if (*top < 0 || *top > kMaxTopLogprobs)
      bad_request("top_logprobs",
                  "'top_logprobs' must be between 0 and " + std::to_string(kMaxTopLogprobs));
    if (!out.logprobs) bad_request("top_logprobs", "'top_logprobs' needs 'logprobs' set to true");
    out.top_logprobs = static_cast<int>(*top);
  }
  out.engine.sampling.want_logprobs = out.logprobs;
  out.engine.sampling.logprobs = out.top_logprobs;
  auto max_tokens = integer_field(body, "max_completion_tokens");
  const char* param = "max_completion_tokens";
  if (!max_tokens) {
    max_tokens = integer_field(body, "max_tokens");
    param = "max_tokens";
  }
  // No limit given: up to the end of the context (OpenAI's and vLLM's default).
  set_max_tokens(max_tokens, param, std::numeric_limits<int64_t>::max(), ctx, out);
  return out;
}

GenerationRequest parse_completion_request(const Json& body, const ParseContext& ctx) {
  GenerationRequest out;
  out.api = Api::Completion;
  string_field(body, "model");
  const Json* prompt = field(body, "prompt");
  if (!prompt) bad_request("prompt", "'prompt' is required");
  // A string, a list of token ids, or a list holding one of those.
  const Json* one = prompt;
  if (prompt->is_array() && !prompt->empty() && !(*prompt)[0].is_number()) {
    if (prompt->size() != 1)
      bad_request("prompt", "only one prompt per request is supported; send one request each");
    one = &(*prompt)[0];
  }
  if (one->is_string()) {
    out.engine.prompt = ctx.tokenizer.encode(one->get<std::string>(), /*add_special_tokens=*/true);
  } else if (one->is_array()) {
    for (const auto& id : *one) {
      if (!id.is_number_integer() || id.get<int64_t>() < 0 ||
          id.get<int64_t>() > std::numeric_limits<int32_t>::max())
        bad_request("prompt", "'prompt' token arrays must hold non-negative integers");
      out.engine.prompt.push_back(static_cast<int32_t>(id.get<int64_t>()));
    }
  } else {
    bad_request("prompt", "'prompt' must be a string or an array of token ids");
  }
  if (out.engine.prompt.empty()) bad_request("prompt", "'prompt' is empty");
  if (auto echo = bool_field(body, "echo"); echo && *echo)
    bad_request("echo", "'echo' is not supported");
  if (auto best_of = integer_field(body, "best_of"); best_of && *best_of != 1)
    bad_request("best_of", "'best_of' other than 1 is not supported");
  if (string_field(body, "suffix")) bad_request("suffix", "'suffix' is not supported");
  parse_sampling(body, 2.0, out);
  if (auto lp = integer_field(body, "logprobs")) {
    if (*lp < 0 || *lp > kMaxTopLogprobs)
      bad_request("logprobs",
                  "'logprobs' must be between 0 and " + std::to_string(kMaxTopLogprobs));
    out.logprobs = true;
    out.top_logprobs = static_cast<int>(*lp);
  }
  out.engine.sampling.want_logprobs = out.logprobs;
  out.engine.sampling.logprobs = out.top_logprobs;
  set_max_tokens(integer_field(body, "max_tokens"), "max_tokens", 16, ctx, out);
  return out;
}

}  // namespace ringlm::server
