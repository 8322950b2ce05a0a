#include "server/tool_calls.h"

#include <nlohmann/json.hpp>

#include "server/json_fields.h"

namespace ringlm::server {

namespace {

constexpr const char* kHermesOpen = "<tool_call>";
constexpr const char* kHermesClose = "</tool_call>";
constexpr const char* kMistralMarker = "[TOOL_CALLS]";
constexpr const char* kMistralArgs = "[ARGS]";
constexpr const char* kPythonTag = "<|python_tag|>";

bool is_space(char c) {
  return c == ' ' || c == '\n' || c == '\t' || c == '\r';
}

std::string trim(const std::string& s) {
  size_t b = 0, e = s.size();
  while (b < e && is_space(s[b])) ++b;
  while (e > b && is_space(s[e - 1])) --e;
  return s.substr(b, e - b);
}

// End (one past) of the balanced JSON object or array starting at `start`, honouring strings;
// npos when it is not closed.
size_t json_value_end(const std::string& s, size_t start) {
  int depth = 0;
  bool in_string = false;
  for (size_t i = start; i < s.size(); ++i) {
    const char c = s[i];
    if (in_string) {
      if (c == '\\') {
        ++i;
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '{' || c == '[') {
      ++depth;
    } else if (c == '}' || c == ']') {
      if (--depth == 0) return i + 1;
    }
  }
  return std::string::npos;
}

std::string call_id(ToolFormat format) {
  return format == ToolFormat::Mistral ? random_id("", 9) : random_id("call_", 24);
}

// {"name": ..., "arguments"|"parameters": {...}} -> a call; false if it is not one.
bool object_to_call(const nlohmann::ordered_json& obj, ToolFormat format, ToolCall& call) {
  if (!obj.is_object() || !obj.contains("name") || !obj["name"].is_string()) return false;
  call.id = call_id(format);
  call.name = obj["name"].get<std::string>();
  const char* key = obj.contains("arguments") ? "arguments" : "parameters";
  if (!obj.contains(key) || obj[key].is_null()) {
    call.arguments = "{}";
  } else if (obj[key].is_string()) {
    call.arguments = obj[key].get<std::string>();  // already JSON text (some models do this)
  } else if (obj[key].is_object()) {
    call.arguments = dump(obj[key]);
  } else {
    return false;
  }
  return true;
}

bool parse_json(const std::string& text, nlohmann::ordered_json& out) {
  try {
    out = nlohmann::ordered_json::parse(text);
    return true;
  } catch (const nlohmann::json::exception&) {
    return false;
  }
}

// Objects one after another, separated by whitespace or ';' (Llama 3).
bool parse_object_sequence(const std::string& s, ToolFormat format, std::vector<ToolCall>& calls) {
  size_t i = 0;
  while (true) {
    while (i < s.size() && (is_space(s[i]) || s[i] == ';')) ++i;
    if (i == s.size()) return !calls.empty();
    if (s[i] != '{') return false;
    const size_t end = json_value_end(s, i);
    nlohmann::ordered_json obj;
    ToolCall call;
    if (end == std::string::npos || !parse_json(s.substr(i, end - i), obj) ||
        !object_to_call(obj, format, call))
      return false;
    calls.push_back(std::move(call));
    i = end;
  }
}

bool parse_hermes(const std::string& s, size_t first, std::vector<ToolCall>& calls) {
  size_t pos = first;
  const size_t open_len = std::string(kHermesOpen).size();
  while (pos != std::string::npos) {
    const size_t body = pos + open_len;
    size_t close = s.find(kHermesClose, body);
    const std::string inner =
        trim(s.substr(body, close == std::string::npos ? std::string::npos : close - body));
    nlohmann::ordered_json obj;
    ToolCall call;
    if (!parse_json(inner, obj) || !object_to_call(obj, ToolFormat::Hermes, call)) return false;
    calls.push_back(std::move(call));
    if (close == std::string::npos) break;  // unclosed last call (generation ended)
    const size_t after = close + std::string(kHermesClose).size();
    pos = s.find(kHermesOpen, after);
    if (pos == std::string::npos && !trim(s.substr(after)).empty()) return false;
  }
  return !calls.empty();
}

bool parse_mistral(const std::string& s, std::vector<ToolCall>& calls) {
  // s follows the first [TOOL_CALLS].
  const std::string body = trim(s);
  if (!body.empty() && body[0] == '[') {
    nlohmann::ordered_json arr;
    const size_t end = json_value_end(body, 0);
    if (end == std::string::npos || !parse_json(body.substr(0, end), arr) || !arr.is_array())
      return false;
    for (const auto& obj : arr) {
      ToolCall call;
      if (!object_to_call(obj, ToolFormat::Mistral, call)) return false;
      calls.push_back(std::move(call));
    }
    return !calls.empty() && trim(body.substr(end)).empty();
  }
  // name[ARGS]{...}[TOOL_CALLS]name[ARGS]{...}
  size_t pos = 0;
  const std::string marker = kMistralMarker, args = kMistralArgs;
  while (pos < body.size()) {
    const size_t a = body.find(args, pos);
    if (a == std::string::npos) return false;
    ToolCall call;
    call.id = call_id(ToolFormat::Mistral);
    call.name = trim(body.substr(pos, a - pos));
    size_t j = a + args.size();
    while (j < body.size() && is_space(body[j])) ++j;
    const size_t end =
        j < body.size() && body[j] == '{' ? json_value_end(body, j) : std::string::npos;
    nlohmann::ordered_json obj;
    if (call.name.empty() || end == std::string::npos || !parse_json(body.substr(j, end - j), obj))
      return false;
    call.arguments = dump(obj);
    calls.push_back(std::move(call));
    size_t k = end;
    while (k < body.size() && is_space(body[k])) ++k;
    if (k == body.size()) break;
    if (body.compare(k, marker.size(), marker) != 0) return false;
    pos = k + marker.size();
  }
  return !calls.empty();
}

// Length of the longest suffix of `text` that is a proper prefix of `marker`.
size_t partial_marker_suffix(const std::string& text, const std::string& marker) {
  for (size_t n = std::min(text.size(), marker.size() - 1); n > 0; --n) {
    if (text.compare(text.size() - n, n, marker, 0, n) == 0) return n;
  }
  return 0;
}

}  // namespace

ToolFormat detect_tool_format(const std::string& chat_template) {
  if (chat_template.find(kHermesOpen) != std::string::npos) return ToolFormat::Hermes;
  if (chat_template.find(kMistralMarker) != std::string::npos) return ToolFormat::Mistral;
  if (chat_template.find(kPythonTag) != std::string::npos ||
      chat_template.find("\"parameters\": dictionary") != std::string::npos)
    return ToolFormat::Llama3Json;
  return ToolFormat::None;
}

const char* tool_format_name(ToolFormat format) {
  switch (format) {
    case ToolFormat::Llama3Json:
      return "llama3_json";
    case ToolFormat::Hermes:
      return "hermes";
    case ToolFormat::Mistral:
      return "mistral";
    case ToolFormat::None:
      break;
  }
  return "none";
}

const char* tool_call_marker(ToolFormat format) {
  switch (format) {
    case ToolFormat::Llama3Json:
      return kPythonTag;
    case ToolFormat::Hermes:
      return kHermesOpen;
    case ToolFormat::Mistral:
      return kMistralMarker;
    case ToolFormat::None:
      break;
  }
  return "";
}

void restore_tool_marker(engine::Event& event, int32_t marker_id, const std::string& marker) {
  if (marker_id < 0 || marker.empty() || event.text.find(marker) != std::string::npos) return;
  for (const auto& t : event.tokens) {
    if (t.token == marker_id) {
      event.text = marker + event.text;
      return;
    }
  }
}

ParsedOutput parse_tool_calls(ToolFormat format, const std::string& text) {
  ParsedOutput out;
  out.content = text;
  std::vector<ToolCall> calls;
  switch (format) {
    case ToolFormat::None:
      return out;
    case ToolFormat::Hermes: {
      const size_t first = text.find(kHermesOpen);
      if (first == std::string::npos || !parse_hermes(text, first, calls)) return out;
      out.content = trim(text.substr(0, first));
      break;
    }
    case ToolFormat::Mistral: {
      const size_t first = text.find(kMistralMarker);
      if (first == std::string::npos ||
          !parse_mistral(text.substr(first + std::string(kMistralMarker).size()), calls))
        return out;
      out.content = trim(text.substr(0, first));
      break;
    }
    case ToolFormat::Llama3Json: {
      // Only a whole output of calls counts: JSON inside prose is prose.
      std::string body = trim(text);
      const std::string tag = kPythonTag;
      if (body.compare(0, tag.size(), tag) == 0) body = body.substr(tag.size());
      if (!parse_object_sequence(body, format, calls)) return out;
      out.content.clear();
      break;
    }
  }
  out.calls = std::move(calls);
  return out;
}

std::string ToolCallStreamSplitter::push(const std::string& delta) {
  if (format_ == ToolFormat::None) return delta;
  pending_ += delta;
  if (in_call_) return "";
  if (format_ == ToolFormat::Llama3Json && !seen_text_) {
    const std::string t = trim(pending_);
    if (t.empty()) return "";
    const std::string tag = kPythonTag;
    if (t[0] == '{' ||
        tag.compare(0, std::min(t.size(), tag.size()), t, 0, std::min(t.size(), tag.size())) == 0) {
      in_call_ = t[0] == '{' || t.size() >= tag.size();
      return "";  // a call (or maybe the tag): hold it
    }
    seen_text_ = true;
  }
  const std::string marker = tool_call_marker(format_);
  const size_t at = pending_.find(marker);
  if (at != std::string::npos) {
    in_call_ = true;
    std::string out = pending_.substr(0, at);
    pending_.erase(0, at);
    return out;
  }
  const size_t hold = partial_marker_suffix(pending_, marker);
  std::string out = pending_.substr(0, pending_.size() - hold);
  pending_.erase(0, pending_.size() - hold);
  return out;
}

ParsedOutput ToolCallStreamSplitter::finish() {
  ParsedOutput out;
  if (!in_call_) {
    out.content = std::move(pending_);
  } else {
    out = parse_tool_calls(format_, pending_);
  }
  pending_.clear();
  return out;
}

}  // namespace ringlm::server
