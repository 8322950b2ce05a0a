#include "kv/layout.h"

#include <cstdint>

#include "core/error.h"

namespace ringlm::kv {

const char* group_kind_name(GroupKind kind) {
  switch (kind) {
    case GroupKind::Full:
      return "full";
    case GroupKind::Sliding:
      return "sliding";
    case GroupKind::Shared:
      return "shared";
  }
  return "?";
}

namespace {
bool same_storage(const LayerGroup& g, const LayerKvSpec& s) {
  const GroupKind kind = s.window > 0 ? GroupKind::Sliding : GroupKind::Full;
  return g.kind == kind && g.window == s.window && g.sink_tokens == s.sink_tokens &&
         g.format == s.format && g.kv_heads == s.kv_heads && g.head_dim == s.head_dim &&
         g.quant_start == s.quant_start;
}
}  // namespace

KvLayout make_layout(const std::vector<LayerKvSpec>& layers) {
  KvLayout layout;
  const auto n = static_cast<int>(layers.size());
  RINGLM_USER_CHECK(n > 0, "KV layout: the model has no layers");
  layout.group_of_layer.assign(static_cast<size_t>(n), -1);
  layout.slot_of_layer.assign(static_cast<size_t>(n), -1);
  for (int l = 0; l < n; ++l) {
    const LayerKvSpec& s = layers[static_cast<size_t>(l)];
    RINGLM_USER_CHECK(s.kv_heads > 0 && s.head_dim > 0, "KV layout: layer ", l, " has kv_heads ",
                      s.kv_heads, " and head_dim ", s.head_dim);
    RINGLM_USER_CHECK(s.window >= 0 && s.sink_tokens >= 0, "KV layout: layer ", l, " has window ",
                      s.window, " and sink_tokens ", s.sink_tokens);
    RINGLM_USER_CHECK(s.sink_tokens == 0 || s.window > 0, "KV layout: layer ", l,
                      " has sink tokens without a window");
    RINGLM_USER_CHECK(s.quant_start >= 0 && s.quant_start <= INT32_MAX, "KV layout: layer ", l,
                      " has quant_start ", s.quant_start);
    RINGLM_USER_CHECK(s.quant_start == 0 || s.format.is_affine() || s.format.is_turbo(),
                      "KV layout: layer ", l, " has quant_start ", s.quant_start,
                      " with the dense format ", s.format.name(),
                      " (the precision transition needs a quantized KV format)");
    auto& group_of = layout.group_of_layer[static_cast<size_t>(l)];
    auto& slot_of = layout.slot_of_layer[static_cast<size_t>(l)];
    if (s.donor_layer >= 0) {
      RINGLM_USER_CHECK(s.donor_layer < l, "KV layout: layer ", l, " reads donor layer ",
                        s.donor_layer, ", which is not an earlier layer");
      const int donor_group = layout.group_of_layer[static_cast<size_t>(s.donor_layer)];
      const LayerGroup& dg = layout.groups[static_cast<size_t>(donor_group)];
      RINGLM_USER_CHECK(dg.kind != GroupKind::Shared, "KV layout: layer ", l, " reads donor layer ",
                        s.donor_layer, ", which has no KV of its own");
      RINGLM_USER_CHECK(dg.kv_heads == s.kv_heads && dg.head_dim == s.head_dim, "KV layout: layer ",
                        l, " has a KV shape other than its donor layer ", s.donor_layer);
      int found = -1;
      for (size_t g = 0; g < layout.groups.size(); ++g) {
        if (layout.groups[g].kind == GroupKind::Shared &&
            layout.groups[g].donor_group == donor_group)
          found = static_cast<int>(g);
      }
      if (found < 0) {
        LayerGroup shared = dg;
        shared.kind = GroupKind::Shared;
        shared.layers.clear();
        shared.donor_group = donor_group;
        layout.groups.push_back(shared);
        found = static_cast<int>(layout.groups.size()) - 1;
      }
      LayerGroup& g = layout.groups[static_cast<size_t>(found)];
      g.layers.push_back(l);
      g.donor_layers.push_back(s.donor_layer);
      group_of = found;
      slot_of = layout.slot_of_layer[static_cast<size_t>(s.donor_layer)];
      continue;
    }
    try {
      s.format.check_supported(s.head_dim);
    } catch (const Error& e) {
      RINGLM_USER_CHECK(false, "KV layout: layer ", l, ": ", e.what());
    }
    int found = -1;
    for (size_t g = 0; g < layout.groups.size(); ++g) {
      if (layout.groups[g].kind != GroupKind::Shared && same_storage(layout.groups[g], s))
        found = static_cast<int>(g);
    }
    if (found < 0) {
      LayerGroup g;
      g.kind = s.window > 0 ? GroupKind::Sliding : GroupKind::Full;
      g.window = s.window;
      g.sink_tokens = s.sink_tokens;
      g.format = s.format;
      g.kv_heads = s.kv_heads;
      g.head_dim = s.head_dim;
      g.quant_start = s.quant_start;
      layout.groups.push_back(g);
      found = static_cast<int>(layout.groups.size()) - 1;
    }
    LayerGroup& g = layout.groups[static_cast<size_t>(found)];
    slot_of = static_cast<int>(g.layers.size());
    g.layers.push_back(l);
    group_of = found;
  }
  // The bf16 companions of transitioning groups come last, so the other groups keep their
  // indices whether or not the transition is on.
  const size_t stored = layout.groups.size();
  for (size_t g = 0; g < stored; ++g) {
    LayerGroup& grp = layout.groups[g];
    if (grp.kind == GroupKind::Shared || grp.quant_start == 0) continue;
    LayerGroup dense = grp;
    dense.format = KvFormat::dense(DType::BF16);
    dense.dense_for = static_cast<int>(g);
    grp.dense_group = static_cast<int>(layout.groups.size());
    layout.groups.push_back(dense);
  }
  return layout;
}

std::vector<LayerKvSpec> apply_max_kv_size(std::vector<LayerKvSpec> layers, int max_kv_size,
                                           int keep) {
  RINGLM_USER_CHECK(keep >= 0, "--kv-keep ", keep, " is negative");
  RINGLM_USER_CHECK(max_kv_size > keep, "--max-kv-size ", max_kv_size,
                    " must exceed the number of kept sink tokens (", keep, ")");
  for (LayerKvSpec& s : layers) {
    if (s.donor_layer >= 0 || s.window > 0) continue;
    s.window = max_kv_size - keep;
    s.sink_tokens = keep;
  }
  return layers;
}

}  // namespace ringlm::kv
