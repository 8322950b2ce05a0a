// libFuzzer target: encode arbitrary bytes with real tokenizers (from the npm fixtures, or the
// directories in RINGLM_FUZZ_TOKENIZERS, ':'-separated). The first byte picks the tokenizer.
// Invariants: encode never throws; decode/stream invariants hold for the ids and for ids read
// from the input; byte-level tokenizers without a normalizer round-trip the (U+FFFD-repaired) text.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "fuzz_common.h"

namespace {

struct Loaded {
  std::unique_ptr<ringlm::Tokenizer> tok;
  bool round_trips;
};

std::vector<Loaded>& tokenizers() {
  static std::vector<Loaded> all = [] {
    std::vector<std::pair<std::string, bool>> dirs;
    if (const char* env = std::getenv("RINGLM_FUZZ_TOKENIZERS")) {
      std::string s = env;
      size_t pos = 0;
      while (pos <= s.size()) {
        size_t e = s.find(':', pos);
        if (e == std::string::npos) e = s.size();
        if (e > pos) dirs.push_back({s.substr(pos, e - pos), false});
        pos = e + 1;
      }
    } else {
      const std::string root = RINGLM_NPM_TOKENIZERS;
      dirs = {{root + "/tokenizer-gpt2/models", true},
              {root + "/tokenizer-llama3/models", true},
              {root + "/tokenizer-llama2/models", false},
              {root + "/tokenizer-qwen3/models", false},
              {root + "/tokenizer-deepseek_v3/models", false}};
    }
    std::vector<Loaded> v;
    for (const auto& [dir, rt] : dirs) {
      try {
        v.push_back({std::make_unique<ringlm::Tokenizer>(ringlm::Tokenizer::load(dir)), rt});
      } catch (const ringlm::Error& e) {
        std::fprintf(stderr, "skipping %s: %s\n", dir.c_str(), e.what());
      }
    }
    if (v.empty())
      ringlm::fuzz::fail("no tokenizer could be loaded (npm ci in tests/tokenizer/npm)");
    return v;
  }();
  return all;
}

}  // namespace

// Load before fuzzing starts: loading large vocabularies under ASan takes seconds, which must not
// count against the per-input timeout.
extern "C" int LLVMFuzzerInitialize(int*, char***) {
  tokenizers();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  auto& all = tokenizers();
  const Loaded& l = all[data[0] % all.size()];
  const std::string text(reinterpret_cast<const char*>(data + 1), size - 1);
  try {
    const std::vector<int32_t> ids = l.tok->encode(text, false);
    ringlm::fuzz::check_decode(*l.tok, ids);
    if (l.round_trips && l.tok->decode(ids) != ringlm::tok::to_valid_utf8(text)) {
      ringlm::fuzz::fail("byte-level decode(encode(x)) != x");
    }
    const std::vector<int32_t> special = l.tok->encode(text, true, false);
    ringlm::fuzz::check_decode(*l.tok, special);
    // The input read as ids (modulo the id space, -1 for an out-of-range id now and then).
    std::vector<int32_t> raw;
    const auto space = static_cast<uint32_t>(l.tok->max_token_id()) + 2;
    for (size_t i = 1; i + 3 < size && raw.size() < 64; i += 3) {
      const uint32_t v = data[i] | (uint32_t{data[i + 1]} << 8) | (uint32_t{data[i + 2]} << 16);
      raw.push_back(static_cast<int32_t>(v % space) - 1);
    }
    ringlm::fuzz::check_decode(*l.tok, raw);
  } catch (const ringlm::Error& e) {
    std::fprintf(stderr, "unexpected error: %s\n", e.what());
    ringlm::fuzz::fail("encode/decode threw on a loaded tokenizer");
  }
  return 0;
}
