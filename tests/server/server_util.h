// Shared by the server unit tests: the server fixture's tokenizer (byte-level BPE, ChatML
// specials, the Qwen 2.5 chat template) and a helper expecting an ApiError.
#pragma once

#include <functional>
#include <string>

#include <gtest/gtest.h>

#include "server/api_error.h"
#include "tokenizer/tokenizer.h"

namespace ringlm::server::test {

inline const Tokenizer& fixture_tokenizer() {
  static const Tokenizer t = Tokenizer::load(std::string(RINGLM_FIXTURES_DIR) + "/server_model");
  return t;
}

// Runs `fn`, expecting an ApiError with `status` whose message contains `needle` and whose
// param is `param`.
inline void expect_api_error(const std::function<void()>& fn, int status, const std::string& param,
                             const std::string& needle) {
  try {
    fn();
    ADD_FAILURE() << "no error; expected " << status << " on '" << param << "'";
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status(), status) << e.what();
    EXPECT_EQ(e.param(), param) << e.what();
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

}  // namespace ringlm::server::test
