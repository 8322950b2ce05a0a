#include "kv/paged_kv_cache.h"

#include <algorithm>
#include <cstring>

#include "kv/turbo_codec.h"

namespace ringlm::kv {

namespace {
int64_t ceil_div(int64_t a, int64_t b) {
  return (a + b - 1) / b;
}
}  // namespace

PagedKvCache::PagedKvCache(const KvCacheConfig& config)
    : config_(config), layout_(make_layout(config.layers)) {
  RINGLM_USER_CHECK(config.block_tokens > 0, "KV block_tokens ", config.block_tokens,
                    " is not positive");
  RINGLM_USER_CHECK(config.lookahead >= 0, "KV lookahead ", config.lookahead, " is negative");
  RINGLM_USER_CHECK(config.max_step_tokens > 0, "KV max_step_tokens ", config.max_step_tokens,
                    " is not positive");
  RINGLM_USER_CHECK(config.max_sequences > 0, "KV max_sequences ", config.max_sequences,
                    " is not positive");
  storage_.resize(layout_.groups.size());
  split_budget();
}

PagedKvCache::~PagedKvCache() = default;

// ---- Pools ----

size_t PagedKvCache::bytes_per_block(int g) const {
  const LayerGroup& grp = group(g);
  if (!is_storage(g)) return 0;
  return grp.layers.size() * static_cast<size_t>(config_.block_tokens) *
         (grp.format.bytes_per_token(grp.kv_heads, grp.head_dim, false) +
          grp.format.bytes_per_token(grp.kv_heads, grp.head_dim, true));
}

bool PagedKvCache::keeps_blocks(int g) const {
  return group(table_group(g)).kind != GroupKind::Sliding || config_.keep_all_blocks;
}

int64_t PagedKvCache::dense_end_block(int g) const {
  return ceil_div(group(g).quant_start, config_.block_tokens);
}

int64_t PagedKvCache::cap_blocks(int g) const {
  const LayerGroup& grp = group(table_group(g));
  // A bf16 companion holds positions < quant_start only.
  const int64_t dense_cap =
      grp.is_dense_companion() ? dense_end_block(table_group(g)) : kUnlimitedTokens;
  if (keeps_blocks(g)) return dense_cap;
  const int64_t bt = config_.block_tokens;
  // During a step the sequence holds [L - lookahead - W + 1, L + n) rounded out to whole blocks
  // (see first_needed_block), plus the blocks of the sink tokens.
  return std::min(dense_cap,
                  ceil_div(grp.sink_tokens, bt) +
                      ceil_div(grp.window - 1 + config_.lookahead + config_.max_step_tokens, bt) +
                      1);
}

int64_t PagedKvCache::peak_blocks(int g, int64_t tokens) const {
  return std::min(ceil_div(tokens, config_.block_tokens), cap_blocks(g));
}

void PagedKvCache::split_budget() {
  const int G = num_groups();
  std::vector<int64_t> blocks(static_cast<size_t>(G), 0);
  if (!config_.group_blocks.empty()) {
    RINGLM_USER_CHECK(static_cast<int>(config_.group_blocks.size()) == G, "KV group_blocks has ",
                      config_.group_blocks.size(), " entries for ", G, " layer groups");
    blocks = config_.group_blocks;
  } else {
    // Sliding pools: room for max_sequences sequences at their cap. Full pools: the rest, the same
    // block count for each (full groups grow in step). Sliding pools take at most half the budget
    // when full pools exist, and all of it (more sequences) when none do.
    const auto budget = static_cast<double>(config_.memory_bytes);
    double sliding_bytes = 0, full_bytes_per_block = 0;
    for (int g = 0; g < G; ++g) {
      if (!is_storage(g)) continue;
      if (cap_blocks(g) == kUnlimitedTokens) {
        full_bytes_per_block += static_cast<double>(bytes_per_block(g));
      } else {
        blocks[static_cast<size_t>(g)] = config_.max_sequences * cap_blocks(g) + 1;
        sliding_bytes += static_cast<double>(blocks[static_cast<size_t>(g)] *
                                             static_cast<int64_t>(bytes_per_block(g)));
      }
    }
    const double sliding_budget = full_bytes_per_block > 0 ? budget / 2 : budget;
    const double factor =
        sliding_bytes > 0 && (sliding_bytes > sliding_budget || full_bytes_per_block == 0)
            ? sliding_budget / sliding_bytes
            : 1.0;
    double used = 0;
    for (int g = 0; g < G; ++g) {
      auto& b = blocks[static_cast<size_t>(g)];
      if (b == 0) continue;
      b = static_cast<int64_t>(static_cast<double>(b) * factor);
      used += static_cast<double>(b) * static_cast<double>(bytes_per_block(g));
    }
    if (full_bytes_per_block > 0) {
      const auto full = static_cast<int64_t>((budget - used) / full_bytes_per_block);
      for (int g = 0; g < G; ++g) {
        if (is_storage(g) && cap_blocks(g) == kUnlimitedTokens)
          blocks[static_cast<size_t>(g)] = full;
      }
    }
  }
  for (int g = 0; g < G; ++g) {
    if (!is_storage(g)) continue;
    const int64_t n = blocks[static_cast<size_t>(g)];
    RINGLM_USER_CHECK(n >= 2, "KV memory budget of ", config_.memory_bytes >> 20,
                      " MiB is too small: layer group ", g, " (", group_kind_name(group(g).kind),
                      ", ", group(g).layers.size(), " layers) gets ", n, " blocks of ",
                      bytes_per_block(g), " bytes, needs at least 2");
    Storage& st = storage_[static_cast<size_t>(g)];
    const LayerGroup& grp = group(g);
    const size_t tokens = static_cast<size_t>(config_.block_tokens) * static_cast<size_t>(n);
    st.k_tensor_bytes = grp.format.bytes_per_token(grp.kv_heads, grp.head_dim, false) * tokens;
    st.v_tensor_bytes = grp.format.bytes_per_token(grp.kv_heads, grp.head_dim, true) * tokens;
    // Left untouched: pages are committed only as blocks get written, so a large budget costs no
    // memory until it is used.
    st.memory =
        DeviceMemory(config_.device, (st.k_tensor_bytes + st.v_tensor_bytes) * grp.layers.size());
    st.pool = std::make_unique<BlockPool>(n);
  }
}

int64_t PagedKvCache::num_blocks(int g) const {
  return is_storage(g) ? storage_[static_cast<size_t>(g)].pool->num_blocks() : 0;
}
int64_t PagedKvCache::free_blocks(int g) const {
  return is_storage(g) ? storage_[static_cast<size_t>(g)].pool->free_blocks() : 0;
}
int64_t PagedKvCache::used_blocks(int g) const {
  return is_storage(g) ? storage_[static_cast<size_t>(g)].pool->used_blocks() : 0;
}
int64_t PagedKvCache::used_blocks() const {
  int64_t n = 0;
  for (int g = 0; g < num_groups(); ++g) n += used_blocks(g);
  return n;
}
const BlockPool& PagedKvCache::pool(int g) const {
  RINGLM_CHECK(g >= 0 && g < num_groups() && is_storage(g), "group ", g, " has no pool");
  return *storage_[static_cast<size_t>(g)].pool;
}

int PagedKvCache::table_group(int g) const {
  RINGLM_CHECK(g >= 0 && g < num_groups(), "layer group ", g, " out of range");
  return is_storage(g) ? g : group(g).donor_group;
}

std::vector<PagedKvCache::Plane> PagedKvCache::planes(int g, bool value) const {
  const LayerGroup& grp = group(g);
  const auto values = static_cast<size_t>(grp.kv_heads) * static_cast<size_t>(grp.head_dim);
  const size_t tokens = static_cast<size_t>(config_.block_tokens) *
                        static_cast<size_t>(storage_[static_cast<size_t>(g)].pool->num_blocks());
  if (grp.format.is_turbo()) {
    const size_t codes =
        values * static_cast<size_t>(value ? grp.format.value_bits : grp.format.bits) / 8;
    const size_t params = values / static_cast<size_t>(kTurboGroup) * dtype_size(DType::F16);
    if (value) return {{0, codes}, {codes * tokens, params}};
    return {{0, codes}, {codes * tokens, params}, {(codes + params) * tokens, params}};
  }
  if (!grp.format.is_affine()) return {{0, values * dtype_size(grp.format.dtype)}};
  const size_t codes = values * static_cast<size_t>(grp.format.bits) / 8;
  const size_t params =
      values / static_cast<size_t>(grp.format.group_size) * dtype_size(grp.format.dtype);
  return {{0, codes}, {codes * tokens, params}, {(codes + params) * tokens, params}};
}

std::byte* PagedKvCache::region(int g, size_t slot, bool value) const {
  const Storage& st = storage_[static_cast<size_t>(g)];
  return st.memory.data() + (st.k_tensor_bytes + st.v_tensor_bytes) * slot +
         (value ? st.k_tensor_bytes : 0);
}

ops::KvLayerView PagedKvCache::layer_view(int layer) const {
  RINGLM_CHECK(layer >= 0 && layer < layout_.num_layers(), "layer ", layer, " out of range");
  const int g = table_group(layout_.group_of_layer[static_cast<size_t>(layer)]);
  return group_view(g, static_cast<size_t>(layout_.slot_of_layer[static_cast<size_t>(layer)]));
}

int PagedKvCache::dense_group_of_layer(int layer) const {
  RINGLM_CHECK(layer >= 0 && layer < layout_.num_layers(), "layer ", layer, " out of range");
  return group(table_group(layout_.group_of_layer[static_cast<size_t>(layer)])).dense_group;
}

ops::KvLayerView PagedKvCache::dense_layer_view(int layer) const {
  const int g = dense_group_of_layer(layer);
  RINGLM_CHECK(g >= 0, "layer ", layer, " has no bf16 companion (no --kv-quant-start)");
  // The companion lists the same layers as its quantized group, so the slot is the same.
  return group_view(g, static_cast<size_t>(layout_.slot_of_layer[static_cast<size_t>(layer)]));
}

ops::KvLayerView PagedKvCache::group_view(int g, size_t slot) const {
  const LayerGroup& grp = group(g);
  const Storage& st = storage_[static_cast<size_t>(g)];
  const int64_t n = st.pool->num_blocks(), bt = config_.block_tokens;
  std::byte* k = region(g, slot, false);
  std::byte* v = region(g, slot, true);
  ops::KvLayerView view;
  if (grp.format.is_turbo()) {
    const KvFormat& f = grp.format;
    const std::vector<Plane> pk = planes(g, false), pv = planes(g, true);
    const int64_t groups = grp.head_dim / kTurboGroup;
    view.bits = f.bits;
    view.value_bits = f.value_bits;
    view.group_size = kTurboGroup;
    view.k = Tensor(k, DType::U8, {n, bt, grp.kv_heads, grp.head_dim * f.bits / 8}, config_.device);
    view.v = Tensor(v, DType::U8, {n, bt, grp.kv_heads, grp.head_dim * f.value_bits / 8},
                    config_.device);
    view.k_scales =
        Tensor(k + pk[1].offset, DType::F16, {n, bt, grp.kv_heads, groups}, config_.device);
    view.k_biases =
        Tensor(k + pk[2].offset, DType::F16, {n, bt, grp.kv_heads, groups}, config_.device);
    view.v_scales =
        Tensor(v + pv[1].offset, DType::F16, {n, bt, grp.kv_heads, groups}, config_.device);
    return view;
  }
  if (!grp.format.is_affine()) {
    view.k = Tensor(k, grp.format.dtype, {n, bt, grp.kv_heads, grp.head_dim}, config_.device);
    view.v = Tensor(v, grp.format.dtype, {n, bt, grp.kv_heads, grp.head_dim}, config_.device);
    return view;
  }
  const KvFormat& f = grp.format;
  const std::vector<Plane> p = planes(g, false);
  const int64_t words = grp.head_dim * f.bits / 32, groups = grp.head_dim / f.group_size;
  view.bits = f.bits;
  view.group_size = f.group_size;
  view.k = Tensor(k, DType::U32, {n, bt, grp.kv_heads, words}, config_.device);
  view.v = Tensor(v, DType::U32, {n, bt, grp.kv_heads, words}, config_.device);
  view.k_scales = Tensor(k + p[1].offset, f.dtype, {n, bt, grp.kv_heads, groups}, config_.device);
  view.k_biases = Tensor(k + p[2].offset, f.dtype, {n, bt, grp.kv_heads, groups}, config_.device);
  view.v_scales = Tensor(v + p[1].offset, f.dtype, {n, bt, grp.kv_heads, groups}, config_.device);
  view.v_biases = Tensor(v + p[2].offset, f.dtype, {n, bt, grp.kv_heads, groups}, config_.device);
  return view;
}

void PagedKvCache::zero_storage() {
  for (Storage& st : storage_) zero_fill(st.memory);
}

void PagedKvCache::copy_block(int g, int32_t from, int32_t to) {
  const auto bt = static_cast<size_t>(config_.block_tokens);
  for (size_t slot = 0; slot < group(g).layers.size(); ++slot) {
    for (bool value : {false, true}) {
      std::byte* base = region(g, slot, value);
      for (const Plane& p : planes(g, value)) {
        const size_t block = bt * p.token_bytes;
        copy_bytes(base + p.offset + static_cast<size_t>(to) * block, config_.device,
                   base + p.offset + static_cast<size_t>(from) * block, config_.device, block);
      }
    }
  }
}

// ---- Sequences ----

PagedKvCache::Sequence& PagedKvCache::seq_ref(SequenceId seq) {
  auto it = seqs_.find(seq);
  RINGLM_CHECK(it != seqs_.end(), "unknown KV sequence ", seq);
  return it->second;
}
const PagedKvCache::Sequence& PagedKvCache::seq_ref(SequenceId seq) const {
  auto it = seqs_.find(seq);
  RINGLM_CHECK(it != seqs_.end(), "unknown KV sequence ", seq);
  return it->second;
}

SequenceId PagedKvCache::add_sequence() {
  const SequenceId id = next_id_++;
  seqs_[id].tables.resize(layout_.groups.size());
  return id;
}

std::vector<SequenceId> PagedKvCache::sequences() const {
  std::vector<SequenceId> ids;
  for (const auto& [id, s] : seqs_) ids.push_back(id);
  std::sort(ids.begin(), ids.end());
  return ids;
}

int64_t PagedKvCache::length(SequenceId seq) const {
  return seq_ref(seq).length;
}
int64_t PagedKvCache::reserved_tokens(SequenceId seq) const {
  return seq_ref(seq).reserved;
}

const std::vector<int32_t>& PagedKvCache::block_table(SequenceId seq, int g) const {
  return seq_ref(seq).tables[static_cast<size_t>(table_group(g))];
}

int32_t PagedKvCache::slot(SequenceId seq, int g, int64_t pos) const {
  const auto& table = block_table(seq, g);
  const int64_t b = pos / config_.block_tokens;
  RINGLM_CHECK(
      pos >= 0 && b < static_cast<int64_t>(table.size()) && table[static_cast<size_t>(b)] != 0,
      "position ", pos, " of sequence ", seq, " has no block in layer group ", g);
  return static_cast<int32_t>(table[static_cast<size_t>(b)] * config_.block_tokens +
                              pos % config_.block_tokens);
}

// Blocks the sequence holds that it will keep while it grows: in a full group every complete
// block (never written again) and an unshared partial one; in a sliding group only unshared ones
// (shared blocks slide out and are replaced by new ones).
int64_t PagedKvCache::kept_blocks(const Sequence& s, int g) const {
  const auto& table = s.tables[static_cast<size_t>(g)];
  const BlockPool& p = *storage_[static_cast<size_t>(g)].pool;
  if (keeps_blocks(g)) {
    const int64_t complete = s.length / config_.block_tokens;
    int64_t kept = 0;
    for (int64_t b = 0; b < complete; ++b) kept += table[static_cast<size_t>(b)] != 0;
    if (s.length % config_.block_tokens != 0 &&
        p.refcount(table[static_cast<size_t>(complete)]) == 1)
      ++kept;
    return kept;
  }
  int64_t kept = 0;
  for (int32_t b : table) kept += b != 0 && p.refcount(b) == 1;
  return kept;
}

int64_t PagedKvCache::outstanding(const Sequence& s, int g, int64_t reserved) const {
  // A bf16 companion takes no block once the sequence reached quant_start: later tokens are
  // stored quantized only (a rollback below it reuses the blocks it still holds).
  if (group(g).is_dense_companion() && s.length >= group(g).quant_start) return 0;
  return std::max<int64_t>(0, peak_blocks(g, reserved) - kept_blocks(s, g));
}

int64_t PagedKvCache::outstanding_total(int g) const {
  int64_t total = 0;
  for (const auto& [id, s] : seqs_) total += outstanding(s, g, s.reserved);
  return total;
}

bool PagedKvCache::reserve(SequenceId seq, int64_t total_tokens) {
  Sequence& s = seq_ref(seq);
  RINGLM_USER_CHECK(total_tokens >= 0, "KV reserve of ", total_tokens, " tokens");
  if (total_tokens <= s.reserved) return true;
  for (int g = 0; g < num_groups(); ++g) {
    if (!is_storage(g)) continue;
    const int64_t more = outstanding(s, g, total_tokens) - outstanding(s, g, s.reserved);
    if (more > free_blocks(g) - outstanding_total(g)) return false;
  }
  s.reserved = total_tokens;
  return true;
}

int64_t PagedKvCache::tokens_available(SequenceId seq, int g) const {
  const Sequence& s = seq_ref(seq);
  if (table_group(g) != g) return kUnlimitedTokens;  // a shared group holds nothing
  // A bf16 companion past quant_start takes no more blocks.
  if (group(g).is_dense_companion() && s.length >= group(g).quant_start) return kUnlimitedTokens;
  // The most blocks this sequence could hold: what it keeps, what it was promised, and what is
  // free beyond everyone's promises.
  const int64_t blocks =
      kept_blocks(s, g) + outstanding(s, g, s.reserved) + free_blocks(g) - outstanding_total(g);
  if (blocks >= cap_blocks(g)) return kUnlimitedTokens;  // a sliding group at its cap
  return std::max<int64_t>(0, blocks * config_.block_tokens - std::max(s.reserved, s.length));
}

int64_t PagedKvCache::tokens_available(SequenceId seq) const {
  int64_t best = kUnlimitedTokens;
  for (int g = 0; g < num_groups(); ++g) best = std::min(best, tokens_available(seq, g));
  return best;
}

int64_t PagedKvCache::first_needed_block(int g, int64_t length) const {
  const LayerGroup& grp = group(g);
  // The earliest query still to come sits at length - lookahead (after a rollback) and sees keys
  // from length - lookahead - window + 1 on.
  const int64_t low = length - config_.lookahead - grp.window + 1;
  return low <= 0 ? 0 : low / config_.block_tokens;
}

void PagedKvCache::release_unneeded(Sequence& s, int g) {
  auto& table = s.tables[static_cast<size_t>(g)];
  BlockPool& p = *storage_[static_cast<size_t>(g)].pool;
  const LayerGroup& grp = group(g);
  if (grp.is_dense_companion() && s.length - config_.lookahead >= grp.quant_start) {
    // Every query still to come (even after a rollback within the lookahead) reads the quantized
    // group: the bf16 copy goes, sinks included.
    drop_table(table, g, 0);
    table.assign(static_cast<size_t>(ceil_div(s.length, config_.block_tokens)), 0);
    return;
  }
  if (keeps_blocks(g)) return;
  const int64_t sink_blocks = ceil_div(grp.sink_tokens, config_.block_tokens);
  int64_t end =
      std::min<int64_t>(first_needed_block(g, s.length), static_cast<int64_t>(table.size()));
  if (grp.is_dense_companion()) end = std::min(end, dense_end_block(g));
  for (int64_t b = end; b-- > sink_blocks;) {
    int32_t& id = table[static_cast<size_t>(b)];
    if (id == 0) break;  // everything below was released earlier
    p.decref(id);
    id = 0;
  }
}

void PagedKvCache::drop_table(std::vector<int32_t>& table, int g, size_t from) {
  BlockPool& p = *storage_[static_cast<size_t>(g)].pool;
  // Tail first: the tail is the least likely to be shared by a later prompt, so it is reused first.
  for (size_t b = table.size(); b-- > from;) {
    if (table[b] != 0) p.decref(table[b]);
  }
  table.resize(from);
}

bool PagedKvCache::append(SequenceId seq, int64_t n) {
  Sequence& s = seq_ref(seq);
  RINGLM_CHECK(n >= 0, "append of ", n, " tokens");
  if (n == 0) return true;
  const int64_t bt = config_.block_tokens;
  const int64_t end = s.length + n;
  std::vector<int64_t> need(layout_.groups.size(), 0);
  for (int g = 0; g < num_groups(); ++g) {
    if (!is_storage(g)) continue;
    release_unneeded(s, g);
    const auto& table = s.tables[static_cast<size_t>(g)];
    const BlockPool& p = *storage_[static_cast<size_t>(g)].pool;
    // A bf16 companion writes positions < quant_start only; its entries past them stay 0.
    const int64_t written_end =
        group(g).is_dense_companion() ? std::min(end, group(g).quant_start) : end;
    const bool cow = s.length % bt != 0 && s.length < written_end &&
                     p.refcount(table[static_cast<size_t>(s.length / bt)]) > 1;
    const int64_t blocks =
        (cow ? 1 : 0) +
        std::max<int64_t>(0, ceil_div(written_end, bt) - static_cast<int64_t>(table.size()));
    const int64_t promised = outstanding(s, g, s.reserved);
    const bool fits = blocks <= promised
                          ? blocks <= p.free_blocks()
                          : blocks <= p.free_blocks() - (outstanding_total(g) - promised);
    if (!fits) return false;
    need[static_cast<size_t>(g)] = blocks;
  }
  for (int g = 0; g < num_groups(); ++g) {
    if (!is_storage(g) || need[static_cast<size_t>(g)] == 0) continue;
    auto& table = s.tables[static_cast<size_t>(g)];
    BlockPool& p = *storage_[static_cast<size_t>(g)].pool;
    const int64_t written_end =
        group(g).is_dense_companion() ? std::min(end, group(g).quant_start) : end;
    if (s.length % bt != 0 && s.length < written_end) {
      int32_t& last = table[static_cast<size_t>(s.length / bt)];
      if (p.refcount(last) > 1) {  // copy-on-write of the shared partial block
        const int32_t copy = p.allocate();
        copy_block(g, last, copy);
        p.decref(last);
        last = copy;
      }
    }
    while (static_cast<int64_t>(table.size()) < ceil_div(written_end, bt))
      table.push_back(p.allocate());
  }
  // Entries past a companion's quant_start hold no block: every table spans the sequence.
  for (int g = 0; g < num_groups(); ++g) {
    if (is_storage(g))
      s.tables[static_cast<size_t>(g)].resize(static_cast<size_t>(ceil_div(end, bt)), 0);
  }
  s.length = end;
  s.reserved = std::max(s.reserved, end);
  return true;
}

void PagedKvCache::rollback(SequenceId seq, int64_t k) {
  Sequence& s = seq_ref(seq);
  RINGLM_USER_CHECK(k >= 0 && k <= s.length, "rollback of ", k, " tokens from a sequence of ",
                    s.length);
  const int64_t len = s.length - k, bt = config_.block_tokens;
  // The next query (at position len) must still find every key it sees.
  for (int g = 0; g < num_groups(); ++g) {
    if (!is_storage(g) || len == 0) continue;
    const LayerGroup& grp = group(g);
    // A bf16 companion serves only queries below its quant_start.
    if (grp.is_dense_companion() && len >= grp.quant_start) continue;
    const auto& table = s.tables[static_cast<size_t>(g)];
    const int64_t lo = grp.window > 0 ? std::max<int64_t>(0, len - grp.window + 1) : 0;
    const int64_t sinks = lo > 0 ? std::min<int64_t>(grp.sink_tokens, len) : 0;
    for (int64_t b = 0; b <= (len - 1) / bt; ++b) {
      if (b >= ceil_div(sinks, bt) && b < lo / bt) continue;
      RINGLM_USER_CHECK(
          table[static_cast<size_t>(b)] != 0, "rollback of ", k, " tokens: layer group ", g, " (",
          grp.is_dense_companion() ? "bf16 until --kv-quant-start " : "sliding window ",
          grp.is_dense_companion() ? grp.quant_start : grp.window, ") no longer holds position ",
          b == lo / bt ? lo : b * bt, "; rollbacks are bounded by the lookahead (",
          config_.lookahead, ")");
    }
  }
  for (int g = 0; g < num_groups(); ++g) {
    if (!is_storage(g)) continue;
    drop_table(s.tables[static_cast<size_t>(g)], g, static_cast<size_t>(ceil_div(len, bt)));
  }
  s.length = len;
}

SequenceId PagedKvCache::fork(SequenceId seq) {
  Sequence copy = seq_ref(seq);
  copy.reserved = copy.length;
  for (int g = 0; g < num_groups(); ++g) {
    if (!is_storage(g)) continue;
    for (int32_t b : copy.tables[static_cast<size_t>(g)]) {
      if (b != 0) storage_[static_cast<size_t>(g)].pool->incref(b);
    }
  }
  const SequenceId id = next_id_++;
  seqs_[id] = std::move(copy);
  return id;
}

void PagedKvCache::retain_block(int g, int32_t block) {
  RINGLM_CHECK(g >= 0 && g < num_groups() && is_storage(g), "group ", g, " has no pool");
  storage_[static_cast<size_t>(g)].pool->incref(block);
}

void PagedKvCache::release_block(int g, int32_t block) {
  RINGLM_CHECK(g >= 0 && g < num_groups() && is_storage(g), "group ", g, " has no pool");
  storage_[static_cast<size_t>(g)].pool->decref(block);
}

int64_t PagedKvCache::needed_blocks_begin(int g, int64_t length) const {
  if (!is_storage(g) || keeps_blocks(g)) return 0;
  const int64_t sink_blocks = ceil_div(group(g).sink_tokens, config_.block_tokens);
  return std::max(sink_blocks, first_needed_block(g, length));
}

bool PagedKvCache::block_needed(int g, int64_t length, int64_t b) const {
  RINGLM_CHECK(is_storage(g), "layer group ", g, " holds no blocks");
  const LayerGroup& grp = group(g);
  if (grp.is_dense_companion() &&
      (length - config_.lookahead >= grp.quant_start || b >= dense_end_block(g)))
    return false;
  if (keeps_blocks(g)) return true;
  return b < ceil_div(grp.sink_tokens, config_.block_tokens) || b >= needed_blocks_begin(g, length);
}

SequenceId PagedKvCache::adopt(const std::vector<std::vector<int32_t>>& tables, int64_t length) {
  const int64_t bt = config_.block_tokens;
  RINGLM_CHECK(length >= 0 && length % bt == 0, "adopt of ", length,
               " tokens: not a whole number of blocks");
  RINGLM_CHECK(static_cast<int>(tables.size()) == num_groups(), "adopt with ", tables.size(),
               " tables for ", num_groups(), " groups");
  const int64_t blocks = length / bt;
  for (int g = 0; g < num_groups(); ++g) {
    const auto& table = tables[static_cast<size_t>(g)];
    if (!is_storage(g)) {
      RINGLM_CHECK(table.empty(), "adopt: shared group ", g, " given a table");
      continue;
    }
    RINGLM_CHECK(static_cast<int64_t>(table.size()) == blocks, "adopt: group ", g, " table of ",
                 table.size(), " blocks for ", length, " tokens");
    const BlockPool& p = *storage_[static_cast<size_t>(g)].pool;
    for (int64_t b = 0; b < blocks; ++b) {
      const int32_t id = table[static_cast<size_t>(b)];
      const bool never_written = group(g).is_dense_companion() && b >= dense_end_block(g);
      RINGLM_CHECK((!block_needed(g, length, b) && id == 0) ||
                       (!never_written && id > 0 && p.refcount(id) > 0),
                   "adopt: group ", g, " block ", b, " is ", id, ", not a live block");
    }
  }
  const SequenceId id = add_sequence();
  Sequence& s = seq_ref(id);
  for (int g = 0; g < num_groups(); ++g) {
    if (!is_storage(g)) continue;
    s.tables[static_cast<size_t>(g)] = tables[static_cast<size_t>(g)];
    for (int32_t b : s.tables[static_cast<size_t>(g)]) {
      if (b != 0) storage_[static_cast<size_t>(g)].pool->incref(b);
    }
  }
  s.length = length;
  s.reserved = length;
  return id;
}

void PagedKvCache::release(SequenceId seq) {
  auto it = seqs_.find(seq);
  if (it == seqs_.end()) return;
  for (int g = 0; g < num_groups(); ++g) {
    if (is_storage(g)) drop_table(it->second.tables[static_cast<size_t>(g)], g, 0);
  }
  seqs_.erase(it);
}

}  // namespace ringlm::kv
