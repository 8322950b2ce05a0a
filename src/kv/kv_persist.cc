// A sequence's K/V out of the block pools and back: extract (gather into contiguous memory), save
// (safetensors with the layout as metadata) and load (map the file, copy into fresh blocks).
//
// File layout: tensors `group.G.positions` (I32[n]: the positions group G holds, ascending) and
// `layer.L.k` / `layer.L.v` ([n of L's group, kv_heads, head_dim] in the group's dtype) for each
// layer with its own K/V; an affine group stores the codes as `layer.L.k` / `layer.L.v`
// (U32[n, kv_heads, head_dim·bits/32]) plus `layer.L.k.scales`, `.k.biases`, `.v.scales`,
// `.v.biases` (BF16[n, kv_heads, head_dim/group_size]); a turbo group stores U8 codes
// `layer.L.k` (U8[n, kv_heads, head_dim·key_bits/8]), `layer.L.v` (U8[.., head_dim·value_bits/8])
// and F16[n, kv_heads, head_dim/32] `.k.scales`, `.k.zeros`, `.v.scales` — always exactly the bytes
// the blocks hold; the bf16 companion of a transitioning group (--kv-quant-start) stores its
// positions < quant_start as `layer.L.bf16.k` / `.v` next to the quantized `layer.L.k` / `.v`;
// metadata
// `format` = "ringlm-kv", `version` = "1", `length` (tokens in the sequence), `block_tokens`
// (informational) and `layout` (JSON: per group kind, window, sink_tokens, format, kv_heads,
// head_dim, layers, donor_group).
#include <algorithm>
#include <cstring>
#include <nlohmann/json.hpp>

#include "io/safetensors.h"
#include "kv/affine_codec.h"
#include "kv/paged_kv_cache.h"
#include "kv/turbo_codec.h"

namespace ringlm::kv {

namespace {

using nlohmann::json;

json layout_json(const KvLayout& layout) {
  json groups = json::array();
  for (const LayerGroup& g : layout.groups) {
    json entry = {{"kind", group_kind_name(g.kind)},
                  {"window", g.window},
                  {"sink_tokens", g.sink_tokens},
                  {"format", g.format.name()},
                  {"kv_heads", g.kv_heads},
                  {"head_dim", g.head_dim},
                  {"layers", g.layers},
                  {"donor_group", g.donor_group}};
    // Only transitioning layouts carry these, so files of other layouts stay as they were.
    if (g.quant_start > 0) entry["quant_start"] = g.quant_start;
    if (g.is_dense_companion()) entry["dense_for"] = g.dense_for;
    groups.push_back(std::move(entry));
  }
  return groups;
}

// File-tensor name prefix of layer l's K/V in storage group g: "layer.L", or "layer.L.bf16" for
// the bf16 companion of a transitioning group.
std::string layer_prefix(const LayerGroup& g, int l) {
  return "layer." + std::to_string(l) + (g.is_dense_companion() ? ".bf16" : "");
}

// Per token and plane of a group: the tensor-name suffix, dtype and last dim of its file tensor.
struct PlaneFile {
  std::string suffix;
  DType dtype;
  int64_t last_dim;
};
std::vector<PlaneFile> plane_files(const LayerGroup& g, bool value) {
  const KvFormat& f = g.format;
  if (f.is_turbo()) {
    const int64_t groups = g.head_dim / kTurboGroup;
    if (value)
      return {{"", DType::U8, g.head_dim * f.value_bits / 8}, {".scales", DType::F16, groups}};
    return {{"", DType::U8, g.head_dim * f.bits / 8},
            {".scales", DType::F16, groups},
            {".zeros", DType::F16, groups}};
  }
  if (!f.is_affine()) return {{"", f.dtype, g.head_dim}};
  return {{"", DType::U32, g.head_dim * f.bits / 32},
          {".scales", f.dtype, g.head_dim / f.group_size},
          {".biases", f.dtype, g.head_dim / f.group_size}};
}

// The extracted bytes of plane p of K or V (Layer may be const).
template <typename Layer>
auto& plane_bytes(Layer& layer, bool value, size_t p) {
  decltype(&layer.k) k_planes[] = {&layer.k, &layer.k_scales, &layer.k_biases};
  decltype(&layer.k) v_planes[] = {&layer.v, &layer.v_scales, &layer.v_biases};
  return *(value ? v_planes : k_planes)[p];
}

}  // namespace

namespace {
// Last dim of the extracted K (value = false) or V codes / values.
int64_t code_dim(const KvFormat& format, int64_t head_dim, bool value) {
  if (format.is_turbo()) return head_dim * (value ? format.value_bits : format.bits) / 8;
  return format.is_affine() ? head_dim * format.bits / 32 : head_dim;
}
}  // namespace

Tensor ExtractedKv::Layer::k_tensor() const {
  const int64_t last = code_dim(format, head_dim, false);
  const auto n =
      static_cast<int64_t>(k.size() / (static_cast<size_t>(kv_heads * last) * dtype_size(dtype)));
  return Tensor(const_cast<std::byte*>(k.data()), dtype, {n, kv_heads, last});
}
Tensor ExtractedKv::Layer::v_tensor() const {
  const int64_t last = code_dim(format, head_dim, true);
  const auto n =
      static_cast<int64_t>(v.size() / (static_cast<size_t>(kv_heads * last) * dtype_size(dtype)));
  return Tensor(const_cast<std::byte*>(v.data()), dtype, {n, kv_heads, last});
}

std::vector<float> ExtractedKv::Layer::dequantized(bool value) const {
  const Tensor t = value ? v_tensor() : k_tensor();
  const int64_t rows = t.shape[0] * kv_heads;
  std::vector<float> out(static_cast<size_t>(rows * head_dim));
  if (!format.is_affine() && !format.is_turbo()) {
    for (size_t i = 0; i < out.size(); ++i) {
      switch (dtype) {
        case DType::F32:
          out[i] = t.ptr<const float>()[i];
          break;
        case DType::BF16:
          out[i] = bf16_to_f32(t.ptr<const bf16_t>()[i]);
          break;
        default:
          out[i] = f16_to_f32(t.ptr<const f16_t>()[i]);
          break;
      }
    }
    return out;
  }
  if (format.is_turbo()) {
    const int D = static_cast<int>(head_dim);
    const int64_t groups = head_dim / kTurboGroup;
    const auto* scales = reinterpret_cast<const f16_t*>((value ? v_scales : k_scales).data());
    const auto* codes = t.ptr<const uint8_t>();
    for (int64_t r = 0; r < rows; ++r) {
      if (value) {
        turbo_value_dequantize(codes + r * turbo_code_bytes(D, format.value_bits),
                               scales + r * groups, D, format.value_bits,
                               out.data() + r * head_dim);
      } else {
        turbo_key_dequantize(codes + r * turbo_code_bytes(D, format.bits), scales + r * groups,
                             reinterpret_cast<const f16_t*>(k_biases.data()) + r * groups, D,
                             format.bits, out.data() + r * head_dim);
      }
    }
    return out;
  }
  const auto* scales = reinterpret_cast<const bf16_t*>((value ? v_scales : k_scales).data());
  const auto* biases = reinterpret_cast<const bf16_t*>((value ? v_biases : k_biases).data());
  const int64_t groups = head_dim / format.group_size, words = head_dim * format.bits / 32;
  std::vector<float> s(static_cast<size_t>(groups)), b(s.size());
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t g = 0; g < groups; ++g) {
      s[static_cast<size_t>(g)] = bf16_to_f32(scales[r * groups + g]);
      b[static_cast<size_t>(g)] = bf16_to_f32(biases[r * groups + g]);
    }
    affine_dequantize(t.ptr<const uint32_t>() + r * words, s.data(), b.data(), head_dim,
                      {format.bits, format.group_size}, out.data() + r * head_dim);
  }
  return out;
}

ExtractedKv PagedKvCache::extract(SequenceId seq) const {
  const Sequence& s = seq_ref(seq);
  const int64_t bt = config_.block_tokens;
  ExtractedKv out;
  out.length = s.length;
  out.positions.resize(layout_.groups.size());
  for (int g = 0; g < num_groups(); ++g) {
    if (!is_storage(g)) continue;
    const auto& table = s.tables[static_cast<size_t>(g)];
    const int64_t end =
        group(g).is_dense_companion() ? std::min(s.length, group(g).quant_start) : s.length;
    for (int64_t p = 0; p < end; ++p) {
      if (table[static_cast<size_t>(p / bt)] != 0)
        out.positions[static_cast<size_t>(g)].push_back(static_cast<int32_t>(p));
    }
  }
  out.layers.resize(static_cast<size_t>(layout_.num_layers()));
  out.dense_layers.resize(static_cast<size_t>(layout_.num_layers()));
  for (int g = 0; g < num_groups(); ++g) {
    if (!is_storage(g)) continue;
    const LayerGroup& grp = group(g);
    for (size_t storage_slot = 0; storage_slot < grp.layers.size(); ++storage_slot) {
      const int l = grp.layers[storage_slot];
      ExtractedKv::Layer& layer =
          (grp.is_dense_companion() ? out.dense_layers : out.layers)[static_cast<size_t>(l)];
      layer.group = g;
      layer.format = grp.format;
      layer.dtype = grp.format.is_turbo()    ? DType::U8
                    : grp.format.is_affine() ? DType::U32
                                             : grp.format.dtype;
      layer.kv_heads = grp.kv_heads;
      layer.head_dim = grp.head_dim;
      const auto& positions = out.positions[static_cast<size_t>(g)];
      for (bool value : {false, true}) {
        const std::vector<Plane> ps = planes(g, value);
        const std::byte* base = region(g, storage_slot, value);
        for (size_t p = 0; p < ps.size(); ++p) {
          const size_t row = ps[p].token_bytes;
          std::vector<std::byte>& dst = plane_bytes(layer, value, p);
          dst.resize(positions.size() * row);
          for (size_t i = 0; i < positions.size(); ++i) {
            const auto slot = static_cast<size_t>(this->slot(seq, g, positions[i]));
            copy_bytes(dst.data() + i * row, Device::CPU, base + ps[p].offset + slot * row,
                       config_.device, row);
          }
        }
      }
    }
  }
  return out;
}

void PagedKvCache::save(SequenceId seq, const std::string& path) const {
  const ExtractedKv kv = extract(seq);
  RINGLM_USER_CHECK(kv.length > 0, "cannot save KV sequence ", seq, " to ", path,
                    ": it holds no tokens");
  std::vector<io::TensorToWrite> tensors;
  for (int g = 0; g < num_groups(); ++g) {
    if (!is_storage(g)) continue;
    const auto& pos = kv.positions[static_cast<size_t>(g)];
    tensors.push_back({"group." + std::to_string(g) + ".positions",
                       DType::I32,
                       {static_cast<int64_t>(pos.size())},
                       pos.data()});
  }
  for (const auto* layers : {&kv.layers, &kv.dense_layers}) {
    for (int l = 0; l < layout_.num_layers(); ++l) {
      const ExtractedKv::Layer& layer = (*layers)[static_cast<size_t>(l)];
      if (layer.group < 0) continue;
      const int64_t n = static_cast<int64_t>(kv.positions[static_cast<size_t>(layer.group)].size());
      for (bool value : {false, true}) {
        const std::vector<PlaneFile> files = plane_files(group(layer.group), value);
        for (size_t p = 0; p < files.size(); ++p) {
          tensors.push_back(
              {layer_prefix(group(layer.group), l) + (value ? ".v" : ".k") + files[p].suffix,
               files[p].dtype,
               {n, layer.kv_heads, files[p].last_dim},
               plane_bytes(layer, value, p).data()});
        }
      }
    }
  }
  io::write_safetensors(path, tensors,
                        {{"format", "ringlm-kv"},
                         {"version", "1"},
                         {"length", std::to_string(kv.length)},
                         {"block_tokens", std::to_string(config_.block_tokens)},
                         {"layout", layout_json(layout_).dump()}});
}

SequenceId PagedKvCache::load(const std::string& path) {
  io::SafetensorsFile file(path);
  const auto& meta = file.metadata();
  const auto field = [&](const std::string& name) {
    auto it = meta.find(name);
    RINGLM_USER_CHECK(it != meta.end(), path, ": not a ringlm KV file (no metadata '", name, "')");
    return it->second;
  };
  RINGLM_USER_CHECK(field("format") == "ringlm-kv", path, ": metadata format is '", field("format"),
                    "', expected 'ringlm-kv'");
  RINGLM_USER_CHECK(field("version") == "1", path, ": KV file version ", field("version"),
                    " is not supported (expected 1)");
  int64_t length = -1;
  try {
    size_t used = 0;
    length = std::stoll(field("length"), &used);
    if (used != field("length").size()) length = -1;
  } catch (const std::exception&) {
    length = -1;
  }
  RINGLM_USER_CHECK(length > 0 && length <= INT32_MAX, path, ": metadata length '", field("length"),
                    "' is not a positive token count");
  json stored;
  try {
    stored = json::parse(field("layout"));
  } catch (const json::exception& e) {
    RINGLM_USER_CHECK(false, path, ": metadata layout is not valid JSON (", e.what(), ")");
  }
  const json mine = layout_json(layout_);
  RINGLM_USER_CHECK(stored.is_array() && stored.size() == mine.size(), path, ": layout has ",
                    stored.is_array() ? stored.size() : 0, " layer groups, this cache has ",
                    mine.size());
  for (size_t g = 0; g < mine.size(); ++g) {
    for (const auto& [key, value] : mine[g].items()) {
      RINGLM_USER_CHECK(
          stored[g].is_object() && stored[g].contains(key) && stored[g][key] == value, path,
          ": layout field groups[", g, "].", key, " is ",
          stored[g].is_object() && stored[g].contains(key) ? stored[g][key].dump() : "missing",
          ", this cache has ", value.dump());
    }
  }

  const int64_t bt = config_.block_tokens;
  // Positions per group, validated: ascending, inside the sequence, covering what the next query
  // reads (all of it for a full group).
  std::vector<std::vector<int32_t>> positions(layout_.groups.size());
  std::vector<std::vector<int32_t>> tables(layout_.groups.size());
  for (int g = 0; g < num_groups(); ++g) {
    if (!is_storage(g)) continue;
    const std::string name = "group." + std::to_string(g) + ".positions";
    const Tensor t = file.get(name);
    RINGLM_USER_CHECK(t.dtype == DType::I32 && t.ndim == 1, path, ": ", name,
                      " must be I32[n], found ", t.describe());
    auto& pos = positions[static_cast<size_t>(g)];
    for (int64_t i = 0; i < t.numel(); ++i) {
      int32_t p;
      std::memcpy(&p, static_cast<const std::byte*>(t.data) + i * 4, 4);
      const LayerGroup& grp = group(g);
      const int64_t end =
          grp.is_dense_companion() ? std::min<int64_t>(length, grp.quant_start) : length;
      RINGLM_USER_CHECK(p >= 0 && p < end && (pos.empty() || p > pos.back()), path, ": ", name, "[",
                        i, "] = ", p, " is not ascending inside [0, ", end, ")");
      pos.push_back(p);
    }
    const LayerGroup& grp = group(g);
    // A bf16 companion serves only queries below its quant_start.
    const bool reads = !grp.is_dense_companion() || length < grp.quant_start;
    const int64_t lo = grp.window > 0 ? std::max<int64_t>(0, length - grp.window + 1) : 0;
    const int64_t sinks = std::min<int64_t>(grp.sink_tokens, length);
    const auto held = [&](int64_t p) { return std::binary_search(pos.begin(), pos.end(), p); };
    for (int64_t p = 0; p < length; ++p) {
      if (reads && (p < sinks || p >= lo)) {
        RINGLM_USER_CHECK(held(p), path, ": ", name, " lacks position ", p,
                          ", which the next query reads");
      }
    }
    auto& table = tables[static_cast<size_t>(g)];
    table.assign(static_cast<size_t>((length + bt - 1) / bt), 0);
    int64_t blocks = 0;
    for (size_t i = 0; i < pos.size(); ++i) {
      if (i == 0 || pos[i] / bt != pos[i - 1] / bt) ++blocks;
    }
    RINGLM_USER_CHECK(blocks <= free_blocks(g) - outstanding_total(g), path, ": layer group ", g,
                      " needs ", blocks, " free KV blocks, ", free_blocks(g) - outstanding_total(g),
                      " are available");
    for (int l : grp.layers) {
      for (const char* kv : {".k", ".v"}) {
        for (const PlaneFile& pf : plane_files(grp, kv[1] == 'v')) {
          const std::string tname = layer_prefix(grp, l) + kv + pf.suffix;
          const Tensor x = file.get(tname);
          RINGLM_USER_CHECK(x.dtype == pf.dtype && x.ndim == 3 &&
                                x.shape[0] == static_cast<int64_t>(pos.size()) &&
                                x.shape[1] == grp.kv_heads && x.shape[2] == pf.last_dim,
                            path, ": ", tname, " is ", x.describe(), ", expected ",
                            dtype_name(pf.dtype), "[", pos.size(), ", ", grp.kv_heads, ", ",
                            pf.last_dim, "]");
        }
      }
    }
  }

  const SequenceId seq = add_sequence();
  Sequence& s = seqs_[seq];
  s.length = length;
  s.reserved = length;
  for (int g = 0; g < num_groups(); ++g) {
    if (!is_storage(g)) continue;
    auto& table = tables[static_cast<size_t>(g)];
    BlockPool& p = *storage_[static_cast<size_t>(g)].pool;
    for (int32_t pos : positions[static_cast<size_t>(g)]) {
      int32_t& b = table[static_cast<size_t>(pos / bt)];
      if (b == 0) b = p.allocate();
    }
    s.tables[static_cast<size_t>(g)] = table;
  }
  for (int g = 0; g < num_groups(); ++g) {
    if (!is_storage(g)) continue;
    const auto& pos = positions[static_cast<size_t>(g)];
    for (size_t storage_slot = 0; storage_slot < group(g).layers.size(); ++storage_slot) {
      const int l = group(g).layers[storage_slot];
      for (bool value : {false, true}) {
        const std::vector<Plane> ps = planes(g, value);
        const std::vector<PlaneFile> files = plane_files(group(g), value);
        std::byte* base = region(g, storage_slot, value);
        for (size_t p = 0; p < ps.size(); ++p) {
          const Tensor x =
              file.get(layer_prefix(group(g), l) + (value ? ".v" : ".k") + files[p].suffix);
          const size_t row = ps[p].token_bytes;
          for (size_t i = 0; i < pos.size(); ++i) {
            const auto slot = static_cast<size_t>(this->slot(seq, g, pos[i]));
            copy_bytes(base + ps[p].offset + slot * row, config_.device,
                       static_cast<const std::byte*>(x.data) + i * row, Device::CPU, row);
          }
        }
      }
    }
  }
  return seq;
}

}  // namespace ringlm::kv
