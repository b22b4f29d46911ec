#include "tokenizer/split_pattern.h"

#include <algorithm>
#include <bit>
#include <cstdint>
#include <cstring>
#include <iterator>

#include <fmt/format.h>

#ifdef __SSE2__
#include <emmintrin.h>
#endif

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <utility>

#include "tokenizer/json_util.h"
#include "tokenizer/unicode.h"

namespace myriad::tokenizer {
namespace {

constexpr size_t kNoMatch = std::string_view::npos;

// The patterns exactly as tokenizer.json spells them (after JSON unescaping).
constexpr std::string_view kGpt2 =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";
constexpr std::string_view kQwen2 =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr std::string_view kCl100k =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr std::string_view kDigits1to3 = R"(\p{N}{1,3})";
constexpr std::string_view kDeepSeekCjk = "[\u4e00-\u9fa5\u3040-\u309f\u30a0-\u30ff]+";
// DeepSeek-V3 writes real CR and LF characters inside its classes.
constexpr std::string_view kDeepSeekWords =
    "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+| "
    "?[\\p{P}\\p{S}]+[\r\n]*|\\s*[\r\n]+|\\s+(?!\\S)|\\s+";

inline uint8_t Cls(std::string_view s, size_t i, size_t& len) { return ClassAt(s, i, len); }

// The first i' >= i where s[i'] is a byte b with b - lo <= hi - lo (unsigned, so lo..hi), or
// (when `or_high`) b >= 0x80; s.size() if none. 16 bytes a compare with SSE2: the patterns that
// match rarely (DeepSeek-V3's digits and CJK) skip most of the text this way.
inline size_t SkipToByteIn(std::string_view s, size_t i, uint8_t lo, uint8_t hi, bool or_high) {
#ifdef __SSE2__
  const __m128i vlo = _mm_set1_epi8(static_cast<char>(lo));
  const __m128i vspan = _mm_set1_epi8(static_cast<char>(hi - lo));
  while (i + 16 <= s.size()) {
    const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s.data() + i));
    const __m128i x = _mm_sub_epi8(v, vlo);
    int mask = _mm_movemask_epi8(_mm_cmpeq_epi8(_mm_min_epu8(x, vspan), x));
    if (or_high) mask |= _mm_movemask_epi8(v);
    if (mask != 0) return i + static_cast<size_t>(__builtin_ctz(static_cast<unsigned>(mask)));
    i += 16;
  }
#endif
  while (i < s.size()) {
    const auto b = static_cast<uint8_t>(s[i]);
    if ((or_high && b >= 0x80) || static_cast<uint8_t>(b - lo) <= static_cast<uint8_t>(hi - lo)) break;
    ++i;
  }
  return i;
}

// The number of ASCII letters (A-Z, a-z) that the 8 bytes at p start with. SWAR: OR-ing 0x20
// folds exactly the upper-case letters onto the lower-case ones; two biased adds then set each
// byte's top bit by whether it is at least 'a' and more than 'z' (no carries: every byte is
// ASCII, below 0x80, by the first test).
inline size_t AsciiLettersAt(const char* p) {
  static_assert(std::endian::native == std::endian::little, "the first byte is the lowest");
  constexpr uint64_t kOnes = 0x0101010101010101ull;
  constexpr uint64_t kHigh = 0x8080808080808080ull;
  uint64_t x;
  std::memcpy(&x, p, 8);
  const uint64_t lower = (x | 0x20 * kOnes) & ~kHigh;
  const uint64_t ge_a = lower + (0x80 - 'a') * kOnes;
  const uint64_t gt_z = lower + (0x80 - 'z' - 1) * kOnes;
  const uint64_t letters = ge_a & ~gt_z & ~x & kHigh;  // ~x: the byte was ASCII
  const uint64_t not_letters = ~letters & kHigh;
  return not_letters == 0 ? 8 : static_cast<size_t>(__builtin_ctzll(not_letters)) / 8;  // little-endian
}

// The same for the 16 bytes at p: one SSE2 compare, so that a word of up to 15 letters takes
// one step (a second step for words of 8-15 letters was a branch mispredicted about as often
// as taken).
inline size_t AsciiLetters16At(const char* p) {
#ifdef __SSE2__
  const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  // (b | 0x20) - 'a' is at most 25 exactly for the letters: a byte of 0x80 or more becomes
  // at least 0xA0 - 'a' = 0x3F.
  const __m128i x = _mm_sub_epi8(_mm_or_si128(v, _mm_set1_epi8(0x20)), _mm_set1_epi8('a'));
  const __m128i letters = _mm_cmpeq_epi8(_mm_min_epu8(x, _mm_set1_epi8(25)), x);
  const auto not_letters = static_cast<unsigned>(~_mm_movemask_epi8(letters)) & 0xFFFFu;
  return not_letters == 0 ? 16 : static_cast<size_t>(__builtin_ctz(not_letters));
#else
  const size_t k = AsciiLettersAt(p);
  return k < 8 ? k : 8 + AsciiLettersAt(p + 8);
#endif
}

// End of the run of ASCII letters from `i`, 16 bytes at a time while 16 are left.
inline size_t AsciiLettersFrom(std::string_view s, size_t i) {
  while (i + 16 <= s.size()) {
    const size_t k = AsciiLetters16At(s.data() + i);
    i += k;
    if (k < 16) return i;
  }
  while (i + 8 <= s.size()) {
    const size_t k = AsciiLettersAt(s.data() + i);
    i += k;
    if (k < 8) break;
  }
  return i;
}

// End of the run of characters from `i` whose class intersects `mask`.
inline size_t RunOf(std::string_view s, size_t i, uint8_t mask) {
  // Runs of ASCII letters (most words) a block at a time: for such a mask the ASCII
  // characters in the run are exactly the letters (ASCII has no marks).
  if ((mask & kLetter) && !(mask & ~(kLetter | kMark))) i = AsciiLettersFrom(s, i);
  size_t len;
  while (i < s.size() && (Cls(s, i, len) & mask)) i += len;
  return i;
}

// End of the run from `i` of characters whose class does NOT intersect `mask`.
inline size_t RunNotOf(std::string_view s, size_t i, uint8_t mask) {
  size_t len;
  while (i < s.size() && !(Cls(s, i, len) & mask)) i += len;
  return i;
}

inline char Lower(char c) { return (c >= 'A' && c <= 'Z') ? static_cast<char>(c + 32) : c; }

// 's|'t|'re|'ve|'m|'ll|'d, optionally ASCII case-insensitive.
inline size_t Contraction(std::string_view s, size_t i, bool icase) {
  if (s[i] != '\'' || i + 1 >= s.size()) return kNoMatch;
  auto ch = [&](size_t k) { return icase ? Lower(s[k]) : s[k]; };
  const char a = ch(i + 1);
  if (a == 's' || a == 't' || a == 'm' || a == 'd') return i + 2;
  if (i + 2 >= s.size()) return kNoMatch;
  const char b = ch(i + 2);
  if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return i + 3;
  return kNoMatch;
}

// \s*[\r\n]+|\s+(?!\S)|\s+ (with_crlf) or \s+(?!\S)|\s+ at i, whose character is whitespace.
// Backtracking resolved by hand: \s*[\r\n]+ ends after the run's last CR/LF; \s+(?!\S) keeps
// the whole run at the end of input, else gives its last character back to the next match.
inline size_t WhitespaceTail(std::string_view s, size_t i, bool with_crlf) {
  size_t j = i, last_start = i, last_crlf = kNoMatch, len;
  while (j < s.size()) {
    const uint8_t c = Cls(s, j, len);
    if (!(c & kSpace)) break;
    if (c & kCrLf) last_crlf = j;
    last_start = j;
    j += len;
  }
  if (with_crlf && last_crlf != kNoMatch) return last_crlf + 1;
  if (j == s.size()) return j;
  if (last_start > i) return last_start;
  return j;
}

// Collects pieces in a small buffer and appends them to the vector a run at a time: a
// push_back per piece was a call the compiler kept out of line, and the call's Piece, stored
// as two 32-bit halves and read back as one 64-bit load, waited on a failed store forwarding
// each time (about 0.5 ms of a 100 k-token prompt).
class PieceWriter {
 public:
  explicit PieceWriter(std::vector<Piece>& out) : out_(out) {}
  ~PieceWriter() { Flush(); }
  PieceWriter(const PieceWriter&) = delete;
  PieceWriter& operator=(const PieceWriter&) = delete;
  void Add(size_t offset, size_t len) {
    buf_[k_++] = Piece{static_cast<uint32_t>(offset), static_cast<uint32_t>(len)};
    if (k_ == kBuf) [[unlikely]] Flush();
  }
  // The vector's size once flushed.
  size_t size() const { return out_.size() + k_; }

 private:
  static constexpr size_t kBuf = 64;
  void Flush() {
    out_.insert(out_.end(), buf_, buf_ + k_);
    k_ = 0;
  }
  std::vector<Piece>& out_;
  size_t k_ = 0;
  Piece buf_[kBuf];
};

// SplitPattern::SplitIsolatedSome's loop over `find`, a Find.
template <typename FindFn>
inline bool SplitIsolatedWith(std::string_view s, uint32_t base, SplitPattern::SplitState& state,
                              std::vector<Piece>& pieces, size_t limit, const FindFn& find) {
  PieceWriter out(pieces);
  size_t pos = state.pos, from = state.from, start, end;
  while (from < s.size() && find(s, from, start, end)) {
    if (start > pos) out.Add(base + pos, start - pos);
    if (end > start) {
      out.Add(base + start, end - start);
      pos = from = end;
    } else {
      // An empty match still cuts the gap (as Oniguruma's find_iter reports it); step over
      // one character so the scan advances.
      pos = start;
      size_t len;
      DecodeUtf8(s, start, len);
      from = start + len;
    }
    if (out.size() >= limit) {
      state.pos = pos;
      state.from = from;
      return false;
    }
  }
  if (pos < s.size()) out.Add(base + pos, s.size() - pos);
  state.pos = state.from = s.size();
  return true;
}

// Hand-written patterns: Derived::MatchAt gives the end of the match at i, or kNoMatch; Find
// tries each character in turn, as a backtracking engine's leftmost search does. Static
// dispatch (CRTP), so MatchAt inlines into the scan.
template <typename Derived>
class BuiltinPattern : public SplitPattern {
 public:
  explicit BuiltinPattern(std::string kind) : kind_(std::move(kind)) {}
  bool Find(std::string_view s, size_t from, size_t& start, size_t& end) const override {
    return FindInline(s, from, start, end);
  }
  bool SplitIsolatedSome(std::string_view s, uint32_t base, SplitState& state, std::vector<Piece>& out,
                         size_t limit) const override {
    return SplitIsolatedWith(s, base, state, out, limit,
                             [this](std::string_view t, size_t from, size_t& start, size_t& end) {
                               return FindInline(t, from, start, end);
                             });
  }
  bool FindInline(std::string_view s, size_t from, size_t& start, size_t& end) const {
    const auto& self = static_cast<const Derived&>(*this);
    size_t len;
    for (size_t i = self.Skip(s, from); i < s.size(); i = self.Skip(s, i + len)) {
      const size_t e = self.MatchAt(s, i);
      if (e != kNoMatch) {
        start = i;
        end = e;
        return true;
      }
      DecodeUtf8(s, i, len);
    }
    return false;
  }
  std::string_view Kind() const override { return kind_; }

  // The first position at or after i where a match may start; patterns that match rarely
  // (digits, CJK) skip the bytes that cannot start one without decoding them.
  size_t Skip(std::string_view, size_t i) const { return i; }

 private:
  std::string kind_;
};

class Gpt2 final : public BuiltinPattern<Gpt2> {
 public:
  Gpt2() : BuiltinPattern("builtin:gpt2") {}

  size_t MatchAt(std::string_view s, size_t i) const {
    if (size_t e = Contraction(s, i, false); e != kNoMatch) return e;
    size_t len;
    const uint8_t c0 = Cls(s, i, len);
    // ' ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+': a space is in none of the three classes, so
    // backtracking over the optional space never helps.
    size_t j = i;
    uint8_t c = c0;
    if (s[i] == ' ' && i + 1 < s.size()) {
      j = i + 1;
      c = Cls(s, j, len);
    }
    if (c & kLetter) return RunOf(s, j, kLetter);
    if (c & kNumber) return RunOf(s, j, kNumber);
    if (!(c & (kSpace | kLetter | kNumber))) return RunNotOf(s, j, kSpace | kLetter | kNumber);
    if (c0 & kSpace) return WhitespaceTail(s, i, false);
    return kNoMatch;
  }
};

// cl100k_base, Llama 3 (max_digits 3) and Qwen 2/3 (max_digits 1).
class Cl100k final : public BuiltinPattern<Cl100k> {
 public:
  explicit Cl100k(int max_digits)
      : BuiltinPattern(max_digits == 1 ? "builtin:qwen2" : "builtin:cl100k"), max_digits_(max_digits) {}

  size_t MatchAt(std::string_view s, size_t i) const {
    if (size_t e = Contraction(s, i, true); e != kNoMatch) return e;
    size_t len0, len;
    const uint8_t c0 = Cls(s, i, len0);
    // [^\r\n\p{L}\p{N}]?\p{L}+
    if (!(c0 & (kCrLf | kLetter | kNumber)) && i + len0 < s.size() &&
        (Cls(s, i + len0, len) & kLetter)) {
      return RunOf(s, i + len0, kLetter);
    }
    if (c0 & kLetter) return RunOf(s, i, kLetter);
    // \p{N}{1,max}
    if (c0 & kNumber) {
      size_t j = i + len0;
      for (int k = 1; k < max_digits_ && j < s.size() && (Cls(s, j, len) & kNumber); ++k) j += len;
      return j;
    }
    // ' ?[^\s\p{L}\p{N}]+[\r\n]*'
    const size_t j = s[i] == ' ' ? i + 1 : i;
    const size_t k = RunNotOf(s, j, kSpace | kLetter | kNumber);
    if (k > j) {
      size_t e = k;
      while (e < s.size() && (s[e] == '\r' || s[e] == '\n')) ++e;
      return e;
    }
    if (c0 & kSpace) return WhitespaceTail(s, i, true);
    return kNoMatch;
  }

 private:
  int max_digits_;
};

// \p{N}{1,3}
class Digits1to3 final : public BuiltinPattern<Digits1to3> {
 public:
  Digits1to3() : BuiltinPattern("builtin:digits1to3") {}

  // Only ASCII digits or non-ASCII characters can be \p{N}.
  size_t Skip(std::string_view s, size_t i) const { return SkipToByteIn(s, i, '0', '9', true); }
  size_t MatchAt(std::string_view s, size_t i) const {
    size_t len;
    if (!(Cls(s, i, len) & kNumber)) return kNoMatch;
    size_t j = i + len;
    for (int k = 1; k < 3 && j < s.size() && (Cls(s, j, len) & kNumber); ++k) j += len;
    return j;
  }
};

// DeepSeek-V3's [\u4e00-\u9fa5\u3040-\u309f\u30a0-\u30ff]+ (CJK ideographs, kana).
class DeepSeekCjk final : public BuiltinPattern<DeepSeekCjk> {
 public:
  DeepSeekCjk() : BuiltinPattern("builtin:deepseek_cjk") {}

  // U+3040-U+9FA5 are three-byte sequences led by 0xE3-0xE9; any other byte cannot start one.
  size_t Skip(std::string_view s, size_t i) const { return SkipToByteIn(s, i, 0xE3, 0xE9, false); }
  static bool In(uint32_t cp) {
    return (cp >= 0x4E00 && cp <= 0x9FA5) || (cp >= 0x3040 && cp <= 0x309F) || (cp >= 0x30A0 && cp <= 0x30FF);
  }
  size_t MatchAt(std::string_view s, size_t i) const {
    size_t j = i, len;
    while (j < s.size() && In(DecodeUtf8(s, j, len))) j += len;
    return j > i ? j : kNoMatch;
  }
};

inline bool IsAsciiPunct(char c) {
  return (c >= '!' && c <= '/') || (c >= ':' && c <= '@') || (c >= '[' && c <= '`') || (c >= '{' && c <= '~');
}
inline bool IsAsciiAlpha(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }

// DeepSeek-V3's word pattern (kDeepSeekWords).
class DeepSeekWords final : public BuiltinPattern<DeepSeekWords> {
 public:
  DeepSeekWords() : BuiltinPattern("builtin:deepseek_words") {}

  size_t MatchAt(std::string_view s, size_t i) const {
    // [ASCII punctuation][A-Za-z]+
    if (IsAsciiPunct(s[i]) && i + 1 < s.size() && IsAsciiAlpha(s[i + 1])) {
      size_t j = AsciiLettersFrom(s, i + 2);
      while (j < s.size() && IsAsciiAlpha(s[j])) ++j;
      return j;
    }
    size_t len0, len;
    const uint8_t c0 = Cls(s, i, len0);
    // [^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+
    if (!(c0 & (kCrLf | kLetter | kPunct | kSymbol)) && i + len0 < s.size() &&
        (Cls(s, i + len0, len) & (kLetter | kMark))) {
      return RunOf(s, i + len0, kLetter | kMark);
    }
    if (c0 & (kLetter | kMark)) return RunOf(s, i, kLetter | kMark);
    // ' ?[\p{P}\p{S}]+[\r\n]*'
    const size_t j = s[i] == ' ' ? i + 1 : i;
    const size_t k = RunOf(s, j, kPunct | kSymbol);
    if (k > j) {
      size_t e = k;
      while (e < s.size() && (s[e] == '\r' || s[e] == '\n')) ++e;
      return e;
    }
    if (c0 & kSpace) return WhitespaceTail(s, i, true);
    return kNoMatch;
  }
};

class Literal final : public SplitPattern {
 public:
  explicit Literal(std::string text) : text_(std::move(text)) {}
  bool Find(std::string_view s, size_t from, size_t& start, size_t& end) const override {
    if (text_.empty()) return false;
    const size_t p = s.find(text_, from);
    if (p == std::string_view::npos) return false;
    start = p;
    end = p + text_.size();
    return true;
  }
  std::string_view Kind() const override { return "literal"; }

 private:
  std::string text_;
};

class Pcre2 final : public SplitPattern {
 public:
  explicit Pcre2(pcre2_code* code) : code_(code) {}
  ~Pcre2() override { pcre2_code_free(code_); }
  Pcre2(const Pcre2&) = delete;
  Pcre2& operator=(const Pcre2&) = delete;

  bool Find(std::string_view s, size_t from, size_t& start, size_t& end) const override {
    // One match block per thread, sized for the whole match only: enough for Find, and no
    // allocation per call.
    struct MatchData {
      pcre2_match_data* md = pcre2_match_data_create(1, nullptr);
      ~MatchData() { pcre2_match_data_free(md); }
    };
    thread_local MatchData data;
    const auto* subject = reinterpret_cast<PCRE2_SPTR>(s.data());
    int rc = pcre2_match(code_, subject, s.size(), from, 0, data.md, nullptr);
    if (rc == PCRE2_ERROR_JIT_STACKLIMIT) {
      // Deep backtracking on a long piece: the interpreter has a heap-based stack.
      rc = pcre2_match(code_, subject, s.size(), from, PCRE2_NO_JIT, data.md, nullptr);
    }
    if (rc < 0) return false;  // no match, or a resource limit: the rest stays one piece
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(data.md);
    start = ov[0];
    end = ov[1];
    return true;
  }
  std::string_view Kind() const override { return "pcre2"; }

 private:
  pcre2_code* code_;
};

// The class bit of a general-category property name (PCRE2 10.42 knows no long names), 0 for
// any other.
uint8_t PropertyClass(std::string_view name) {
  if (name == "L") return kLetter;
  if (name == "M") return kMark;
  if (name == "N") return kNumber;
  if (name == "P") return kPunct;
  if (name == "S") return kSymbol;
  return 0;
}

// The supplement's ranges of one class, as the inside of a character class.
std::string SupplementItems(uint8_t cls) {
  std::string out;
  for (const CodePointRange& r : SupplementaryRanges()) {
    if (r.cls != cls) continue;
    fmt::format_to(std::back_inserter(out), "\\x{{{:X}}}", r.first);
    if (r.last != r.first) fmt::format_to(std::back_inserter(out), "-\\x{{{:X}}}", r.last);
  }
  return out;
}

// `pattern` with \p{L}, \p{N}, \p{M}, \p{P} and \p{S} (and \pL, \p{^L}...) widened by the
// supplement's code points of that class, since PCRE2's own tables (Unicode 14.0 in 10.42) lack
// what Unicode 15.0 to 16.0 added: inside a character class the ranges join it, outside the
// property becomes a class with them. A negated property outside a class becomes a negated
// class; one inside a class, and subcategories (\p{Lu}), are left as PCRE2 reads them.
std::string WithSupplementaryClasses(std::string_view pattern) {
  std::string out;
  out.reserve(pattern.size());
  bool in_class = false;
  size_t i = 0;
  while (i < pattern.size()) {
    const char ch = pattern[i];
    if (ch == '\\' && i + 1 < pattern.size()) {
      const char e = pattern[i + 1];
      if (e == 'Q') {  // \Q...\E: literal text
        const size_t end = pattern.find("\\E", i + 2);
        const size_t stop = end == std::string_view::npos ? pattern.size() : end + 2;
        out.append(pattern.substr(i, stop - i));
        i = stop;
        continue;
      }
      if (e == 'p' || e == 'P') {
        size_t end = i + 3;  // \pL
        std::string_view name = pattern.substr(i + 2, 1);
        if (name == "{") {
          const size_t close = pattern.find('}', i + 3);
          if (close == std::string_view::npos) break;  // PCRE2 reports the error
          name = pattern.substr(i + 3, close - i - 3);
          end = close + 1;
        }
        bool negated = e == 'P';
        if (!name.empty() && name[0] == '^') {
          negated = !negated;
          name.remove_prefix(1);
        }
        const std::string_view original = pattern.substr(i, end - i);
        const uint8_t cls = PropertyClass(name);
        if (cls == 0 || (negated && in_class)) {
          out.append(original);
        } else {
          const std::string property = Cat("\\p{", name, "}");
          if (in_class) out += Cat(property, SupplementItems(cls));
          else out += Cat(negated ? "[^" : "[", property, SupplementItems(cls), "]");
        }
        i = end;
        continue;
      }
      out.append(pattern.substr(i, 2));
      i += 2;
      continue;
    }
    if (!in_class && ch == '[') {
      in_class = true;
      size_t j = i + 1;
      if (j < pattern.size() && pattern[j] == '^') ++j;
      if (j < pattern.size() && pattern[j] == ']') ++j;  // a leading ']' is literal
      out.append(pattern.substr(i, j - i));
      i = j;
      continue;
    }
    if (in_class && ch == '[' && i + 1 < pattern.size() && pattern[i + 1] == ':') {
      const size_t close = pattern.find(":]", i + 2);  // [:alpha:]
      const size_t stop = close == std::string_view::npos ? i + 1 : close + 2;
      out.append(pattern.substr(i, stop - i));
      i = stop;
      continue;
    }
    if (in_class && ch == ']') in_class = false;
    out.push_back(ch);
    ++i;
  }
  if (i < pattern.size()) out.append(pattern.substr(i));
  return out;
}

absl::StatusOr<std::unique_ptr<SplitPattern>> CompilePcre2(std::string_view original, std::string_view field) {
  const std::string pattern = WithSupplementaryClasses(original);
  int err = 0;
  PCRE2_SIZE offset = 0;
  pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                                   PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF, &err, &offset, nullptr);
  if (code == nullptr && pattern != original) {
    // Report the error at its offset in the pattern as written.
    code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(original.data()), original.size(),
                         PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF, &err, &offset, nullptr);
    if (code != nullptr) {  // not expected: the widening keeps a valid pattern valid
      pcre2_code_free(code);
      return absl::InternalError(Cat(field, ": regex does not compile once widened to Unicode 16.0"));
    }
  }
  if (code == nullptr) {
    PCRE2_UCHAR msg[256];
    pcre2_get_error_message(err, msg, sizeof msg);
    return absl::InvalidArgumentError(Cat(field, ": regex does not compile at offset ", offset, ": ",
                                                   reinterpret_cast<const char*>(msg)));
  }
  pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);  // best effort: without JIT it interprets
  return std::unique_ptr<SplitPattern>(new Pcre2(code));
}

}  // namespace

void SplitPattern::SplitIsolated(std::string_view s, uint32_t base, std::vector<Piece>& out) const {
  SplitState state;
  SplitIsolatedSome(s, base, state, out, SIZE_MAX);
}

bool SplitPattern::SplitIsolatedSome(std::string_view s, uint32_t base, SplitState& state, std::vector<Piece>& out,
                                     size_t limit) const {
  return SplitIsolatedWith(s, base, state, out, limit,
                           [this](std::string_view t, size_t from, size_t& start, size_t& end) {
                             return Find(t, from, start, end);
                           });
}

absl::StatusOr<std::unique_ptr<SplitPattern>> CompileRegex(std::string_view pattern, std::string_view field,
                                                           bool force_pcre2) {
  if (!force_pcre2) {
    if (pattern == kGpt2) return Gpt2Pattern();
    if (pattern == kQwen2) return std::unique_ptr<SplitPattern>(new Cl100k(1));
    if (pattern == kCl100k) return std::unique_ptr<SplitPattern>(new Cl100k(3));
    if (pattern == kDigits1to3) return std::unique_ptr<SplitPattern>(new Digits1to3());
    if (pattern == kDeepSeekCjk) return std::unique_ptr<SplitPattern>(new DeepSeekCjk());
    if (pattern == kDeepSeekWords) return std::unique_ptr<SplitPattern>(new DeepSeekWords());
  }
  return CompilePcre2(pattern, field);
}

std::unique_ptr<SplitPattern> LiteralPattern(std::string literal) {
  return std::make_unique<Literal>(std::move(literal));
}

std::unique_ptr<SplitPattern> Gpt2Pattern() { return std::make_unique<Gpt2>(); }

}  // namespace myriad::tokenizer
