// config.json / generation_config.json -> ModelConfig / GenerationConfig. Defaults follow the
// transformers configuration classes of each family (configuration_<family>.py), because a
// checkpoint's config.json only holds the fields that differ from them.
#include "io/model_config.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/error.h"

namespace ringlm::io {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// Reads typed fields of one JSON object. Errors name the source file and the dotted field path.
// A field set to null counts as absent, as transformers treats None as "use the default".
class Reader {
 public:
  Reader(const json& object, const std::string& source, std::string prefix)
      : obj_(object), source_(source), prefix_(std::move(prefix)) {}

  std::string path(const std::string& key) const {
    return prefix_.empty() ? key : prefix_ + "." + key;
  }
  [[noreturn]] void fail(const std::string& key, const std::string& what) const {
    throw Error(source_ + ": field '" + path(key) + "' " + what);
  }
  [[noreturn]] void wrong_type(const std::string& key, const char* expected) const {
    const json& v = obj_.at(key);
    std::string shown = v.dump();
    if (shown.size() > 60) shown = shown.substr(0, 57) + "...";
    fail(key, std::string("must be ") + expected + ", got " + v.type_name() + " " + shown);
  }

  bool contains(const std::string& key) const { return obj_.contains(key); }
  // The value, or nullptr when absent or null.
  const json* find(const std::string& key) const {
    const auto it = obj_.find(key);
    return it == obj_.end() || it->is_null() ? nullptr : &*it;
  }

  std::optional<int64_t> integer(const std::string& key) const {
    const json* v = find(key);
    if (v == nullptr) return std::nullopt;
    if (v->is_number_integer()) {
      if (v->is_number_unsigned() && v->get<uint64_t>() > uint64_t{INT64_MAX})
        fail(key, "is out of range");
      return v->get<int64_t>();
    }
    // Python writes 4096.0 for an int that passed through a float; accept exact whole numbers.
    if (v->is_number_float()) {
      const double d = v->get<double>();
      if (std::isfinite(d) && d == std::floor(d) && std::fabs(d) < 9.0e15)
        return static_cast<int64_t>(d);
    }
    wrong_type(key, "an integer");
  }
  std::optional<double> number(const std::string& key) const {
    const json* v = find(key);
    if (v == nullptr) return std::nullopt;
    if (!v->is_number()) wrong_type(key, "a number");
    return v->get<double>();
  }
  std::optional<bool> boolean(const std::string& key) const {
    const json* v = find(key);
    if (v == nullptr) return std::nullopt;
    if (!v->is_boolean()) wrong_type(key, "true or false");
    return v->get<bool>();
  }
  std::optional<std::string> string(const std::string& key) const {
    const json* v = find(key);
    if (v == nullptr) return std::nullopt;
    if (!v->is_string()) wrong_type(key, "a string");
    return v->get<std::string>();
  }
  // A token id field: an integer or a list of integers (eos_token_id is either).
  std::vector<int64_t> id_list(const std::string& key) const {
    const json* v = find(key);
    if (v == nullptr) return {};
    if (!v->is_array()) return {*integer(key)};
    std::vector<int64_t> out;
    for (const json& item : *v) {
      if (!item.is_number_integer()) wrong_type(key, "an integer or a list of integers");
      out.push_back(item.get<int64_t>());
    }
    return out;
  }
  std::optional<std::vector<std::string>> string_list(const std::string& key) const {
    const json* v = find(key);
    if (v == nullptr) return std::nullopt;
    if (!v->is_array()) wrong_type(key, "a list of strings");
    std::vector<std::string> out;
    for (const json& item : *v) {
      if (!item.is_string()) wrong_type(key, "a list of strings");
      out.push_back(item.get<std::string>());
    }
    return out;
  }
  // A nested object; fails when present but not an object.
  std::optional<Reader> child(const std::string& key) const {
    const json* v = find(key);
    if (v == nullptr) return std::nullopt;
    if (!v->is_object()) wrong_type(key, "an object");
    return Reader(*v, source_, path(key));
  }
  const json& object() const { return obj_; }
  const std::string& source() const { return source_; }

 private:
  const json& obj_;
  std::string source_;
  std::string prefix_;
};

// How layer_types is derived when config.json does not list it.
enum class LayerPattern {
  kAllFull,              // llama, gemma: no sliding window
  kAllSliding,           // mistral and others: every layer once sliding_window is set
  kAlternate,            // gemma2: even layers sliding, odd layers full
  kEveryNth,             // gemma3: every sliding_window_pattern-th layer full (default 6)
  kAfterMaxWindowLayers  // qwen2/3: layers >= max_window_layers slide, if use_sliding_window
};

// transformers' defaults for the fields a checkpoint may omit.
struct Family {
  std::optional<int64_t> num_key_value_heads;  // absent key; nullopt: num_attention_heads
  std::optional<int64_t> head_dim;             // absent key; nullopt: hidden / heads
  bool tie_word_embeddings = true;             // PretrainedConfig's default
  std::string hidden_act = "silu";
  bool gemma_activation = false;  // reads hidden_activation (gelu_pytorch_tanh when absent)
  double rope_theta = 10000.0;
  std::optional<double> local_rope_theta;  // gemma3 rope_local_base_freq default
  int64_t sliding_window = 0;              // when the key is absent
  LayerPattern pattern = LayerPattern::kAllSliding;
  int64_t intermediate_size = 0;
  int64_t max_position_embeddings = 0;
  double query_pre_attn_scalar = 0;
  double final_logit_softcapping = 0;
  double attn_logit_softcapping = 0;
  std::vector<int64_t> bos, eos;
  std::optional<int64_t> pad;
  // Gemma 3 multimodal checkpoints leave these out of text_config and rely on the defaults.
  std::optional<int64_t> hidden_size, num_hidden_layers, num_attention_heads, vocab_size;
};

Family family_defaults(const std::string& model_type) {
  Family f;
  if (model_type == "llama") {
    f.tie_word_embeddings = false;
    f.pattern = LayerPattern::kAllFull;
    f.intermediate_size = 11008;
    f.max_position_embeddings = 2048;
    f.bos = {1};
    f.eos = {2};
  } else if (model_type == "mistral") {
    f.num_key_value_heads = 8;
    f.tie_word_embeddings = false;
    f.sliding_window = 4096;
    f.intermediate_size = 14336;
    f.max_position_embeddings = 4096 * 32;
    f.bos = {1};
    f.eos = {2};
  } else if (model_type == "qwen2" || model_type == "qwen3") {
    f.num_key_value_heads = 32;
    if (model_type == "qwen3") f.head_dim = 128;
    f.tie_word_embeddings = false;
    f.sliding_window = 4096;
    f.pattern = LayerPattern::kAfterMaxWindowLayers;
    f.intermediate_size = 22016;
    f.max_position_embeddings = 32768;
  } else if (model_type == "gemma" || model_type == "gemma2" || model_type == "gemma3_text") {
    f.head_dim = 256;
    f.tie_word_embeddings = true;
    f.gemma_activation = true;
    f.hidden_act = "gelu_pytorch_tanh";
    f.pad = 0;
    f.eos = {1};
    f.bos = {2};
    if (model_type == "gemma") {
      f.num_key_value_heads = 16;
      f.pattern = LayerPattern::kAllFull;
      f.intermediate_size = 24576;
      f.max_position_embeddings = 8192;
    } else if (model_type == "gemma2") {
      f.num_key_value_heads = 4;
      f.sliding_window = 4096;
      f.pattern = LayerPattern::kAlternate;
      f.intermediate_size = 9216;
      f.max_position_embeddings = 8192;
      f.query_pre_attn_scalar = 256;
      f.final_logit_softcapping = 30.0;
      f.attn_logit_softcapping = 50.0;
    } else {
      f.num_key_value_heads = 4;
      f.rope_theta = 1'000'000.0;
      f.local_rope_theta = 10'000.0;
      f.sliding_window = 4096;
      f.pattern = LayerPattern::kEveryNth;
      f.intermediate_size = 9216;
      f.max_position_embeddings = 131072;
      f.query_pre_attn_scalar = 256;
      f.hidden_size = 2304;
      f.num_hidden_layers = 26;
      f.num_attention_heads = 8;
      f.vocab_size = 262208;
    }
  }
  return f;
}

int64_t required(const Reader& r, const std::string& key, std::optional<int64_t> fallback) {
  if (const auto v = r.integer(key)) return *v;
  if (fallback) return *fallback;
  throw Error(r.source() + ": missing required field '" + r.path(key) + "'");
}

void check_positive(const Reader& r, const std::string& key, int64_t value) {
  if (value <= 0) r.fail(key, "must be positive, got " + std::to_string(value));
}

RopeScaling parse_rope(const Reader& r, double default_theta, double default_partial) {
  RopeScaling s;
  s.rope_theta = default_theta;
  s.partial_rotary_factor = default_partial;
  if (const auto v = r.string("rope_type"))
    s.rope_type = *v;
  else if (const auto t = r.string("type"))
    s.rope_type = *t;
  if (const auto v = r.number("rope_theta")) s.rope_theta = *v;
  if (const auto v = r.number("factor")) s.factor = *v;
  if (const auto v = r.number("low_freq_factor")) s.low_freq_factor = *v;
  if (const auto v = r.number("high_freq_factor")) s.high_freq_factor = *v;
  if (const auto v = r.integer("original_max_position_embeddings"))
    s.original_max_position_embeddings = *v;
  if (const auto v = r.number("beta_fast")) s.beta_fast = *v;
  if (const auto v = r.number("beta_slow")) s.beta_slow = *v;
  s.mscale = r.number("mscale");
  s.mscale_all_dim = r.number("mscale_all_dim");
  s.attention_factor = r.number("attention_factor");
  if (const auto v = r.boolean("truncate")) s.truncate = *v;
  if (const auto v = r.number("partial_rotary_factor")) s.partial_rotary_factor = *v;
  if (!(s.rope_theta > 0)) r.fail("rope_theta", "must be positive");
  if (!(s.factor > 0)) r.fail("factor", "must be positive");
  if (!(s.partial_rotary_factor > 0 && s.partial_rotary_factor <= 1))
    r.fail("partial_rotary_factor", "must be in (0, 1]");
  return s;
}

// transformers 5 nests rope_parameters by layer type: {"full_attention": {...}, ...}.
bool nested_by_layer_type(const json& params) {
  if (!params.is_object() || params.empty()) return false;
  return std::all_of(params.begin(), params.end(),
                     [](const json& v) { return v.is_object() || v.is_null(); });
}

// Rope per layer type from rope_theta + rope_scaling (transformers 4) or rope_parameters (5).
std::map<std::string, RopeScaling> parse_rope_config(const Reader& text, const Family& family) {
  const double top_theta = text.number("rope_theta").value_or(family.rope_theta);
  const double partial = text.number("partial_rotary_factor").value_or(1.0);
  const double local_theta =
      text.number("rope_local_base_freq").value_or(family.local_rope_theta.value_or(top_theta));
  const std::optional<Reader> scaling = text.child("rope_scaling");
  const std::optional<Reader> params = text.child("rope_parameters");

  std::map<std::string, RopeScaling> out;
  if (params && nested_by_layer_type(params->object())) {
    for (const auto& [type, value] : params->object().items()) {
      const double theta =
          type == "sliding_attention" && family.local_rope_theta ? local_theta : top_theta;
      // rope_scaling, when also present, updates the full-attention entry (as transformers does).
      json merged = value.is_null() ? json::object() : value;
      if (type == "full_attention" && scaling) merged.update(scaling->object());
      out[type] = parse_rope(Reader(merged, text.source(), params->path(type)), theta, partial);
    }
  } else {
    // rope_scaling wins over a flat rope_parameters, as in transformers' conversion.
    const std::optional<Reader>& flat = scaling ? scaling : params;
    out["full_attention"] =
        flat ? parse_rope(*flat, top_theta, partial)
             : parse_rope(Reader(json::object(), text.source(), ""), top_theta, partial);
  }
  if (!out.count("full_attention")) {
    out["full_attention"] = RopeScaling{};
    out["full_attention"].rope_theta = top_theta;
    out["full_attention"].partial_rotary_factor = partial;
  }
  if (family.local_rope_theta && !out.count("sliding_attention")) {
    RopeScaling local;
    local.rope_theta = local_theta;
    local.partial_rotary_factor = partial;
    out["sliding_attention"] = local;
  }
  return out;
}

// sliding_window and layer_types, derived as each family's configuration class does.
void parse_attention_layout(const Reader& text, const std::string& model_type, const Family& family,
                            ModelConfig& c) {
  const int64_t n = c.num_hidden_layers;
  c.sliding_window = text.contains("sliding_window") ? text.integer("sliding_window").value_or(0)
                                                     : family.sliding_window;
  if (c.sliding_window < 0) text.fail("sliding_window", "must not be negative");
  if (family.pattern == LayerPattern::kAllFull) c.sliding_window = 0;  // llama ignores the field
  int64_t max_window_layers = 0;
  if (family.pattern == LayerPattern::kAfterMaxWindowLayers) {
    if (!text.boolean("use_sliding_window").value_or(false)) c.sliding_window = 0;
    max_window_layers = text.integer("max_window_layers").value_or(28);
  }

  if (const auto given = text.string_list("layer_types")) {
    if (static_cast<int64_t>(given->size()) != n)
      text.fail("layer_types", "has " + std::to_string(given->size()) +
                                   " entries but the model has " + std::to_string(n) + " layers (" +
                                   model_type + ")");
    c.layer_types = *given;
  } else {
    int64_t every = 6;
    if (family.pattern == LayerPattern::kEveryNth) {
      every = text.integer("sliding_window_pattern").value_or(6);
      if (every <= 0) text.fail("sliding_window_pattern", "must be positive");
    }
    c.layer_types.assign(static_cast<size_t>(n), "full_attention");
    for (int64_t i = 0; i < n; ++i) {
      bool sliding = false;
      switch (family.pattern) {
        case LayerPattern::kAllFull:
          sliding = false;
          break;
        case LayerPattern::kAllSliding:
          sliding = c.sliding_window > 0;
          break;
        case LayerPattern::kAlternate:
          sliding = (i + 1) % 2 != 0;
          break;
        case LayerPattern::kEveryNth:
          sliding = (i + 1) % every != 0;
          break;
        case LayerPattern::kAfterMaxWindowLayers:
          sliding = c.sliding_window > 0 && i >= max_window_layers;
          break;
      }
      if (sliding) c.layer_types[static_cast<size_t>(i)] = "sliding_attention";
    }
  }
  // Without a window a "sliding" layer attends to everything (transformers passes None).
  if (c.sliding_window == 0)
    for (std::string& t : c.layer_types)
      if (t == "sliding_attention") t = "full_attention";
}

QuantizationConfig parse_quantization(const Reader& r) {
  QuantizationConfig q;
  const auto group_size = r.integer("group_size");
  const auto bits = r.integer("bits");
  if (!group_size && !bits) {
    // Not MLX: a transformers quantization_config. Record the method for the loader to refuse.
    q.mode = r.string("quant_method").value_or("unknown");
    return q;
  }
  if (!group_size || !bits)
    r.fail(group_size ? "bits" : "group_size",
           "is required with " + std::string(group_size ? "group_size" : "bits"));
  if (*group_size <= 0 || *group_size > 4096) r.fail("group_size", "must be in 1..4096");
  if (*bits < 1 || *bits > 8) r.fail("bits", "must be in 1..8");
  q.mode = r.string("mode").value_or("affine");
  if (q.mode != "affine") return q;  // mxfp4 etc.: recorded, not interpreted
  q.group_size = static_cast<int>(*group_size);
  q.bits = static_cast<int>(*bits);
  for (const auto& [key, value] : r.object().items()) {
    if (value.is_boolean()) {
      // false: that module stays unquantized; true: it uses the defaults.
      if (!value.get<bool>()) q.overrides[key] = {0, 0};
    } else if (value.is_object()) {
      const Reader module(value, r.source(), r.path(key));
      const auto gs = module.integer("group_size");
      const auto b = module.integer("bits");
      if (!gs || !b) r.fail(key, "must give both group_size and bits");
      if (*gs <= 0 || *gs > 4096) module.fail("group_size", "must be in 1..4096");
      if (*b < 1 || *b > 8) module.fail("bits", "must be in 1..8");
      q.overrides[key] = {static_cast<int>(*gs), static_cast<int>(*b)};
    }
  }
  return q;
}

json read_json_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error("cannot read '" + path.string() + "'");
  std::ostringstream os;
  os << in.rdbuf();
  try {
    return json::parse(os.str());
  } catch (const json::exception& e) {
    throw Error(path.string() + ": not valid JSON: " + e.what());
  }
}

}  // namespace

ModelConfig parse_model_config(const json& config, const std::string& source) {
  if (!config.is_object())
    throw Error(source + ": must be a JSON object, got " + std::string(config.type_name()));
  const Reader outer(config, source, "");
  ModelConfig c;
  c.raw = config;

  const auto outer_type = outer.string("model_type");
  if (!outer_type) throw Error(source + ": missing required field 'model_type'");
  c.outer_model_type = *outer_type;
  const std::optional<Reader> text_config = outer.child("text_config");
  const Reader& text = text_config ? *text_config : outer;
  c.text_raw = text.object();
  c.model_type = text.string("model_type")
                     .value_or(c.outer_model_type == "gemma3" ? "gemma3_text" : c.outer_model_type);
  c.architectures = outer.string_list("architectures").value_or(std::vector<std::string>{});
  const Family family = family_defaults(c.model_type);

  // Fields that multimodal configs keep at the top level: text_config first, then the outer one.
  auto either = [&](const std::string& key) -> const Reader& {
    return text_config && !text.contains(key) && outer.contains(key) ? outer : text;
  };

  c.hidden_size = required(text, "hidden_size", family.hidden_size);
  c.num_hidden_layers = required(text, "num_hidden_layers", family.num_hidden_layers);
  c.num_attention_heads = required(text, "num_attention_heads", family.num_attention_heads);
  c.vocab_size = required(text, "vocab_size", family.vocab_size);
  check_positive(text, "hidden_size", c.hidden_size);
  check_positive(text, "num_hidden_layers", c.num_hidden_layers);
  check_positive(text, "num_attention_heads", c.num_attention_heads);
  check_positive(text, "vocab_size", c.vocab_size);
  c.intermediate_size = text.integer("intermediate_size").value_or(family.intermediate_size);
  if (c.intermediate_size < 0) text.fail("intermediate_size", "must not be negative");

  // An explicit null means "same as num_attention_heads"; an absent key takes the family default.
  c.num_key_value_heads =
      text.integer("num_key_value_heads")
          .value_or(text.contains("num_key_value_heads")
                        ? c.num_attention_heads
                        : family.num_key_value_heads.value_or(c.num_attention_heads));
  check_positive(text, "num_key_value_heads", c.num_key_value_heads);
  if (c.num_attention_heads % c.num_key_value_heads != 0)
    text.fail("num_key_value_heads", "(" + std::to_string(c.num_key_value_heads) +
                                         ") must divide num_attention_heads (" +
                                         std::to_string(c.num_attention_heads) + ")");
  if (const auto head_dim = text.integer("head_dim")) {
    c.head_dim = *head_dim;
  } else if (!text.contains("head_dim") && family.head_dim) {
    c.head_dim = *family.head_dim;
  } else {
    if (c.hidden_size % c.num_attention_heads != 0)
      text.fail("head_dim", "is absent and hidden_size (" + std::to_string(c.hidden_size) +
                                ") is not divisible by num_attention_heads (" +
                                std::to_string(c.num_attention_heads) + ")");
    c.head_dim = c.hidden_size / c.num_attention_heads;
  }
  check_positive(text, "head_dim", c.head_dim);

  c.max_position_embeddings =
      text.integer("max_position_embeddings").value_or(family.max_position_embeddings);
  c.rms_norm_eps = text.number("rms_norm_eps").value_or(1e-6);
  if (!(c.rms_norm_eps > 0)) text.fail("rms_norm_eps", "must be positive");
  c.tie_word_embeddings = either("tie_word_embeddings")
                              .boolean("tie_word_embeddings")
                              .value_or(family.tie_word_embeddings);
  c.attention_bias = text.boolean("attention_bias").value_or(false);
  c.mlp_bias = text.boolean("mlp_bias").value_or(false);
  if (family.gemma_activation)
    c.hidden_act = text.string("hidden_activation").value_or(family.hidden_act);
  else
    c.hidden_act = text.string("hidden_act")
                       .value_or(text.string("hidden_activation").value_or(family.hidden_act));
  // transformers 5 writes "dtype", 4 writes "torch_dtype".
  for (const char* key : {"torch_dtype", "dtype"}) {
    if (const auto v = either(key).string(key)) {
      c.torch_dtype = *v;
      break;
    }
  }

  c.rope = parse_rope_config(text, family);
  parse_attention_layout(text, c.model_type, family, c);

  c.query_pre_attn_scalar =
      text.number("query_pre_attn_scalar").value_or(family.query_pre_attn_scalar);
  c.final_logit_softcapping = text.contains("final_logit_softcapping")
                                  ? text.number("final_logit_softcapping").value_or(0)
                                  : family.final_logit_softcapping;
  c.attn_logit_softcapping = text.contains("attn_logit_softcapping")
                                 ? text.number("attn_logit_softcapping").value_or(0)
                                 : family.attn_logit_softcapping;

  // Token ids: an absent key takes the family default, an explicit null means none.
  const Reader& bos = either("bos_token_id");
  c.bos_token_ids = bos.contains("bos_token_id") ? bos.id_list("bos_token_id") : family.bos;
  const Reader& eos = either("eos_token_id");
  c.eos_token_ids = eos.contains("eos_token_id") ? eos.id_list("eos_token_id") : family.eos;
  const Reader& pad = either("pad_token_id");
  c.pad_token_id = pad.contains("pad_token_id") ? pad.integer("pad_token_id") : family.pad;

  // MLX writes "quantization" (and a copy as "quantization_config") at the top level.
  for (const char* key : {"quantization", "quantization_config"}) {
    if (const auto q = either(key).child(key)) {
      c.quantization = parse_quantization(*q);
      break;
    }
  }
  return c;
}

ModelConfig load_model_config(const std::string& model_dir) {
  const fs::path path = fs::path(model_dir) / "config.json";
  std::error_code ec;
  if (!fs::is_regular_file(path, ec))
    throw Error("missing config.json in model directory '" + model_dir + "'");
  return parse_model_config(read_json_file(path), path.string());
}

const RopeScaling& ModelConfig::rope_for_layer(int64_t layer) const {
  if (layer >= 0 && layer < static_cast<int64_t>(layer_types.size())) {
    const auto it = rope.find(layer_types[static_cast<size_t>(layer)]);
    if (it != rope.end()) return it->second;
  }
  const auto full = rope.find("full_attention");
  RINGLM_CHECK(full != rope.end(), "ModelConfig has no full_attention rope");
  return full->second;
}

bool ModelConfig::is_sliding_layer(int64_t layer) const {
  return sliding_window > 0 && layer >= 0 && layer < static_cast<int64_t>(layer_types.size()) &&
         layer_types[static_cast<size_t>(layer)] == "sliding_attention";
}

GenerationConfig parse_generation_config(const json& config, const std::string& source) {
  if (!config.is_object())
    throw Error(source + ": must be a JSON object, got " + std::string(config.type_name()));
  const Reader r(config, source, "");
  GenerationConfig g;
  g.eos_token_ids = r.id_list("eos_token_id");
  g.bos_token_id = r.integer("bos_token_id");
  g.pad_token_id = r.integer("pad_token_id");
  g.temperature = r.number("temperature");
  g.top_p = r.number("top_p");
  g.top_k = r.integer("top_k");
  g.repetition_penalty = r.number("repetition_penalty");
  g.max_new_tokens = r.integer("max_new_tokens");
  g.do_sample = r.boolean("do_sample").value_or(false);
  return g;
}

GenerationConfig load_generation_config(const std::string& model_dir) {
  const fs::path path = fs::path(model_dir) / "generation_config.json";
  std::error_code ec;
  if (!fs::exists(path, ec)) return GenerationConfig{};
  return parse_generation_config(read_json_file(path), path.string());
}

std::vector<int64_t> stop_token_ids(const ModelConfig& config, const GenerationConfig& generation) {
  std::vector<int64_t> out;
  for (const auto* ids : {&generation.eos_token_ids, &config.eos_token_ids})
    for (int64_t id : *ids)
      if (std::find(out.begin(), out.end(), id) == out.end()) out.push_back(id);
  return out;
}

}  // namespace ringlm::io
