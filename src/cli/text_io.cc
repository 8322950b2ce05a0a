#include "cli/text_io.h"

#include <algorithm>

#include "io/model_config.h"
#include "tokenizer/jinja/chat_template.h"

namespace ringlm::cli {

std::vector<int32_t> stop_tokens(const std::string& model_dir, const Tokenizer& tokenizer) {
  const io::ModelConfig config = io::load_model_config(model_dir);
  const io::GenerationConfig generation = io::load_generation_config(model_dir);
  std::vector<int32_t> out;
  for (int64_t id : io::stop_token_ids(config, generation)) out.push_back(static_cast<int32_t>(id));
  if (tokenizer.eos_id() >= 0 &&
      std::find(out.begin(), out.end(), tokenizer.eos_id()) == out.end()) {
    out.push_back(tokenizer.eos_id());
  }
  return out;
}

std::vector<int32_t> encode_chat(const Tokenizer& tokenizer, const nlohmann::ordered_json& messages,
                                 const nlohmann::ordered_json& template_kwargs) {
  const auto source = tokenizer.chat_template();
  RINGLM_USER_CHECK(source.has_value(),
                    "this checkpoint has no chat template (tokenizer_config.json chat_template)");
  jinja::ChatTemplateInputs in;
  in.messages = messages;
  in.add_generation_prompt = true;
  const auto& c = tokenizer.config();
  if (c.bos_token) in.special_tokens["bos_token"] = *c.bos_token;
  if (c.eos_token) in.special_tokens["eos_token"] = *c.eos_token;
  if (c.pad_token) in.special_tokens["pad_token"] = *c.pad_token;
  if (c.unk_token) in.special_tokens["unk_token"] = *c.unk_token;
  in.extra = template_kwargs;
  const std::string prompt = jinja::render_chat(*source, in);
  return tokenizer.encode(prompt, /*add_special_tokens=*/false);
}

}  // namespace ringlm::cli
