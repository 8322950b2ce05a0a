// Reads the tokenizer test corpus (tests/fixtures/tokenizer/corpus/*.txt): entries separated by
// the bytes "\x1e\n", files in name order (see tools/golden/make_tokenizer_corpus.py).
#pragma once

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace ringlm::test {

struct CorpusEntry {
  std::string file;
  size_t index = 0;
  std::string bytes;
};

inline std::vector<CorpusEntry> read_corpus(const std::string& dir) {
  std::vector<std::string> names;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    const std::string n = e.path().filename().string();
    if (n.size() > 4 && n.substr(n.size() - 4) == ".txt") names.push_back(n);
  }
  std::sort(names.begin(), names.end());
  std::vector<CorpusEntry> out;
  for (const auto& n : names) {
    std::ifstream f(dir + "/" + n, std::ios::binary);
    std::ostringstream ss;
    ss << f.rdbuf();
    const std::string data = ss.str();
    size_t pos = 0, idx = 0;
    while (pos < data.size()) {
      size_t sep = data.find("\x1e\n", pos);
      if (sep == std::string::npos) sep = data.size();
      out.push_back({n, idx++, data.substr(pos, sep - pos)});
      pos = sep + 2;
    }
  }
  return out;
}

}  // namespace ringlm::test
