// Added tokens of tokenizer.json ("added_tokens"), matched in the input before the model like HF's
// AddedVocabulary: leftmost-longest over the raw text for normalized=false tokens, then over each
// normalized remaining piece for normalized=true tokens; lstrip/rstrip absorb adjacent whitespace,
// single_word requires non-word characters (or the text edge) on both sides.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "tokenizer/bpe.h"
#include "tokenizer/normalizers.h"
#include "tokenizer/pre_tokenizers.h"

namespace ringlm::tok {

struct AddedToken {
  std::string content;
  int32_t id = -1;
  bool special = false, lstrip = false, rstrip = false, normalized = true, single_word = false;
};

class AddedVocab {
 public:
  // Adds tokens in file order and assigns ids the way HF does (the model's id if the content is
  // in the vocabulary, else the next id after the vocabulary / the largest added id).
  void build(const json& added_tokens, const BpeModel& model, const Normalizer* normalizer,
             const std::string& where);

  // Splits text (valid UTF-8) into added-token pieces and normalized text pieces.
  // parse_special=false leaves special tokens as text (HF's split_special_tokens).
  void extract_and_normalize(std::string_view text, const Normalizer* normalizer,
                             bool parse_special, std::vector<Piece>& out) const;

  const AddedToken* find_id(int32_t id) const;
  int32_t find_content(std::string_view content) const;  // -1 if absent
  bool is_special(int32_t id) const {
    const AddedToken* t = find_id(id);
    return t != nullptr && t->special;
  }
  const std::vector<AddedToken>& tokens() const { return tokens_; }
  int32_t max_id() const { return max_id_; }

 private:
  struct Trie {
    struct Node {
      std::vector<std::pair<uint8_t, int32_t>> next;  // sorted by byte
      int32_t token = -1;                             // index into tokens_ if a token ends here
    };
    std::vector<Node> nodes{Node{}};
    bool first_byte[256] = {};
    void insert(std::string_view s, int32_t token);
    // Longest token starting at s[i]: returns its length (0 if none) and sets *token.
    size_t longest_at(std::string_view s, size_t i, int32_t* token) const;
  };

  void split(std::string_view s, const Trie& trie, bool parse_special, bool at_start,
             std::vector<Piece>& out, std::vector<Piece>* rest) const;

  std::vector<AddedToken> tokens_;
  std::unordered_map<int32_t, size_t> by_id_;
  std::unordered_map<std::string, size_t, StringHash, std::equal_to<>> by_content_;
  Trie raw_trie_, norm_trie_;
  int32_t max_id_ = -1;
};

}  // namespace ringlm::tok
