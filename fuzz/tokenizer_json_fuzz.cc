// libFuzzer target: tokenizer.json loading from arbitrary bytes. Any input must either load or
// throw ringlm::Error; a loaded tokenizer must encode a few texts and satisfy the decode
// invariants.
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "fuzz_common.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  try {
    const ringlm::Tokenizer t = ringlm::Tokenizer::from_json(input);
    for (std::string_view text :
         {std::string_view("Hello world! 123 \xE2\x96\x81x \xC3\xA9\xF0\x9F\x98"),
          std::string_view("  <s>a</s>\n\n\tb  "), std::string_view("")}) {
      const std::vector<int32_t> ids = t.encode(text, true);
      ringlm::fuzz::check_decode(t, ids);
    }
    std::vector<int32_t> ids;
    for (int32_t id = -1; id < 64; ++id) ids.push_back(id);
    ringlm::fuzz::check_decode(t, ids);
  } catch (const ringlm::Error&) {
    // Rejected with a message: fine.
  }
  return 0;
}
