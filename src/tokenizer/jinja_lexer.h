#pragma once
// Splits a Jinja template into text and tag tokens, applying Jinja2's whitespace rules exactly
// as its lexer does: {%- -%} {{- -}} {#- -#} strip, trim_blocks drops the newline after a block
// or comment tag, lstrip_blocks drops the indentation before one, and the one trailing newline
// of the source is dropped (keep_trailing_newline=False). HF's apply_chat_template turns on
// trim_blocks and lstrip_blocks, and so do we by default.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace myriad::tokenizer::jinja {

enum class TokenType {
  kText,
  kVarBegin,    // {{
  kVarEnd,      // }}
  kBlockBegin,  // {%
  kBlockEnd,    // %}
  kName,
  kString,      // text holds the unescaped value
  kInt,
  kFloat,
  kOp,          // text holds the operator: + - * / // % ** ~ == != < > <= >= = . , : | ( ) [ ] { }
  kEnd,
};

struct Token {
  TokenType type = TokenType::kEnd;
  std::string text;
  int64_t int_value = 0;
  double float_value = 0;
  int line = 1;
  int col = 1;
};

struct LexOptions {
  bool trim_blocks = true;
  bool lstrip_blocks = true;
  bool keep_trailing_newline = false;
};

// Throws JinjaError (with line and column) on an unterminated tag, comment or string, or a
// character that starts no token. The last token is kEnd.
std::vector<Token> Lex(std::string_view source, const LexOptions& options);

}  // namespace myriad::tokenizer::jinja
