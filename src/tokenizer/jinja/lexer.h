// Tokenizer for Jinja templates with the Hugging Face chat-template settings: default delimiters,
// trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=False. Mirrors jinja2 3.1's lexer
// rule by rule (whitespace control with '-' and '+', raw blocks, comments, operator balancing).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace ringlm::jinja {

enum class Tok : uint8_t {
  Data,
  VarBegin,
  VarEnd,
  BlockBegin,
  BlockEnd,
  Name,
  String,
  Int,
  Float,
  Op,
  Eof,
};

struct Token {
  Tok type = Tok::Eof;
  std::string text;  // data text, name, decoded string literal, or operator spelling
  int64_t ival = 0;
  double fval = 0;
  int line = 1;
};

// Throws TemplateError(Syntax) on lexical errors. The source must be valid UTF-8.
std::vector<Token> tokenize(std::string_view source);

}  // namespace ringlm::jinja
