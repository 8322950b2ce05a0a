#include "tokenizer/tokenizer_config.h"

#include "tokenizer/json_util.h"

namespace ringlm {

namespace {

using tok::json;

// "<s>" or {"content": "<s>", ...} (an AddedToken dict); null -> nullopt.
std::optional<std::string> token_field(const json& j, const char* key, const std::string& where) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return std::nullopt;
  if (it->is_string()) return it->get<std::string>();
  RINGLM_USER_CHECK(it->is_object(), where, ".", key,
                    ": expected a string or an AddedToken object");
  return tok::get_string(*it, "content", where + "." + key);
}

std::optional<bool> bool_field(const json& j, const char* key, const std::string& where) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return std::nullopt;
  RINGLM_USER_CHECK(it->is_boolean(), where, ".", key, ": expected a boolean");
  return it->get<bool>();
}

}  // namespace

TokenizerConfig TokenizerConfig::parse(std::string_view text, const std::string& where) {
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception& e) {
    RINGLM_USER_CHECK(false, where, ": invalid JSON: ", e.what());
  }
  RINGLM_USER_CHECK(j.is_object(), where, ": expected a JSON object");
  TokenizerConfig c;
  c.bos_token = token_field(j, "bos_token", where);
  c.eos_token = token_field(j, "eos_token", where);
  c.pad_token = token_field(j, "pad_token", where);
  c.unk_token = token_field(j, "unk_token", where);
  c.add_bos_token = bool_field(j, "add_bos_token", where);
  c.add_eos_token = bool_field(j, "add_eos_token", where);
  c.clean_up_tokenization_spaces =
      bool_field(j, "clean_up_tokenization_spaces", where).value_or(false);
  c.tokenizer_class = tok::get_string_or(j, "tokenizer_class", "", where);
  if (auto it = j.find("model_max_length"); it != j.end() && !it->is_null()) {
    RINGLM_USER_CHECK(it->is_number(), where, ".model_max_length: expected a number");
    c.model_max_length = it->get<double>();
  }
  if (auto it = j.find("chat_template"); it != j.end() && !it->is_null()) {
    if (it->is_string()) {
      c.chat_templates["default"] = it->get<std::string>();
    } else {
      RINGLM_USER_CHECK(it->is_array(), where,
                        ".chat_template: expected a string or a list of {name, template}");
      for (size_t i = 0; i < it->size(); ++i) {
        const std::string w = where + ".chat_template[" + std::to_string(i) + "]";
        c.chat_templates[tok::get_string((*it)[i], "name", w)] =
            tok::get_string((*it)[i], "template", w);
      }
    }
  }
  return c;
}

}  // namespace ringlm
