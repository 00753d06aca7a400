// Splits template text into tokens the way jinja2's lexer does with Hugging Face's settings
// (trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=False): whitespace control is applied here,
// so the parser only ever sees final template data.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace spark::jinja {

enum class TokenType {
  kData,
  kVariableBegin,
  kVariableEnd,
  kBlockBegin,
  kBlockEnd,
  kName,
  kString,
  kInteger,
  kFloat,
  kOperator,
  kEof,
};

struct Token {
  TokenType type = TokenType::kEof;
  std::string value;  // data text, name, decoded string literal, or operator spelling
  int64_t int_value = 0;
  double float_value = 0;
  int line = 1;
};

// Throws TemplateError (kSyntax) naming the line of the problem.
std::vector<Token> tokenize(std::string_view source);

const char* describe(TokenType type);

}  // namespace spark::jinja
