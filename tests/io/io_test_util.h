// Helpers for the io tests: a self-deleting temp directory, raw file writers for hand-made (and
// deliberately broken) safetensors files, and error-message assertions.
#pragma once

#include <gtest/gtest.h>
#include <stdlib.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <string>

#include "core/error.h"

namespace ringlm::io::testing {

class TempDir {
 public:
  TempDir() {
    std::string pattern =
        (std::filesystem::path(::testing::TempDir()) / "ringlm_io_XXXXXX").string();
    if (::mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
    path_ = pattern;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::string& path() const { return path_; }
  std::string file(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

inline std::string le64(uint64_t value) {
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i)
    out[static_cast<size_t>(i)] = static_cast<char>((value >> (8 * i)) & 0xff);
  return out;
}

inline void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!out) throw std::runtime_error("cannot write " + path);
}

// A safetensors file with the given header text and data bytes (header length = header.size()).
inline void write_raw_safetensors(const std::string& path, const std::string& header,
                                  const std::string& data) {
  write_bytes(path, le64(header.size()) + header + data);
}

inline std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// Runs f, which must throw ringlm::Error; returns its message (empty + a failure otherwise).
template <typename F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const ringlm::Error& e) {
    return e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "expected ringlm::Error, got another exception: " << e.what();
    return "";
  }
  ADD_FAILURE() << "expected ringlm::Error, nothing was thrown";
  return "";
}

inline void expect_mentions(const std::string& message, std::initializer_list<std::string> parts) {
  for (const std::string& part : parts)
    EXPECT_NE(message.find(part), std::string::npos)
        << "error message lacks \"" << part << "\":\n  " << message;
}

}  // namespace ringlm::io::testing
