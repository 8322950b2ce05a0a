// Per-layer KV formats from a model directory's `kv_config.json` (mixed-precision KV in the
// style of mlx-bun's OptiQ per-layer kv_config), so different layer groups can store different
// formats; make_layout then splits groups by format. Shape:
//
//   {"default": "bf16",                               optional: layers not listed
//    "layers": {"0": "int8-g64",                      format name (KvFormat::parse), or
//               "5": {"bits": 4, "group_size": 64},   MLX-style bits/group_size (bits 0 or
//               "7": "bf16"}}                          null: dense bf16)
//
// "layers" may also be a list with one entry per layer. Errors (ringlm::Error) name the file and
// the entry.
#pragma once

#include <map>
#include <optional>
#include <string>

#include "kv/kv_format.h"

namespace ringlm::kv {

struct KvFormatOverrides {
  std::optional<KvFormat> default_format;  // for layers not listed
  std::map<int, KvFormat> layers;          // model layer -> format
};

// Parses `text` (the contents of `path`, named in errors).
KvFormatOverrides parse_kv_config(const std::string& text, const std::string& path);
// Reads and parses a kv_config.json file.
KvFormatOverrides load_kv_config(const std::string& path);

}  // namespace ringlm::kv
