// Python's str methods on UTF-8 text: what "abc".startswith(...) and the string filters do.
#include "tokenizer/jinja_strings.h"

#include <algorithm>
#include <cctype>

namespace myriad::tokenizer::jinja {
namespace {

struct CodePoint {
  uint32_t cp;
  std::string_view bytes;
};

// The code point of one UTF-8 sequence (as cut by Utf8Split).
uint32_t DecodeOne(std::string_view c) {
  const auto b0 = static_cast<unsigned char>(c[0]);
  if (c.size() == 1) return b0;
  uint32_t cp = b0 & (0x7F >> c.size());
  for (size_t k = 1; k < c.size(); ++k) cp = (cp << 6) | (static_cast<unsigned char>(c[k]) & 0x3F);
  return cp;
}

std::vector<CodePoint> CodePoints(std::string_view s) {
  std::vector<CodePoint> out;
  out.reserve(s.size());
  for (std::string_view c : Utf8Split(s)) out.push_back({DecodeOne(c), c});
  return out;
}

// Python's str.isspace() for one code point.
bool IsPySpace(uint32_t cp) {
  return (cp >= 0x09 && cp <= 0x0D) || (cp >= 0x1C && cp <= 0x20) || cp == 0x85 || cp == 0xA0 ||
         cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 ||
         cp == 0x202F || cp == 0x205F || cp == 0x3000;
}

// Simple case mapping for ASCII, Latin-1, Latin Extended-A, Greek and Cyrillic: the scripts
// that show up in chat templates' own text. Python maps all of Unicode (and a few letters to
// two, like "ß".upper() == "SS"); outside these ranges letters are left as they are.
uint32_t UpperCp(uint32_t c) {
  if (c >= 'a' && c <= 'z') return c - 32;
  if (c < 0x80) return c;
  if ((c >= 0xE0 && c <= 0xFE && c != 0xF7)) return c - 32;
  if (c == 0xFF) return 0x178;
  if (c >= 0x100 && c <= 0x17F) {
    if ((c >= 0x139 && c <= 0x148) || (c >= 0x179 && c <= 0x17E)) return (c % 2 == 0) ? c - 1 : c;
    if (c == 0x131) return 'I';
    if (c == 0x17F) return 'S';
    if (c == 0x130 || c == 0x138 || c == 0x149 || c == 0x178) return c;
    return (c % 2 == 1) ? c - 1 : c;
  }
  if (c >= 0x3B1 && c <= 0x3C9 && c != 0x3C2) return c - 32;
  if (c == 0x3C2) return 0x3A3;
  if (c >= 0x430 && c <= 0x44F) return c - 32;
  if (c >= 0x450 && c <= 0x45F) return c - 80;
  return c;
}

uint32_t LowerCp(uint32_t c) {
  if (c >= 'A' && c <= 'Z') return c + 32;
  if (c < 0x80) return c;
  if (c >= 0xC0 && c <= 0xDE && c != 0xD7) return c + 32;
  if (c == 0x178) return 0xFF;
  if (c >= 0x100 && c <= 0x17F) {
    if ((c >= 0x139 && c <= 0x148) || (c >= 0x179 && c <= 0x17E)) return (c % 2 == 1) ? c + 1 : c;
    if (c == 0x130 || c == 0x131 || c == 0x138 || c == 0x149 || c == 0x17F) return c;
    return (c % 2 == 0) ? c + 1 : c;
  }
  if (c >= 0x391 && c <= 0x3A9 && c != 0x3A2) return c + 32;
  if (c >= 0x410 && c <= 0x42F) return c + 32;
  if (c >= 0x400 && c <= 0x40F) return c + 80;
  return c;
}

std::string MapCase(const std::string& s, uint32_t (*f)(uint32_t)) {
  std::string out;
  out.reserve(s.size());
  if (std::all_of(s.begin(), s.end(), [](char c) { return static_cast<unsigned char>(c) < 0x80; })) {
    for (char c : s) out += static_cast<char>(f(static_cast<unsigned char>(c)));
    return out;
  }
  for (const CodePoint& c : CodePoints(s)) {
    const uint32_t mapped = f(c.cp);
    if (mapped == c.cp) {
      out += c.bytes;
    } else {
      AppendUtf8(out, mapped);
    }
  }
  return out;
}
std::string PyLower(const std::string& s) { return MapCase(s, LowerCp); }
std::string PyUpper(const std::string& s) {
  std::string out = MapCase(s, UpperCp);
  // The one common letter that grows: Python upper-cases "ß" to "SS".
  for (size_t pos = out.find("\xC3\x9F"); pos != std::string::npos; pos = out.find("\xC3\x9F", pos + 2)) {
    out.replace(pos, 2, "SS");
  }
  return out;
}

std::string Capitalize(const std::string& s) {
  std::string out = Lower(s);
  if (!out.empty() && static_cast<unsigned char>(out[0]) < 0x80) out[0] = static_cast<char>(std::toupper(out[0]));
  return out;
}

std::string Title(const std::string& s) {
  std::string out = s;
  bool previous_cased = false;
  for (char& c : out) {
    const bool alpha = std::isalpha(static_cast<unsigned char>(c)) != 0;
    if (alpha) c = static_cast<char>(previous_cased ? std::tolower(c) : std::toupper(c));
    previous_cased = alpha;
  }
  return out;
}

std::string Replace(Interpreter& in, const std::string& s, const std::string& from, const std::string& to,
                    int64_t count) {
  std::string out;
  if (from.empty()) {
    // Python inserts `to` around every character.
    int64_t done = 0;
    for (std::string_view c : Utf8Split(s)) {
      if (count < 0 || done < count) {
        out += to;
        ++done;
      }
      out += c;
    }
    if (count < 0 || done < count) out += to;
    in.CheckSize(out.size());
    return out;
  }
  size_t pos = 0;
  int64_t done = 0;
  while (count < 0 || done < count) {
    const size_t hit = s.find(from, pos);
    if (hit == std::string::npos) break;
    out.append(s, pos, hit - pos);
    out += to;
    in.CheckSize(out.size());
    pos = hit + from.size();
    ++done;
  }
  out.append(s, pos);
  in.CheckSize(out.size());
  return out;
}

List Split(const std::string& s, const Value* sep, int64_t maxsplit) {
  List out;
  if (sep == nullptr || sep->is_none()) {
    const auto cps = CodePoints(s);
    size_t i = 0;
    while (true) {
      while (i < cps.size() && IsPySpace(cps[i].cp)) ++i;
      if (i == cps.size()) break;
      if (maxsplit >= 0 && static_cast<int64_t>(out.size()) == maxsplit) {
        const size_t offset = static_cast<size_t>(cps[i].bytes.data() - s.data());
        std::string rest = s.substr(offset);
        out.emplace_back(std::move(rest));
        break;
      }
      std::string word;
      while (i < cps.size() && !IsPySpace(cps[i].cp)) word += cps[i++].bytes;
      out.emplace_back(std::move(word));
    }
    return out;
  }
  if (!sep->is_string()) Fail("split() separator must be str or None, not " + sep->TypeName());
  const std::string& d = sep->as_string();
  if (d.empty()) Fail("split(): empty separator");
  size_t pos = 0;
  while (maxsplit < 0 || static_cast<int64_t>(out.size()) < maxsplit) {
    const size_t hit = s.find(d, pos);
    if (hit == std::string::npos) break;
    out.emplace_back(s.substr(pos, hit - pos));
    pos = hit + d.size();
  }
  out.emplace_back(s.substr(pos));
  return out;
}

List RSplit(const std::string& s, const Value* sep, int64_t maxsplit) {
  if (maxsplit < 0) return Split(s, sep, maxsplit);
  if (sep == nullptr || sep->is_none()) Fail("rsplit() with maxsplit needs a separator here");
  if (!sep->is_string() || sep->as_string().empty()) Fail("rsplit(): separator must be a non-empty str");
  const std::string& d = sep->as_string();
  List reversed;
  size_t end = s.size();
  while (static_cast<int64_t>(reversed.size()) < maxsplit) {
    if (end < d.size()) break;
    const size_t hit = s.rfind(d, end - d.size());
    if (hit == std::string::npos) break;
    reversed.emplace_back(s.substr(hit + d.size(), end - hit - d.size()));
    end = hit;
  }
  reversed.emplace_back(s.substr(0, end));
  return List(reversed.rbegin(), reversed.rend());
}

int64_t CodePointIndex(const std::string& s, size_t byte_offset) {
  return static_cast<int64_t>(Utf8Length(std::string_view(s).substr(0, byte_offset)));
}

bool MatchesAffix(const std::string& s, const Value& affix, bool prefix, std::string_view fn) {
  auto one = [&](const Value& a) {
    if (!a.is_string()) Fail(std::string(fn) + "() argument must be str or a tuple of str, not " + a.TypeName());
    const std::string& x = a.as_string();
    if (x.size() > s.size()) return false;
    return prefix ? s.compare(0, x.size(), x) == 0 : s.compare(s.size() - x.size(), x.size(), x) == 0;
  };
  if (affix.is_list()) {
    return std::any_of(affix.as_list().begin(), affix.as_list().end(), one);
  }
  return one(affix);
}

Value StringMethod(Interpreter& in, const std::string& s, std::string_view m, const Args& args) {
  if (m == "startswith" || m == "endswith") {
    const Value* affix = args.Get(0, "prefix");
    if (affix == nullptr) Fail(std::string(m) + "() takes at least 1 argument");
    if (args.size() > 1) Fail(std::string(m) + "() with start/end positions is not supported");
    return Value(MatchesAffix(s, *affix, m == "startswith", m));
  }
  if (m == "strip" || m == "lstrip" || m == "rstrip") {
    const Value* chars = args.Get(0, "chars");
    return Value(PyStrip(s, chars, m != "rstrip", m != "lstrip"));
  }
  if (m == "split") return Value(Split(s, args.Get(0, "sep"), args.Int(1, "maxsplit", -1)));
  if (m == "rsplit") return Value(RSplit(s, args.Get(0, "sep"), args.Int(1, "maxsplit", -1)));
  if (m == "splitlines") {
    List out;
    std::string line;
    for (size_t i = 0; i < s.size(); ++i) {
      if (s[i] == '\n' || s[i] == '\r') {
        out.emplace_back(line);
        line.clear();
        if (s[i] == '\r' && i + 1 < s.size() && s[i + 1] == '\n') ++i;
      } else {
        line += s[i];
      }
    }
    if (!line.empty()) out.emplace_back(line);
    return Value(std::move(out));
  }
  if (m == "replace") {
    return Value(Replace(in, s, args.String(0, "old", m), args.String(1, "new", m),
                         args.Int(2, "count", -1)));
  }
  if (m == "upper") return Value(Upper(s));
  if (m == "lower") return Value(Lower(s));
  if (m == "title") return Value(Title(s));
  if (m == "capitalize") return Value(Capitalize(s));
  if (m == "find" || m == "rfind" || m == "index" || m == "rindex") {
    const std::string& sub = args.String(0, "sub", m);
    const size_t hit = (m == "find" || m == "index") ? s.find(sub) : s.rfind(sub);
    if (hit == std::string::npos) {
      if (m == "index" || m == "rindex") Fail("substring not found");
      return Value(int64_t{-1});
    }
    return Value(CodePointIndex(s, hit));
  }
  if (m == "count") {
    const std::string& sub = args.String(0, "sub", m);
    if (sub.empty()) return Value(static_cast<int64_t>(Utf8Length(s) + 1));
    int64_t n = 0;
    for (size_t pos = s.find(sub); pos != std::string::npos; pos = s.find(sub, pos + sub.size())) ++n;
    return Value(n);
  }
  if (m == "join") {
    const Value* items = args.Get(0, "iterable");
    if (items == nullptr) Fail("join() takes exactly one argument");
    std::string out;
    bool first = true;
    for (const Value& item : Iterate(*items)) {
      if (!item.is_string()) Fail("sequence item: expected str instance, " + item.TypeName() + " found");
      if (!first) out += s;
      first = false;
      out += item.as_string();
      in.CheckSize(out.size());
    }
    return Value(std::move(out));
  }
  auto all = [&](auto pred) {
    if (s.empty()) return Value(false);
    return Value(std::all_of(s.begin(), s.end(), [&](char c) { return pred(static_cast<unsigned char>(c)) != 0; }));
  };
  if (m == "isdigit") return all([](int c) { return std::isdigit(c); });
  if (m == "isalpha") return all([](int c) { return std::isalpha(c); });
  if (m == "isalnum") return all([](int c) { return std::isalnum(c); });
  if (m == "isspace") return all([](int c) { return std::isspace(c); });
  if (m == "islower") return Value(Lower(s) == s && Upper(s) != s);
  if (m == "isupper") return Value(Upper(s) == s && Lower(s) != s);
  Fail("str." + std::string(m) + "() is not supported");
}

constexpr std::string_view kStringMethods[] = {
    "startswith", "endswith", "strip", "lstrip", "rstrip", "split", "rsplit", "splitlines",
    "replace", "upper", "lower", "title", "capitalize", "find", "rfind", "index", "rindex",
    "count", "join", "isdigit", "isalpha", "isalnum", "isspace", "islower", "isupper", "format"};

}  // namespace

std::string PyStrip(std::string_view s, const Value* chars, bool left, bool right) {
  std::vector<uint32_t> set;
  const bool whitespace = chars == nullptr || chars->is_none();
  if (!whitespace) {
    if (!chars->is_string()) Fail("strip arg must be None or str, not " + chars->TypeName());
    for (const CodePoint& c : CodePoints(chars->as_string())) set.push_back(c.cp);
  }
  auto strip = [&](uint32_t cp) {
    return whitespace ? IsPySpace(cp) : std::find(set.begin(), set.end(), cp) != set.end();
  };
  // Decodes in place from both ends: prompts are long and only their edges are looked at.
  size_t begin = 0;
  size_t end = s.size();
  if (left) {
    while (begin < end) {
      size_t next = begin + 1;
      while (next < end && (static_cast<unsigned char>(s[next]) & 0xC0) == 0x80) ++next;
      if (!strip(DecodeOne(s.substr(begin, next - begin)))) break;
      begin = next;
    }
  }
  if (right) {
    while (end > begin) {
      size_t start = end - 1;
      while (start > begin && (static_cast<unsigned char>(s[start]) & 0xC0) == 0x80) --start;
      if (!strip(DecodeOne(s.substr(start, end - start)))) break;
      end = start;
    }
  }
  return std::string(s.substr(begin, end - begin));
}


std::string Lower(const std::string& s) { return PyLower(s); }
std::string Upper(const std::string& s) { return PyUpper(s); }
std::string CapitalizeStr(const std::string& s) { return Capitalize(s); }
std::string TitleStr(const std::string& s) { return Title(s); }
std::string ReplaceStr(Interpreter& in, const std::string& s, const std::string& from, const std::string& to,
                       int64_t count) {
  return Replace(in, s, from, to, count);
}

bool IsStringMethod(std::string_view method) {
  return std::find(std::begin(kStringMethods), std::end(kStringMethods), method) != std::end(kStringMethods);
}

Value CallStringMethod(Interpreter& in, const std::string& s, std::string_view method, const Args& args) {
  return StringMethod(in, s, method, args);
}

}  // namespace myriad::tokenizer::jinja
