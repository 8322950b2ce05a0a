#include "tokenizer/tokenizer.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include "tokenizer/added_vocab.h"
#include "tokenizer/bpe.h"
#include "tokenizer/decoders.h"
#include "tokenizer/detokenizer.h"
#include "tokenizer/normalizers.h"
#include "tokenizer/post_processor.h"
#include "tokenizer/pre_tokenizers.h"
#include "tokenizer/unicode.h"

namespace ringlm {

namespace {

std::optional<std::string> read_file(const std::filesystem::path& p) {
  std::ifstream f(p, std::ios::binary);
  if (!f) return std::nullopt;
  std::ostringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

}  // namespace

Tokenizer::Tokenizer() = default;
Tokenizer::Tokenizer(Tokenizer&&) noexcept = default;
Tokenizer& Tokenizer::operator=(Tokenizer&&) noexcept = default;
Tokenizer::~Tokenizer() = default;

Tokenizer Tokenizer::load(const std::string& model_dir) {
  namespace fs = std::filesystem;
  const fs::path dir(model_dir);
  const fs::path tj = dir / "tokenizer.json";
  auto text = read_file(tj);
  RINGLM_USER_CHECK(text.has_value(), "cannot read ", tj.string(),
                    " (ringlm needs a Hugging Face tokenizer.json)");
  const fs::path cj = dir / "tokenizer_config.json";
  auto config = read_file(cj);
  Tokenizer t = from_json(*text, config.value_or(std::string()), tj.string());
  if (auto jinja = read_file(dir / "chat_template.jinja"))
    t.config_.chat_templates["default"] = *jinja;
  return t;
}

Tokenizer Tokenizer::from_json(std::string_view tokenizer_json, std::string_view config_json,
                               const std::string& where) {
  using tok::json;
  json j;
  try {
    j = json::parse(tokenizer_json);
  } catch (const json::exception& e) {
    RINGLM_USER_CHECK(false, where, ": invalid JSON: ", e.what());
  }
  RINGLM_USER_CHECK(j.is_object(), where, ": expected a JSON object");
  Tokenizer t;
  const json& model = tok::field(j, "model", where);
  const std::string mtype = tok::get_string_or(model, "type", "BPE", where + ".model");
  RINGLM_USER_CHECK(mtype == "BPE", where, ".model: unsupported model type '", mtype,
                    "' (ringlm supports BPE)");
  t.model_ = std::make_unique<tok::BpeModel>(model, where + ".model");
  const json null_json;
  auto get = [&](const char* key) -> const json& {
    auto it = j.find(key);
    return it == j.end() ? null_json : *it;
  };
  t.normalizer_ = tok::parse_normalizer(get("normalizer"), where + ".normalizer");
  t.pre_tokenizer_ = tok::parse_pre_tokenizer(get("pre_tokenizer"), where + ".pre_tokenizer");
  t.post_ = std::make_unique<tok::PostProcessor>(
      tok::PostProcessor::parse(get("post_processor"), where + ".post_processor"));
  t.decoder_ =
      std::make_unique<tok::Decoder>(tok::Decoder::parse(get("decoder"), where + ".decoder"));
  t.added_ = std::make_unique<tok::AddedVocab>();
  t.added_->build(get("added_tokens"), *t.model_, t.normalizer_.get(), where + ".added_tokens");

  t.max_id_ = t.added_->max_id();
  for (const auto& [tokstr, id] : t.model_->vocab()) t.max_id_ = std::max(t.max_id_, id);
  if (!config_json.empty())
    t.config_ = TokenizerConfig::parse(config_json, "tokenizer_config.json");
  if (t.config_.bos_token) t.bos_id_ = t.token_to_id(*t.config_.bos_token);
  if (t.config_.eos_token) t.eos_id_ = t.token_to_id(*t.config_.eos_token);
  return t;
}

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool add_special_tokens,
                                       bool parse_special) const {
  std::string fixed;
  if (!tok::is_valid_utf8(text)) {
    fixed = tok::to_valid_utf8(text);
    text = fixed;
  }
  std::vector<tok::Piece> pieces;
  added_->extract_and_normalize(text, normalizer_.get(), parse_special, pieces);
  if (pre_tokenizer_) pre_tokenizer_->pre_tokenize(pieces);
  std::vector<int32_t> ids;
  ids.reserve(text.size() / 3 + 4);
  for (const tok::Piece& p : pieces) {
    if (p.id >= 0) {
      ids.push_back(p.id);
    } else {
      model_->tokenize(p.text, ids);
    }
  }
  if (add_special_tokens) post_->apply(ids);
  return ids;
}

std::string Tokenizer::decode(std::span<const int32_t> ids, bool skip_special_tokens) const {
  IncrementalDetokenizer d(*this, skip_special_tokens);
  std::string out;
  for (int32_t id : ids) out += d.push(id);
  out += d.flush();
  return out;
}

int32_t Tokenizer::token_to_id(std::string_view token) const {
  const int32_t a = added_->find_content(token);
  return a >= 0 ? a : model_->token_to_id(token);
}

std::optional<std::string> Tokenizer::id_to_token(int32_t id) const {
  if (const tok::AddedToken* a = added_->find_id(id)) return a->content;
  if (const std::string* s = model_->id_to_token(id)) return *s;
  return std::nullopt;
}

bool Tokenizer::is_special(int32_t id) const {
  return added_->is_special(id);
}

size_t Tokenizer::vocab_size() const {
  size_t n = model_->vocab_size();
  for (const auto& a : added_->tokens())
    if (model_->token_to_id(a.content) < 0) ++n;
  return n;
}

int32_t Tokenizer::max_token_id() const {
  return max_id_;
}

std::optional<std::string> Tokenizer::chat_template(std::string_view name) const {
  auto it = config_.chat_templates.find(std::string(name));
  if (it == config_.chat_templates.end()) return std::nullopt;
  return it->second;
}

IncrementalDetokenizer::IncrementalDetokenizer(const Tokenizer& t, bool skip_special_tokens)
    : t_(&t),
      skip_special_(skip_special_tokens),
      stream_(std::make_unique<tok::DecodeStream>(t.decoder())) {}

std::string IncrementalDetokenizer::push(int32_t id) {
  const tok::AddedToken* a = t_->added_vocab().find_id(id);
  if (a != nullptr) {
    if (skip_special_ && a->special) return {};
    return stream_->push(a->content);
  }
  auto s = t_->id_to_token(id);
  if (!s) return {};  // unknown ids are dropped, as HF does
  return stream_->push(std::move(*s));
}

std::string IncrementalDetokenizer::flush() {
  return stream_->flush();
}

void IncrementalDetokenizer::reset() {
  stream_ = std::make_unique<tok::DecodeStream>(t_->decoder());
}

}  // namespace ringlm
