#include "kv/kv_config.h"

#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "core/error.h"

namespace ringlm::kv {

namespace {

using nlohmann::json;

KvFormat entry_format(const json& entry, const std::string& where) {
  if (entry.is_string()) {
    try {
      return KvFormat::parse(entry.get<std::string>());
    } catch (const Error& e) {
      RINGLM_USER_CHECK(false, where, ": ", e.what());
    }
  }
  RINGLM_USER_CHECK(entry.is_object(), where,
                    " must be a format name or {\"bits\": 4|8, \"group_size\": 32|64}, found ",
                    entry.dump());
  const json bits = entry.value("bits", json());
  if (bits.is_null() || (bits.is_number_integer() && bits.get<int>() == 0))
    return KvFormat::dense(DType::BF16);
  const json group = entry.value("group_size", json(64));
  RINGLM_USER_CHECK(bits.is_number_integer() && group.is_number_integer(), where,
                    ": bits and group_size must be integers, found ", entry.dump());
  const KvFormat f = KvFormat::affine(bits.get<int>(), group.get<int>());
  RINGLM_USER_CHECK((f.bits == 4 || f.bits == 8) && (f.group_size == 32 || f.group_size == 64),
                    where, ": bits ", f.bits, " and group_size ", f.group_size,
                    " are not a supported KV format (4 or 8 bits, groups of 32 or 64)");
  return f;
}

int layer_index(const std::string& key, const std::string& where) {
  size_t used = 0;
  int layer = -1;
  try {
    layer = std::stoi(key, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  RINGLM_USER_CHECK(used == key.size() && !key.empty() && layer >= 0, where, ": key '", key,
                    "' is not a layer index");
  return layer;
}

}  // namespace

KvFormatOverrides parse_kv_config(const std::string& text, const std::string& path) {
  const json doc = json::parse(text, nullptr, false);
  RINGLM_USER_CHECK(!doc.is_discarded() && doc.is_object(), path, ": not a JSON object");
  KvFormatOverrides out;
  for (const auto& [key, value] : doc.items()) {
    RINGLM_USER_CHECK(key == "default" || key == "layers", path, ": unknown field '", key,
                      "' (expected \"default\" and \"layers\")");
  }
  if (doc.contains("default")) out.default_format = entry_format(doc["default"], path + " default");
  if (!doc.contains("layers")) return out;
  const json& layers = doc["layers"];
  if (layers.is_array()) {
    for (size_t l = 0; l < layers.size(); ++l) {
      out.layers[static_cast<int>(l)] =
          entry_format(layers[l], path + " layers[" + std::to_string(l) + "]");
    }
    return out;
  }
  RINGLM_USER_CHECK(layers.is_object(), path, ": \"layers\" must be an object or a list");
  for (const auto& [key, value] : layers.items()) {
    const std::string where = path + " layers." + key;
    out.layers[layer_index(key, where)] = entry_format(value, where);
  }
  return out;
}

KvFormatOverrides load_kv_config(const std::string& path) {
  std::ifstream in(path);
  RINGLM_USER_CHECK(in.good(), "cannot read KV config ", path);
  std::stringstream text;
  text << in.rdbuf();
  return parse_kv_config(text.str(), path);
}

}  // namespace ringlm::kv
