#include "tokenizer/added_vocab.h"

#include <algorithm>

#include "tokenizer/unicode.h"

namespace ringlm::tok {

namespace {

// First / last code point of s (s non-empty, valid UTF-8).
char32_t first_cp(std::string_view s) {
  size_t i = 0;
  return next_cp(s, i);
}
char32_t last_cp(std::string_view s) {
  size_t b = s.size() - 1;
  while (b > 0 && (static_cast<unsigned char>(s[b]) & 0xC0) == 0x80) --b;
  return first_cp(s.substr(b));
}

}  // namespace

void AddedVocab::Trie::insert(std::string_view s, int32_t token) {
  if (s.empty()) return;
  first_byte[static_cast<unsigned char>(s[0])] = true;
  int32_t node = 0;
  for (char ch : s) {
    const auto c = static_cast<uint8_t>(ch);
    auto& next = nodes[static_cast<size_t>(node)].next;
    auto it = std::lower_bound(next.begin(), next.end(), std::make_pair(c, int32_t{-1}));
    if (it != next.end() && it->first == c) {
      node = it->second;
    } else {
      const auto child = static_cast<int32_t>(nodes.size());
      next.insert(it, {c, child});
      nodes.emplace_back();
      node = child;
    }
  }
  // First insertion wins for identical contents (they map to the same id anyway).
  if (nodes[static_cast<size_t>(node)].token < 0) nodes[static_cast<size_t>(node)].token = token;
}

size_t AddedVocab::Trie::longest_at(std::string_view s, size_t i, int32_t* token) const {
  if (!first_byte[static_cast<unsigned char>(s[i])]) return 0;
  size_t best = 0;
  int32_t node = 0;
  for (size_t k = i; k < s.size(); ++k) {
    const auto c = static_cast<uint8_t>(s[k]);
    const auto& next = nodes[static_cast<size_t>(node)].next;
    auto it = std::lower_bound(next.begin(), next.end(), std::make_pair(c, int32_t{-1}));
    if (it == next.end() || it->first != c) break;
    node = it->second;
    if (nodes[static_cast<size_t>(node)].token >= 0) {
      best = k + 1 - i;
      *token = nodes[static_cast<size_t>(node)].token;
    }
  }
  return best;
}

void AddedVocab::build(const json& added, const BpeModel& model, const Normalizer* normalizer,
                       const std::string& where) {
  if (added.is_null()) return;
  RINGLM_USER_CHECK(added.is_array(), where, ": expected an array");
  for (size_t k = 0; k < added.size(); ++k) {
    const std::string w = where + "[" + std::to_string(k) + "]";
    const json& a = added[k];
    AddedToken t;
    t.content = get_string(a, "content", w);
    t.special = get_bool_or(a, "special", false, w);
    t.lstrip = get_bool_or(a, "lstrip", false, w);
    t.rstrip = get_bool_or(a, "rstrip", false, w);
    t.single_word = get_bool_or(a, "single_word", false, w);
    t.normalized = get_bool_or(a, "normalized", !t.special, w);
    if (t.content.empty() || by_content_.count(t.content)) continue;  // HF ignores these
    const int32_t model_id = model.token_to_id(t.content);
    if (model_id >= 0) {
      t.id = model_id;
    } else if (max_id_ < 0) {
      t.id = static_cast<int32_t>(model.vocab_size());
    } else {
      t.id = (max_id_ >= static_cast<int32_t>(model.vocab_size()) || model.vocab_size() == 0)
                 ? max_id_ + 1
                 : static_cast<int32_t>(model.vocab_size());
    }
    max_id_ = std::max(max_id_, t.id);
    by_content_[t.content] = tokens_.size();
    by_id_[t.id] = tokens_.size();
    tokens_.push_back(std::move(t));
  }
  // HF matches special tokens first, then the others, in insertion order within each group.
  std::vector<size_t> order;
  for (size_t k = 0; k < tokens_.size(); ++k)
    if (tokens_[k].special) order.push_back(k);
  for (size_t k = 0; k < tokens_.size(); ++k)
    if (!tokens_[k].special) order.push_back(k);
  for (size_t k : order) {
    const AddedToken& t = tokens_[k];
    if (t.normalized) {
      const std::string n = normalizer != nullptr ? normalizer->normalize(t.content) : t.content;
      norm_trie_.insert(n, static_cast<int32_t>(k));
    } else {
      raw_trie_.insert(t.content, static_cast<int32_t>(k));
    }
  }
}

const AddedToken* AddedVocab::find_id(int32_t id) const {
  auto it = by_id_.find(id);
  return it == by_id_.end() ? nullptr : &tokens_[it->second];
}

int32_t AddedVocab::find_content(std::string_view content) const {
  auto it = by_content_.find(content);
  return it == by_content_.end() ? -1 : tokens_[it->second].id;
}

void AddedVocab::split(std::string_view s, const Trie& trie, bool parse_special, bool at_start,
                       std::vector<Piece>& out, std::vector<Piece>* rest) const {
  // Pieces without a token go to `rest` if given (further processing), else to `out`.
  auto emit_text = [&](size_t b, size_t e) {
    if (b >= e) return;
    Piece p{std::string(s.substr(b, e - b)), -1, at_start && b == 0};
    (rest != nullptr ? *rest : out).push_back(std::move(p));
  };
  size_t start_offset = 0;
  size_t i = 0;
  while (i < s.size()) {
    int32_t tk = -1;
    const size_t len = trie.longest_at(s, i, &tk);
    if (len == 0) {
      ++i;
      continue;
    }
    size_t start = i, stop = i + len;
    i = stop;  // the match iterator resumes after the raw match, whatever happens below
    const AddedToken& t = tokens_[static_cast<size_t>(tk)];
    if (!parse_special && t.special) continue;
    if (t.single_word) {
      const bool start_space = start == 0 || !is_word_char(last_cp(s.substr(0, start)));
      const bool stop_space = stop == s.size() || !is_word_char(first_cp(s.substr(stop)));
      if (!start_space || !stop_space) continue;
    }
    if (t.lstrip) {
      size_t ns = start;
      while (ns > 0) {
        size_t b = ns - 1;
        while (b > 0 && (static_cast<unsigned char>(s[b]) & 0xC0) == 0x80) --b;
        if (!is_whitespace(first_cp(s.substr(b)))) break;
        ns = b;
      }
      start = std::max(ns, start_offset);
    }
    if (t.rstrip) {
      while (stop < s.size()) {
        size_t k = stop;
        if (!is_whitespace(next_cp(s, k))) break;
        stop = k;
      }
    }
    if (start_offset < start) emit_text(start_offset, start);
    out.push_back({std::string(s.substr(start, stop - start)), t.id, false});
    start_offset = stop;
  }
  if (start_offset < s.size()) emit_text(start_offset, s.size());
}

void AddedVocab::extract_and_normalize(std::string_view text, const Normalizer* normalizer,
                                       bool parse_special, std::vector<Piece>& out) const {
  out.clear();
  std::vector<Piece> stage1;
  split(text, raw_trie_, parse_special, true, stage1, nullptr);
  for (Piece& p : stage1) {
    if (p.id >= 0) {
      out.push_back(std::move(p));
      continue;
    }
    std::string norm = normalizer != nullptr ? normalizer->normalize(p.text) : std::move(p.text);
    split(norm, norm_trie_, parse_special, p.at_start, out, nullptr);
  }
}

}  // namespace ringlm::tok
