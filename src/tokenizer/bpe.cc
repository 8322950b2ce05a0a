#include "tokenizer/bpe.h"

#include <algorithm>
#include <cstdio>
#include <queue>

#include "tokenizer/unicode.h"

namespace ringlm::tok {

namespace {

constexpr uint64_t kEmpty = ~uint64_t{0};

inline uint64_t pair_key(int32_t a, int32_t b) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b);
}

inline uint64_t mix(uint64_t k) {
  k ^= k >> 33;
  k *= 0xff51afd7ed558ccdULL;
  k ^= k >> 33;
  return k;
}

// Splits a merges entry: "a b" (exactly one space) or ["a", "b"].
std::pair<std::string, std::string> merge_parts(const json& m, const std::string& where) {
  if (m.is_string()) {
    const std::string s = m.get<std::string>();
    const size_t sp = s.find(' ');
    RINGLM_USER_CHECK(sp != std::string::npos && s.find(' ', sp + 1) == std::string::npos, where,
                      ": merge '", s, "' is not two tokens separated by one space");
    return {s.substr(0, sp), s.substr(sp + 1)};
  }
  RINGLM_USER_CHECK(m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string(), where,
                    ": a merge must be \"a b\" or [\"a\", \"b\"]");
  return {m[0].get<std::string>(), m[1].get<std::string>()};
}

// How far past the vocabulary's entry count its ids may reach (gaps of unused ids).
constexpr int64_t kMaxVocabIdGap = int64_t{1} << 20;

}  // namespace

BpeModel::BpeModel(const json& j, const std::string& where) {
  const json& vocab = field(j, "vocab", where);
  RINGLM_USER_CHECK(vocab.is_object(), where, ".vocab: expected an object");
  vocab_.reserve(vocab.size());
  int64_t max_id = -1;
  for (auto it = vocab.begin(); it != vocab.end(); ++it) {
    RINGLM_USER_CHECK(it.value().is_number_integer(), where, ".vocab[\"", it.key(),
                      "\"]: expected an integer id");
    const int64_t id = it.value().get<int64_t>();
    RINGLM_USER_CHECK(id >= 0 && id < (int64_t{1} << 30), where, ".vocab[\"", it.key(), "\"]: id ",
                      id, " out of range");
    vocab_[it.key()] = static_cast<int32_t>(id);
    max_id = std::max(max_id, id);
  }
  // The id -> token table is dense: a sparse id far past the entries would cost gigabytes (one
  // entry with id 10^9 asked for 32 GB). Real vocabularies are dense or nearly so.
  const int64_t id_limit = static_cast<int64_t>(vocab.size()) + kMaxVocabIdGap;
  RINGLM_USER_CHECK(max_id < id_limit, where, ".vocab: id ", max_id, " is far beyond its ",
                    vocab.size(), " entries (ids must stay below entries + ", kMaxVocabIdGap, ")");
  vocab_r_.resize(static_cast<size_t>(max_id + 1));
  has_id_.assign(static_cast<size_t>(max_id + 1), 0);
  for (const auto& [tok, id] : vocab_) {
    vocab_r_[static_cast<size_t>(id)] = tok;
    has_id_[static_cast<size_t>(id)] = 1;
  }

  // Options HF rejects or we do not implement.
  if (j.contains("dropout") && !j["dropout"].is_null()) {
    RINGLM_USER_CHECK(j["dropout"].is_number() && j["dropout"].get<double>() == 0.0, where,
                      ".dropout: BPE dropout is not supported (must be null or 0)");
  }
  if (j.contains("unk_token") && !j["unk_token"].is_null()) {
    unk_token_ = get_string(j, "unk_token", where);
    has_unk_ = true;
    auto it = vocab_.find(unk_token_);
    if (it != vocab_.end()) unk_id_ = it->second;
  }
  continuing_subword_prefix_ = get_string_or(j, "continuing_subword_prefix", "", where);
  end_of_word_suffix_ = get_string_or(j, "end_of_word_suffix", "", where);
  fuse_unk_ = get_bool_or(j, "fuse_unk", false, where);
  byte_fallback_ = get_bool_or(j, "byte_fallback", false, where);
  ignore_merges_ = get_bool_or(j, "ignore_merges", false, where);
  all_bytes_ = true;
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof(name), "<0x%02X>", b);
    auto it = vocab_.find(std::string_view(name));
    byte_ids_[b] = it == vocab_.end() ? -1 : it->second;
    all_bytes_ = all_bytes_ && byte_ids_[b] >= 0;
  }

  // Most initial symbols are single characters: look them up in a flat table, not the hash map.
  bmp_ids_.assign(0x10000, -1);
  for (const auto& [tokstr, id] : vocab_) {
    if (tokstr.empty() || utf8_len(static_cast<unsigned char>(tokstr[0])) != tokstr.size() ||
        !is_valid_utf8(tokstr))
      continue;
    size_t i = 0;
    const char32_t cp = next_cp(tokstr, i);
    if (cp < 0x10000) bmp_ids_[cp] = id;
  }

  const json& merges = field(j, "merges", where);
  RINGLM_USER_CHECK(merges.is_array(), where, ".merges: expected an array");
  size_t cap = 16;
  while (cap < merges.size() * 2) cap <<= 1;
  merge_keys_.assign(cap, kEmpty);
  merge_vals_.assign(cap, 0);
  merge_mask_ = cap - 1;
  const size_t prefix_len = continuing_subword_prefix_.size();
  for (size_t r = 0; r < merges.size(); ++r) {
    const std::string w = where + ".merges[" + std::to_string(r) + "]";
    auto [a, b] = merge_parts(merges[r], w);
    auto ia = vocab_.find(a);
    auto ib = vocab_.find(b);
    RINGLM_USER_CHECK(ia != vocab_.end(), w, ": token '", a, "' is not in the vocabulary");
    RINGLM_USER_CHECK(ib != vocab_.end(), w, ": token '", b, "' is not in the vocabulary");
    RINGLM_USER_CHECK(b.size() >= prefix_len, w, ": token '", b, "' is shorter than the prefix");
    const std::string merged = a + b.substr(prefix_len);
    auto im = vocab_.find(merged);
    RINGLM_USER_CHECK(im != vocab_.end(), w, ": merged token '", merged,
                      "' is not in the vocabulary");
    // Insert or overwrite (a later duplicate wins, as in HF's HashMap collect).
    const uint64_t key = pair_key(ia->second, ib->second);
    uint64_t slot = mix(key) & merge_mask_;
    while (merge_keys_[slot] != kEmpty && merge_keys_[slot] != key) slot = (slot + 1) & merge_mask_;
    merge_keys_[slot] = key;
    merge_vals_[slot] = (static_cast<uint64_t>(r) << 32) | static_cast<uint32_t>(im->second);
  }
}

int32_t BpeModel::token_to_id(std::string_view token) const {
  auto it = vocab_.find(token);
  return it == vocab_.end() ? -1 : it->second;
}

const std::string* BpeModel::id_to_token(int32_t id) const {
  if (id < 0 || static_cast<size_t>(id) >= has_id_.size() || !has_id_[static_cast<size_t>(id)])
    return nullptr;
  return &vocab_r_[static_cast<size_t>(id)];
}

bool BpeModel::find_merge(int32_t a, int32_t b, uint32_t* rank, int32_t* new_id) const {
  const uint64_t key = pair_key(a, b);
  uint64_t slot = mix(key) & merge_mask_;
  while (true) {
    const uint64_t k = merge_keys_[slot];
    if (k == key) {
      *rank = static_cast<uint32_t>(merge_vals_[slot] >> 32);
      *new_id = static_cast<int32_t>(merge_vals_[slot] & 0xFFFFFFFFu);
      return true;
    }
    if (k == kEmpty) return false;
    slot = (slot + 1) & merge_mask_;
  }
}

void BpeModel::tokenize(std::string_view word, std::vector<int32_t>& out) const {
  if (word.empty()) return;
  if (ignore_merges_) {
    auto it = vocab_.find(word);
    if (it != vocab_.end()) {
      out.push_back(it->second);
      return;
    }
  }
  const bool cacheable = word.size() < kCacheMaxWordLen;
  if (cacheable) {
    std::shared_lock lock(cache_mu_);
    auto it = cache_.find(word);
    if (it != cache_.end()) {
      out.insert(out.end(), it->second.begin(), it->second.end());
      return;
    }
  }
  const size_t first = out.size();
  merge_word(word, out);
  if (cacheable) {
    std::unique_lock lock(cache_mu_);
    if (cache_.size() < kCacheCapacity) {
      cache_.emplace(
          std::string(word),
          std::vector<int32_t>(out.begin() + static_cast<std::ptrdiff_t>(first), out.end()));
    }
  }
}

void BpeModel::merge_word(std::string_view w, std::vector<int32_t>& out) const {
  thread_local std::vector<Symbol> symbols;
  thread_local std::string s;
  symbols.clear();
  auto add = [&](int32_t id, uint32_t len) {
    const auto n = static_cast<int32_t>(symbols.size());
    symbols.push_back({id, n - 1, n + 1, len});
  };
  bool have_unk = false;
  int32_t pending_unk = -1;
  uint32_t pending_len = 0;
  size_t i = 0;
  while (i < w.size()) {
    const size_t start = i;
    i += utf8_len(static_cast<unsigned char>(w[i]));
    const auto byte_len = static_cast<uint32_t>(i - start);
    std::string_view piece = w.substr(start, i - start);
    const bool affixed = (start > 0 && !continuing_subword_prefix_.empty()) ||
                         (i >= w.size() && !end_of_word_suffix_.empty());
    if (affixed) {
      s.clear();
      if (start > 0) s += continuing_subword_prefix_;
      s += piece;
      if (i >= w.size()) s += end_of_word_suffix_;
      piece = s;
    }
    int32_t id = -1;
    if (!affixed && byte_len < 4) {
      size_t k = 0;
      id = bmp_ids_[next_cp(piece, k)];
    } else {
      auto it = vocab_.find(piece);
      if (it != vocab_.end()) id = it->second;
    }
    if (id >= 0) {
      if (have_unk) {
        add(pending_unk, pending_len);
        have_unk = false;
      }
      add(id, byte_len);
      continue;
    }
    if (byte_fallback_) {
      bool ok = true;
      for (char c : piece) ok = ok && byte_ids_[static_cast<unsigned char>(c)] >= 0;
      if (ok) {
        for (char c : piece) add(byte_ids_[static_cast<unsigned char>(c)], 1);
        continue;
      }
    }
    if (has_unk_) {
      RINGLM_USER_CHECK(unk_id_ >= 0, "tokenizer.json: unk_token '", unk_token_,
                        "' is not in the vocabulary");
      if (have_unk && fuse_unk_) {
        pending_len += byte_len;
      } else {
        if (have_unk) add(pending_unk, pending_len);
        pending_unk = unk_id_;
        pending_len = byte_len;
        have_unk = true;
      }
    }
  }
  if (have_unk) add(pending_unk, pending_len);
  if (symbols.empty()) return;
  symbols.back().next = -1;
  apply_merges(symbols);
  for (int32_t k = 0; k >= 0; k = symbols[static_cast<size_t>(k)].next) {
    out.push_back(symbols[static_cast<size_t>(k)].id);
  }
}

void BpeModel::apply_merges(std::vector<Symbol>& sym) const {
  const size_t n = sym.size();
  if (n < 2) return;
  if (n <= 24) {
    // Short words: rescan for the lowest-rank (then leftmost) adjacent pair.
    while (true) {
      uint32_t best_rank = UINT32_MAX;
      int32_t best_pos = -1, best_id = -1;
      for (int32_t k = 0; sym[static_cast<size_t>(k)].next >= 0;
           k = sym[static_cast<size_t>(k)].next) {
        uint32_t rank = 0;
        int32_t nid = 0;
        if (find_merge(sym[static_cast<size_t>(k)].id,
                       sym[static_cast<size_t>(sym[static_cast<size_t>(k)].next)].id, &rank,
                       &nid) &&
            rank < best_rank) {
          best_rank = rank, best_pos = k, best_id = nid;
        }
      }
      if (best_pos < 0) return;
      Symbol& a = sym[static_cast<size_t>(best_pos)];
      Symbol& b = sym[static_cast<size_t>(a.next)];
      a.id = best_id;
      a.len += b.len;
      b.len = 0;
      a.next = b.next;
      if (b.next >= 0) sym[static_cast<size_t>(b.next)].prev = best_pos;
    }
  }
  struct Entry {
    uint32_t rank;
    int32_t pos;
    int32_t new_id;
    bool operator>(const Entry& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
  };
  std::priority_queue<Entry, std::vector<Entry>, std::greater<Entry>> heap;
  for (int32_t k = 0; k + 1 < static_cast<int32_t>(n); ++k) {
    uint32_t rank = 0;
    int32_t nid = 0;
    if (find_merge(sym[static_cast<size_t>(k)].id, sym[static_cast<size_t>(k + 1)].id, &rank, &nid))
      heap.push({rank, k, nid});
  }
  while (!heap.empty()) {
    const Entry top = heap.top();
    heap.pop();
    Symbol& a = sym[static_cast<size_t>(top.pos)];
    if (a.len == 0 || a.next < 0) continue;
    const int32_t next_pos = a.next;
    Symbol& b = sym[static_cast<size_t>(next_pos)];
    uint32_t rank = 0;
    int32_t nid = 0;
    if (!find_merge(a.id, b.id, &rank, &nid) || nid != top.new_id) continue;  // stale entry
    a.id = top.new_id;
    a.len += b.len;
    b.len = 0;
    a.next = b.next;
    if (b.next >= 0) sym[static_cast<size_t>(b.next)].prev = top.pos;
    if (a.prev >= 0 && find_merge(sym[static_cast<size_t>(a.prev)].id, a.id, &rank, &nid))
      heap.push({rank, a.prev, nid});
    if (a.next >= 0 && find_merge(a.id, sym[static_cast<size_t>(a.next)].id, &rank, &nid))
      heap.push({rank, top.pos, nid});
  }
}

}  // namespace ringlm::tok
