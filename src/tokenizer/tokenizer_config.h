// tokenizer_config.json: special token names, add_bos/add_eos, chat templates, model_max_length.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>

namespace ringlm {

struct TokenizerConfig {
  std::optional<std::string> bos_token, eos_token, pad_token, unk_token;
  std::optional<bool> add_bos_token, add_eos_token;
  // Chat templates by name; a plain string template is stored as "default".
  std::map<std::string, std::string> chat_templates;
  std::optional<double> model_max_length;  // often 1e30 ("unlimited") in real files
  bool clean_up_tokenization_spaces = false;
  std::string tokenizer_class;

  // Parses the JSON text; `where` names the file in errors. Unknown keys are ignored.
  static TokenizerConfig parse(std::string_view json_text, const std::string& where);
};

}  // namespace ringlm
