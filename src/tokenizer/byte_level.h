// GPT-2's byte <-> printable-character table (bytes_to_unicode) used by ByteLevel components.
#pragma once

#include <array>
#include <cstdint>
#include <string>

namespace ringlm::tok {

struct ByteLevelTable {
  std::array<std::string, 256> byte_to_utf8;  // byte -> UTF-8 of its printable stand-in
  std::array<int16_t, 512> cp_to_byte;        // stand-in code point (< 512) -> byte, or -1
  ByteLevelTable();
};

const ByteLevelTable& byte_level_table();

}  // namespace ringlm::tok
