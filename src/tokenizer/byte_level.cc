#include "tokenizer/byte_level.h"

#include "tokenizer/unicode.h"

namespace ringlm::tok {

ByteLevelTable::ByteLevelTable() {
  cp_to_byte.fill(-1);
  int next = 256;
  for (int b = 0; b < 256; ++b) {
    const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
    const int cp = printable ? b : next++;
    std::string s;
    append_utf8(s, static_cast<char32_t>(cp));
    byte_to_utf8[static_cast<size_t>(b)] = s;
    cp_to_byte[static_cast<size_t>(cp)] = static_cast<int16_t>(b);
  }
}

const ByteLevelTable& byte_level_table() {
  static const ByteLevelTable t;
  return t;
}

}  // namespace ringlm::tok
