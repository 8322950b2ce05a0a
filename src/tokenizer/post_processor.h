// Post-processors of tokenizer.json ("post_processor"): TemplateProcessing, BertProcessing,
// RobertaProcessing, ByteLevel (no effect on ids) and Sequence — reduced to what they do to the
// ids of one sequence when special tokens are requested.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tokenizer/json_util.h"

namespace ringlm::tok {

class PostProcessor {
 public:
  static PostProcessor parse(const json& j, const std::string& where);  // j may be null
  // ids -> prefix + ids + suffix (add_special_tokens=true).
  void apply(std::vector<int32_t>& ids) const;
  const std::vector<int32_t>& prefix() const { return prefix_; }
  const std::vector<int32_t>& suffix() const { return suffix_; }
  void set(std::vector<int32_t> prefix, std::vector<int32_t> suffix) {
    prefix_ = std::move(prefix);
    suffix_ = std::move(suffix);
  }

 private:
  void parse_into(const json& j, const std::string& where);
  std::vector<int32_t> prefix_, suffix_;
};

}  // namespace ringlm::tok
