// Fuzz target: any byte string, parsed as a chat template and rendered against a conversation
// with tools, must end in output or a ringlm::Error — never a crash, a hang, UB or a leak.
// Built with libFuzzer under Clang; with GCC, RINGLM_FUZZ_STANDALONE adds a small mutation driver.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "tokenizer/jinja/chat_template.h"

namespace {

const nlohmann::ordered_json& conversation() {
  static const nlohmann::ordered_json c = nlohmann::ordered_json::parse(R"({
    "messages": [
      {"role": "system", "content": "You are helpful."},
      {"role": "user", "content": "Hi é 😀 <think>"},
      {"role": "assistant", "content": "<think>\nhm\n</think>\n\nHello", "reasoning_content": "r"},
      {"role": "user", "content": [{"type": "text", "text": "look"}, {"type": "image"}]},
      {"role": "assistant", "content": null, "tool_calls": [{"id": "abc123XYZ", "type": "function",
        "function": {"name": "f", "arguments": {"x": 1, "y": [1.5, null, true]}}}]},
      {"role": "tool", "tool_call_id": "abc123XYZ", "content": "{\"ok\": 1}"}
    ],
    "tools": [{"type": "function", "function": {"name": "f", "description": "d",
      "parameters": {"type": "object", "properties": {"x": {"type": "integer"}}}}}],
    "documents": null,
    "add_generation_prompt": true,
    "bos_token": "<s>", "eos_token": "</s>", "enable_thinking": false
  })");
  return c;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view src(reinterpret_cast<const char*>(data), size);
  ringlm::jinja::RenderOptions opt;
  opt.limits.max_steps = 200'000;
  opt.limits.max_string_bytes = 1u << 20;
  opt.limits.max_items = 1u << 16;
  opt.now = std::chrono::system_clock::from_time_t(1700000000);
  try {
    auto t = ringlm::jinja::Template::parse(src);
    std::string out = t.render(conversation(), opt);
    (void)out;
  } catch (const ringlm::Error&) {
    // Expected: syntax errors, template errors, limits.
  }
  return 0;
}

#ifdef RINGLM_FUZZ_STANDALONE
// A small stand-in for libFuzzer's driver: replays every corpus file, then mutates corpus inputs
// (byte edits, Jinja token insertions, splices) with a fixed seed until -runs or -max_total_time.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <vector>

int main(int argc, char** argv) {
  long runs = -1, max_time = 60, max_len = 16384;
  unsigned seed = 12345;
  std::vector<std::string> corpus;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto val = [&](const char* flag) { return std::atol(a.c_str() + std::strlen(flag)); };
    if (a.rfind("-runs=", 0) == 0)
      runs = val("-runs=");
    else if (a.rfind("-max_total_time=", 0) == 0)
      max_time = val("-max_total_time=");
    else if (a.rfind("-max_len=", 0) == 0)
      max_len = val("-max_len=");
    else if (a.rfind("-seed=", 0) == 0)
      seed = static_cast<unsigned>(val("-seed="));
    else if (a.rfind("-", 0) == 0)
      continue;  // other libFuzzer flags are accepted and ignored
    else {
      std::vector<std::filesystem::path> files;
      if (std::filesystem::is_directory(a)) {
        for (const auto& e : std::filesystem::directory_iterator(a)) files.push_back(e.path());
      } else {
        files.emplace_back(a);
      }
      for (const auto& p : files) {
        std::ifstream f(p, std::ios::binary);
        std::stringstream ss;
        ss << f.rdbuf();
        corpus.push_back(ss.str());
      }
    }
  }
  if (corpus.empty()) corpus.emplace_back("{{ messages[0].content }}");
  for (const auto& c : corpus)
    LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(c.data()), c.size());
  static const char* const kTokens[] = {"{{",
                                        "}}",
                                        "{%",
                                        "%}",
                                        "{#",
                                        "#}",
                                        "{%-",
                                        "-%}",
                                        "{{-",
                                        "-}}",
                                        " if ",
                                        " else ",
                                        " endif ",
                                        " for ",
                                        " in ",
                                        " endfor ",
                                        " set ",
                                        " macro ",
                                        " endmacro ",
                                        " call ",
                                        " endcall ",
                                        " filter ",
                                        " endfilter ",
                                        " namespace(",
                                        " loop.",
                                        "|tojson",
                                        "|trim",
                                        "|length",
                                        "|join",
                                        "|map(attribute='role')",
                                        "|selectattr('role','equalto','user')",
                                        " is defined",
                                        " not ",
                                        " and ",
                                        " or ",
                                        "(",
                                        ")",
                                        "[",
                                        "]",
                                        "{",
                                        "}",
                                        "'",
                                        "\"",
                                        "\\",
                                        ",",
                                        ":",
                                        ".",
                                        "~",
                                        "+",
                                        "*",
                                        "**",
                                        "//",
                                        "%",
                                        "[::-1]",
                                        "[1:]",
                                        "messages",
                                        "tools",
                                        "range(99999)",
                                        "raise_exception('x')",
                                        "\n",
                                        " ",
                                        "é",
                                        "😀",
                                        "\x00",
                                        "caller()",
                                        "recursive",
                                        "loop(",
                                        "break",
                                        "continue"};
  std::mt19937 rng(seed);
  auto start = std::chrono::steady_clock::now();
  long n = 0;
  for (; runs < 0 || n < runs; ++n) {
    if ((n & 63) == 0 && std::chrono::steady_clock::now() - start > std::chrono::seconds(max_time))
      break;
    std::string s = corpus[rng() % corpus.size()];
    int edits = 1 + static_cast<int>(rng() % 8);
    for (int e = 0; e < edits; ++e) {
      size_t pos = s.empty() ? 0 : rng() % (s.size() + 1);
      switch (rng() % 6) {
        case 0:
          if (!s.empty() && pos < s.size()) s[pos] = static_cast<char>(rng());
          break;
        case 1:
          if (!s.empty() && pos < s.size()) s.erase(pos, 1 + rng() % 16);
          break;
        case 2:
          s.insert(pos, kTokens[rng() % (sizeof kTokens / sizeof *kTokens)]);
          break;
        case 3: {
          const std::string& o = corpus[rng() % corpus.size()];
          if (!o.empty()) {
            size_t b = rng() % o.size();
            s.insert(pos, o.substr(b, 1 + rng() % 64));
          }
          break;
        }
        case 4:
          if (pos < s.size()) s.insert(pos, s.substr(pos, 1 + rng() % 32));
          break;
        default:
          s.insert(pos, 1, static_cast<char>("{}%#-+'\"()[]|.~ \n"[rng() % 17]));
      }
    }
    if (static_cast<long>(s.size()) > max_len) s.resize(static_cast<size_t>(max_len));
    LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(s.data()), s.size());
    if (n % 2 == 0 && s.size() < 4096 && corpus.size() < 4096) corpus.push_back(s);
  }
  std::printf("jinja_fuzz: %zu corpus inputs replayed, %ld mutated inputs run, no findings\n",
              corpus.size(), n);
  return 0;
}
#endif
