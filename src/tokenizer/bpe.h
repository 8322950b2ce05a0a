// The BPE model of tokenizer.json ("model": {"type": "BPE"}), with HF tokenizers' semantics:
// merges by rank (lowest first, leftmost on ties), byte_fallback (<0xXX> tokens), unk_token with
// fuse_unk, continuing_subword_prefix / end_of_word_suffix, ignore_merges, and a word cache.
// Merging uses a linked list of symbols and a binary heap (O(n log n)); short words use a scan.
#pragma once

#include <cstdint>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "tokenizer/json_util.h"

namespace ringlm::tok {

struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};
using Vocab = std::unordered_map<std::string, int32_t, StringHash, std::equal_to<>>;

class BpeModel {
 public:
  // Parses {"type": "BPE", vocab, merges, ...}; errors name `where` and the offending field.
  BpeModel(const json& j, const std::string& where);

  // Appends the ids of one pre-tokenized word (valid UTF-8, non-empty) to out.
  void tokenize(std::string_view word, std::vector<int32_t>& out) const;

  int32_t token_to_id(std::string_view token) const;  // -1 if absent
  const std::string* id_to_token(int32_t id) const;   // nullptr if absent
  size_t vocab_size() const { return vocab_.size(); }
  const Vocab& vocab() const { return vocab_; }

 private:
  struct MergeTable;  // open-addressing (id_a, id_b) -> (rank, new_id)
  struct Symbol {
    int32_t id;
    int32_t prev, next;  // linked list over symbol indices, -1 at the ends
    uint32_t len;        // bytes of the input covered; 0 = merged away
  };

  void merge_word(std::string_view word, std::vector<int32_t>& out) const;
  void apply_merges(std::vector<Symbol>& symbols) const;
  bool find_merge(int32_t a, int32_t b, uint32_t* rank, int32_t* new_id) const;

  Vocab vocab_;
  std::vector<std::string> vocab_r_;
  std::vector<uint8_t> has_id_;
  std::vector<uint64_t> merge_keys_;
  std::vector<uint64_t> merge_vals_;  // rank << 32 | new_id
  uint64_t merge_mask_ = 0;

  int32_t unk_id_ = -1;
  std::string unk_token_;
  bool has_unk_ = false;
  std::string continuing_subword_prefix_, end_of_word_suffix_;
  bool fuse_unk_ = false, byte_fallback_ = false, ignore_merges_ = false;
  int32_t byte_ids_[256];
  std::vector<int32_t> bmp_ids_;  // id of each single-character BMP token, -1 if none
  bool all_bytes_ = false;

  // Word cache (like HF's: words shorter than 256 bytes, bounded count).
  static constexpr size_t kCacheMaxWordLen = 256;
  static constexpr size_t kCacheCapacity = 1 << 16;
  mutable std::shared_mutex cache_mu_;
  mutable std::unordered_map<std::string, std::vector<int32_t>, StringHash, std::equal_to<>> cache_;
};

}  // namespace ringlm::tok
