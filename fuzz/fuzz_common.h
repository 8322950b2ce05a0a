// Shared checks for the tokenizer fuzz targets: decode invariants that must hold for any ids.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <span>
#include <string>

#include "tokenizer/detokenizer.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/unicode.h"

namespace ringlm::fuzz {

[[noreturn]] inline void fail(const char* what) {
  std::fprintf(stderr, "fuzz invariant violated: %s\n", what);
  std::abort();
}

// decode() is valid UTF-8 and equals the concatenated incremental stream, whose every piece is
// valid UTF-8; for both skip_special_tokens settings.
inline void check_decode(const Tokenizer& t, std::span<const int32_t> ids) {
  for (bool skip : {false, true}) {
    const std::string full = t.decode(ids, skip);
    if (!tok::is_valid_utf8(full)) fail("decode produced invalid UTF-8");
    IncrementalDetokenizer d(t, skip);
    std::string streamed;
    for (int32_t id : ids) {
      const std::string piece = d.push(id);
      if (!tok::is_valid_utf8(piece)) fail("incremental piece is invalid UTF-8");
      streamed += piece;
    }
    streamed += d.flush();
    if (streamed != full) fail("incremental stream != decode");
  }
}

}  // namespace ringlm::fuzz
