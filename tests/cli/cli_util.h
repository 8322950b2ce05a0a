// Runs the ringlm binary for the CLI tests: exit code and output, optionally with stdin text.
#pragma once

#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include <unistd.h>

namespace ringlm::testing {

struct Outcome {
  int exit_code = -1;
  std::string output;  // stdout and stderr together
};

// stdin_text (if any) is fed through a temporary file; stderr is merged unless stdout_only.
inline Outcome run(const std::string& args, const std::string& stdin_text = "",
                   bool stdout_only = false) {
  std::string command = std::string(RINGLM_BINARY) + " " + args;
  std::string input_path;
  if (!stdin_text.empty()) {
    input_path = "/tmp/ringlm_cli_stdin_" + std::to_string(getpid());
    std::ofstream(input_path) << stdin_text;
    command += " < " + input_path;
  }
  command += stdout_only ? " 2>/dev/null" : " 2>&1";
  FILE* pipe = popen(command.c_str(), "r");
  Outcome out;
  if (pipe == nullptr) return out;
  std::array<char, 4096> buf{};
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), pipe)) > 0) out.output.append(buf.data(), n);
  const int status = pclose(pipe);
  out.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  if (!input_path.empty()) std::remove(input_path.c_str());
  return out;
}

inline std::vector<std::string> lines(const std::string& text) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start < text.size()) {
    const size_t end = text.find('\n', start);
    out.push_back(text.substr(start, end == std::string::npos ? std::string::npos : end - start));
    if (end == std::string::npos) break;
    start = end + 1;
  }
  return out;
}

inline std::string join(const std::vector<int32_t>& ids) {
  std::string s;
  for (size_t i = 0; i < ids.size(); ++i) s += (i ? "," : "") + std::to_string(ids[i]);
  return s;
}

}  // namespace ringlm::testing
