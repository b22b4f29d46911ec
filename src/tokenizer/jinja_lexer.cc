#include "tokenizer/jinja_lexer.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>

#include "tokenizer/jinja_value.h"

namespace myriad::tokenizer::jinja {
namespace {

bool IsSpace(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}
bool IsDigit(char c) { return c >= '0' && c <= '9'; }
bool IsNameStart(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool IsNameChar(char c) { return IsNameStart(c) || IsDigit(c); }

class Lexer {
 public:
  Lexer(std::string source, const LexOptions& options)
      : src_(std::move(source)), options_(options) {
    line_starts_.push_back(0);
    for (size_t i = 0; i < src_.size(); ++i) {
      if (src_[i] == '\n') line_starts_.push_back(i + 1);
    }
  }

  std::vector<Token> Run() {
    size_t pos = 0;
    while (pos < src_.size()) {
      const size_t tag = FindTagStart(pos);
      std::string text = src_.substr(pos, tag - pos);
      if (tag == src_.size()) {
        Emit(TokenType::kText, std::move(text), pos);
        break;
      }
      const char kind = src_[tag + 1];  // '{', '%' or '#'
      const char modifier = tag + 2 < src_.size() ? src_[tag + 2] : '\0';
      if (modifier == '-') {
        while (!text.empty() && IsSpace(text.back())) text.pop_back();
      } else if (modifier != '+' && kind != '{' && options_.lstrip_blocks) {
        // Jinja2 strips the indentation only when nothing but whitespace precedes the tag on
        // its line.
        const size_t nl = text.rfind('\n');
        const size_t l_pos = nl == std::string::npos ? 0 : nl + 1;
        const bool line_starting = pos == 0 || src_[pos - 1] == '\n';
        if ((l_pos > 0 || line_starting) &&
            std::all_of(text.begin() + static_cast<std::ptrdiff_t>(l_pos), text.end(), IsSpace)) {
          text.resize(l_pos);
        }
      }
      Emit(TokenType::kText, std::move(text), pos);
      size_t inner = tag + 2 + ((modifier == '-' || modifier == '+') ? 1 : 0);
      if (kind == '#') {
        pos = LexComment(tag, inner);
      } else {
        pos = LexTag(tag, inner, kind == '%');
      }
    }
    Emit(TokenType::kEnd, "", src_.size());
    return std::move(tokens_);
  }

 private:
  size_t FindTagStart(size_t from) const {
    for (size_t i = src_.find('{', from); i != std::string::npos; i = src_.find('{', i + 1)) {
      if (i + 1 < src_.size() && (src_[i + 1] == '{' || src_[i + 1] == '%' || src_[i + 1] == '#')) {
        return i;
      }
    }
    return src_.size();
  }

  [[noreturn]] void FailAt(size_t offset, std::string message) const {
    JinjaError error{std::move(message)};
    Position(offset, error.line, error.col);
    throw error;
  }

  void Position(size_t offset, int& line, int& col) const {
    auto it = std::upper_bound(line_starts_.begin(), line_starts_.end(), offset);
    const size_t index = static_cast<size_t>(it - line_starts_.begin()) - 1;
    line = static_cast<int>(index) + 1;
    col = static_cast<int>(offset - line_starts_[index]) + 1;
  }

  void Emit(TokenType type, std::string text, size_t offset) {
    if (type == TokenType::kText && text.empty()) return;
    Token token;
    token.type = type;
    token.text = std::move(text);
    Position(offset, token.line, token.col);
    tokens_.push_back(std::move(token));
  }

  // After a closing tag: "-" strips all following whitespace, otherwise trim_blocks drops one
  // newline after a block or comment tag ("+" keeps it).
  size_t AfterTag(size_t after, char right_modifier, bool is_block_or_comment) const {
    if (right_modifier == '-') {
      while (after < src_.size() && IsSpace(src_[after])) ++after;
    } else if (right_modifier != '+' && is_block_or_comment && options_.trim_blocks &&
               after < src_.size() && src_[after] == '\n') {
      ++after;
    }
    return after;
  }

  size_t LexComment(size_t tag, size_t inner) {
    const size_t end = src_.find("#}", inner);
    if (end == std::string::npos) FailAt(tag, "unterminated comment: missing '#}'");
    const char right = end > inner && (src_[end - 1] == '-' || src_[end - 1] == '+') ? src_[end - 1] : '\0';
    return AfterTag(end + 2, right, true);
  }

  // Tokenizes the expression inside {{ }} or {% %}; returns the offset after the closing tag.
  size_t LexTag(size_t tag, size_t pos, bool block) {
    Emit(block ? TokenType::kBlockBegin : TokenType::kVarBegin, block ? "{%" : "{{", tag);
    const size_t first_token = tokens_.size();
    int brace_depth = 0;
    while (true) {
      while (pos < src_.size() && IsSpace(src_[pos])) ++pos;
      if (pos >= src_.size()) {
        FailAt(tag, block ? "unterminated block tag: missing '%}'" : "unterminated expression: missing '}}'");
      }
      const std::string_view rest(src_.data() + pos, src_.size() - pos);
      const std::string_view close = block ? "%}" : "}}";
      char right = '\0';
      size_t close_len = 0;
      // "-}}" strips, but "+" only modifies block ends ("+%}"), as in Jinja2.
      if ((rest[0] == '-' || (block && rest[0] == '+')) && rest.substr(1, 2) == close) {
        right = rest[0];
        close_len = 3;
      } else if (rest.substr(0, 2) == close && (block || brace_depth == 0)) {
        close_len = 2;
      }
      if (close_len > 0) {
        Emit(block ? TokenType::kBlockEnd : TokenType::kVarEnd, std::string(close), pos);
        size_t after = AfterTag(pos + close_len, right, block);
        if (block && tokens_.size() == first_token + 2 && tokens_[first_token].type == TokenType::kName &&
            tokens_[first_token].text == "raw") {
          after = LexRaw(tag, after);
        }
        return after;
      }
      pos = LexToken(pos, brace_depth);
    }
  }

  // {% raw %}...{% endraw %}: the body is text, tags and all.
  size_t LexRaw(size_t tag, size_t body) {
    tokens_.resize(tokens_.size() - 3);  // drop {% raw %}
    for (size_t i = src_.find("{%", body); i != std::string::npos; i = src_.find("{%", i + 2)) {
      size_t p = i + 2;
      const char left = p < src_.size() && (src_[p] == '-' || src_[p] == '+') ? src_[p++] : '\0';
      while (p < src_.size() && IsSpace(src_[p])) ++p;
      if (src_.compare(p, 6, "endraw") != 0) continue;
      p += 6;
      while (p < src_.size() && IsSpace(src_[p])) ++p;
      char right = '\0';
      if (p < src_.size() && (src_[p] == '-' || src_[p] == '+')) right = src_[p++];
      if (src_.compare(p, 2, "%}") != 0) continue;
      std::string text = src_.substr(body, i - body);
      if (left == '-') {
        while (!text.empty() && IsSpace(text.back())) text.pop_back();
      }
      Emit(TokenType::kText, std::move(text), body);
      return AfterTag(p + 2, right, true);
    }
    FailAt(tag, "unterminated raw block: missing '{% endraw %}'");
  }

  size_t LexToken(size_t pos, int& brace_depth) {
    const char c = src_[pos];
    if (c == '\'' || c == '"') return LexString(pos);
    if (IsDigit(c)) return LexNumber(pos);
    if (IsNameStart(c)) {
      size_t end = pos;
      while (end < src_.size() && IsNameChar(src_[end])) ++end;
      Emit(TokenType::kName, src_.substr(pos, end - pos), pos);
      return end;
    }
    static constexpr std::string_view kTwoCharOps[] = {"//", "**", "==", "!=", "<=", ">="};
    for (std::string_view op : kTwoCharOps) {
      if (src_.compare(pos, 2, op) == 0) {
        Emit(TokenType::kOp, std::string(op), pos);
        return pos + 2;
      }
    }
    static constexpr std::string_view kOneCharOps = "+-*/%~<>=.,:|()[]{}";
    if (kOneCharOps.find(c) != std::string_view::npos) {
      if (c == '{') ++brace_depth;
      if (c == '}') --brace_depth;
      Emit(TokenType::kOp, std::string(1, c), pos);
      return pos + 1;
    }
    FailAt(pos, std::string("unexpected character '") + c + "'");
  }

  size_t LexNumber(size_t pos) {
    size_t end = pos;
    auto digits = [&] {
      while (end < src_.size() && (IsDigit(src_[end]) || src_[end] == '_')) ++end;
    };
    digits();
    bool is_float = false;
    // "1.5" is a float, but "x.0.1" and "items.0" are attribute access: Jinja2's float rule
    // does not fire right after a dot.
    const bool after_dot = !tokens_.empty() && tokens_.back().type == TokenType::kOp &&
                           tokens_.back().text == ".";
    if (!after_dot && end + 1 < src_.size() && src_[end] == '.' && IsDigit(src_[end + 1])) {
      is_float = true;
      ++end;
      digits();
    }
    if (!after_dot && end < src_.size() && (src_[end] == 'e' || src_[end] == 'E')) {
      size_t e = end + 1;
      if (e < src_.size() && (src_[e] == '+' || src_[e] == '-')) ++e;
      if (e < src_.size() && IsDigit(src_[e])) {
        is_float = true;
        end = e;
        digits();
      }
    }
    if (!is_float) {
      // Jinja2's integers: 0x/0o/0b radix forms, and no leading zeros ("08" lexes as 0, 8).
      const char radix = pos + 1 < src_.size() ? static_cast<char>(std::tolower(src_[pos + 1])) : '\0';
      if (src_[pos] == '0' && (radix == 'x' || radix == 'o' || radix == 'b')) {
        return LexRadixInt(pos, radix == 'x' ? 16 : radix == 'o' ? 8 : 2);
      }
      if (src_[pos] == '0') {
        end = pos + 1;
        while (end < src_.size() && (src_[end] == '0' || (src_[end] == '_' && end + 1 < src_.size() && src_[end + 1] == '0'))) ++end;
      }
    }
    std::string text;
    for (size_t i = pos; i < end; ++i) {
      if (src_[i] != '_') text += src_[i];
    }
    Token token;
    token.type = is_float ? TokenType::kFloat : TokenType::kInt;
    token.text = text;
    Position(pos, token.line, token.col);
    if (is_float) {
      token.float_value = std::strtod(text.c_str(), nullptr);
    } else {
      errno = 0;
      token.int_value = std::strtoll(text.c_str(), nullptr, 10);
      if (errno == ERANGE) FailAt(pos, "integer literal out of range: " + text);
    }
    tokens_.push_back(std::move(token));
    return end;
  }

  size_t LexRadixInt(size_t pos, int base) {
    size_t end = pos + 2;
    std::string digits;
    while (end < src_.size() && (std::isxdigit(static_cast<unsigned char>(src_[end])) || src_[end] == '_')) {
      if (src_[end] != '_') digits += src_[end];
      ++end;
    }
    char* stop = nullptr;
    errno = 0;
    const long long value = std::strtoll(digits.c_str(), &stop, base);
    if (digits.empty() || stop != digits.c_str() + digits.size() || errno == ERANGE) {
      FailAt(pos, "invalid integer literal " + src_.substr(pos, end - pos));
    }
    Token token;
    token.type = TokenType::kInt;
    token.text = src_.substr(pos, end - pos);
    token.int_value = value;
    Position(pos, token.line, token.col);
    tokens_.push_back(std::move(token));
    return end;
  }

  size_t LexString(size_t pos) {
    const char quote = src_[pos];
    std::string value;
    size_t i = pos + 1;
    while (true) {
      if (i >= src_.size()) FailAt(pos, "unterminated string literal");
      const char c = src_[i];
      if (c == quote) break;
      if (c != '\\') {
        value += c;
        ++i;
        continue;
      }
      if (i + 1 >= src_.size()) FailAt(pos, "unterminated string literal");
      const char e = src_[i + 1];
      i += 2;
      // Python's unicode-escape, which Jinja2 applies to string literals.
      switch (e) {
        case 'n': value += '\n'; break;
        case 't': value += '\t'; break;
        case 'r': value += '\r'; break;
        case 'b': value += '\b'; break;
        case 'f': value += '\f'; break;
        case 'v': value += '\v'; break;
        case 'a': value += '\a'; break;
        case '\\': value += '\\'; break;
        case '\'': value += '\''; break;
        case '"': value += '"'; break;
        case '\n': break;  // line continuation
        case 'x':
        case 'u':
        case 'U': {
          const size_t n = e == 'x' ? 2 : e == 'u' ? 4 : 8;
          if (i + n > src_.size()) FailAt(i - 2, "truncated \\" + std::string(1, e) + " escape");
          const std::string hex = src_.substr(i, n);
          char* end = nullptr;
          const unsigned long cp = std::strtoul(hex.c_str(), &end, 16);
          if (end != hex.c_str() + n || cp > 0x10FFFF) {
            FailAt(i - 2, "invalid \\" + std::string(1, e) + " escape");
          }
          AppendUtf8(value, static_cast<uint32_t>(cp));
          i += n;
          break;
        }
        default:
          if (e >= '0' && e <= '7') {
            uint32_t cp = static_cast<uint32_t>(e - '0');
            for (int k = 0; k < 2 && i < src_.size() && src_[i] >= '0' && src_[i] <= '7'; ++k) {
              cp = cp * 8 + static_cast<uint32_t>(src_[i++] - '0');
            }
            AppendUtf8(value, cp);
          } else {
            value += '\\';  // Python keeps unknown escapes as written
            value += e;
          }
      }
    }
    Emit(TokenType::kString, "", pos);
    tokens_.back().text = std::move(value);
    return i + 1;
  }

  std::string src_;
  LexOptions options_;
  std::vector<size_t> line_starts_;
  std::vector<Token> tokens_;
};

std::string NormalizeNewlines(std::string_view source, bool keep_trailing_newline) {
  std::string out;
  out.reserve(source.size());
  for (size_t i = 0; i < source.size(); ++i) {
    if (source[i] == '\r') {
      out += '\n';
      if (i + 1 < source.size() && source[i + 1] == '\n') ++i;
    } else {
      out += source[i];
    }
  }
  if (!keep_trailing_newline && !out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

}  // namespace

std::vector<Token> Lex(std::string_view source, const LexOptions& options) {
  return Lexer(NormalizeNewlines(source, options.keep_trailing_newline), options).Run();
}

}  // namespace myriad::tokenizer::jinja
