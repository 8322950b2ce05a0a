#include "tokenizer/post_processor.h"

namespace ringlm::tok {

namespace {

int32_t as_id(const json& v, const std::string& where) {
  RINGLM_USER_CHECK(
      v.is_number_integer() && v.get<int64_t>() >= 0 && v.get<int64_t>() < (int64_t{1} << 30),
      where, ": expected a token id");
  return static_cast<int32_t>(v.get<int64_t>());
}

// ["<s>", 0] (Bert/Roberta cls/sep) -> id.
int32_t pair_id(const json& j, const char* key, const std::string& where) {
  const json& v = field(j, key, where);
  RINGLM_USER_CHECK(v.is_array() && v.size() == 2, where, ".", key, ": expected [token, id]");
  return as_id(v[1], where + "." + key);
}

}  // namespace

PostProcessor PostProcessor::parse(const json& j, const std::string& where) {
  PostProcessor p;
  if (!j.is_null()) p.parse_into(j, where);
  return p;
}

void PostProcessor::parse_into(const json& j, const std::string& where) {
  const std::string type = type_of(j, where);
  if (type == "ByteLevel") return;
  if (type == "Sequence") {
    const json& items = field(j, "processors", where);
    RINGLM_USER_CHECK(items.is_array(), where, ".processors: expected an array");
    for (size_t i = 0; i < items.size(); ++i)
      parse_into(items[i], where + ".processors[" + std::to_string(i) + "]");
    return;
  }
  if (type == "BertProcessing" || type == "RobertaProcessing") {
    prefix_.push_back(pair_id(j, "cls", where));
    suffix_.insert(suffix_.begin(), pair_id(j, "sep", where));
    return;
  }
  if (type == "TemplateProcessing") {
    const json& single = field(j, "single", where);
    const json& specials = field(j, "special_tokens", where);
    RINGLM_USER_CHECK(single.is_array(), where, ".single: expected an array");
    RINGLM_USER_CHECK(specials.is_object(), where, ".special_tokens: expected an object");
    std::vector<int32_t> pre, post;
    bool seen_sequence = false;
    for (size_t i = 0; i < single.size(); ++i) {
      const std::string w = where + ".single[" + std::to_string(i) + "]";
      const json& piece = single[i];
      RINGLM_USER_CHECK(piece.is_object() && piece.size() == 1, w, ": expected one template piece");
      if (piece.contains("Sequence")) {
        RINGLM_USER_CHECK(!seen_sequence, w, ": the single template has two sequences");
        seen_sequence = true;
        continue;
      }
      RINGLM_USER_CHECK(piece.contains("SpecialToken"), w, ": unknown template piece '",
                        piece.begin().key(), "'");
      const std::string name = get_string(piece["SpecialToken"], "id", w + ".SpecialToken");
      auto it = specials.find(name);
      RINGLM_USER_CHECK(it != specials.end(), w, ": special token '", name,
                        "' is not in special_tokens");
      const json& ids = field(*it, "ids", where + ".special_tokens." + name);
      RINGLM_USER_CHECK(ids.is_array(), where, ".special_tokens.", name, ".ids: expected an array");
      for (const json& id : ids) {
        (seen_sequence ? post : pre).push_back(as_id(id, where + ".special_tokens." + name));
      }
    }
    // A sequence of processors composes: later templates wrap earlier output.
    prefix_.insert(prefix_.begin(), pre.begin(), pre.end());
    suffix_.insert(suffix_.end(), post.begin(), post.end());
    return;
  }
  RINGLM_USER_CHECK(false, where, ": unsupported post_processor type '", type, "'");
}

void PostProcessor::apply(std::vector<int32_t>& ids) const {
  if (!prefix_.empty()) ids.insert(ids.begin(), prefix_.begin(), prefix_.end());
  ids.insert(ids.end(), suffix_.begin(), suffix_.end());
}

}  // namespace ringlm::tok
