#include "tokenizer/jinja_builtins.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <ctime>

namespace myriad::tokenizer::jinja {
namespace {

struct CodePoint {
  uint32_t cp;
  std::string_view bytes;
};

std::vector<CodePoint> CodePoints(std::string_view s) {
  std::vector<CodePoint> out;
  out.reserve(s.size());
  for (std::string_view c : Utf8Split(s)) {
    const auto b0 = static_cast<unsigned char>(c[0]);
    uint32_t cp = b0;
    if (c.size() > 1) {
      cp = b0 & (0x7F >> c.size());
      for (size_t k = 1; k < c.size(); ++k) cp = (cp << 6) | (static_cast<unsigned char>(c[k]) & 0x3F);
    }
    out.push_back({cp, c});
  }
  return out;
}

// Python's str.isspace() for one code point.
bool IsPySpace(uint32_t cp) {
  return (cp >= 0x09 && cp <= 0x0D) || (cp >= 0x1C && cp <= 0x20) || cp == 0x85 || cp == 0xA0 ||
         cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 ||
         cp == 0x202F || cp == 0x205F || cp == 0x3000;
}

const std::string& ArgString(const Args& args, size_t index, std::string_view name, std::string_view fn) {
  const Value* v = args.Get(index, name);
  if (v == nullptr) Fail(std::string(fn) + "() missing argument '" + std::string(name) + "'");
  if (!v->is_string()) {
    Fail(std::string(fn) + "() argument '" + std::string(name) + "' must be str, not " + v->TypeName());
  }
  return v->as_string();
}

int64_t ArgInt(const Args& args, size_t index, std::string_view name, int64_t fallback) {
  const Value* v = args.Get(index, name);
  if (v == nullptr || v->is_none()) return fallback;
  if (!v->is_int() && !v->is_bool()) Fail("argument '" + std::string(name) + "' must be an integer");
  return v->as_int();
}

bool ArgBool(const Args& args, size_t index, std::string_view name, bool fallback) {
  const Value* v = args.Get(index, name);
  return v == nullptr ? fallback : v->Truthy();
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
std::string Lower(const std::string& s) { return MapCase(s, LowerCp); }
std::string Upper(const std::string& s) {
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
  if (m == "split") return Value(Split(s, args.Get(0, "sep"), ArgInt(args, 1, "maxsplit", -1)));
  if (m == "rsplit") return Value(RSplit(s, args.Get(0, "sep"), ArgInt(args, 1, "maxsplit", -1)));
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
    return Value(Replace(in, s, ArgString(args, 0, "old", m), ArgString(args, 1, "new", m),
                         ArgInt(args, 2, "count", -1)));
  }
  if (m == "upper") return Value(Upper(s));
  if (m == "lower") return Value(Lower(s));
  if (m == "title") return Value(Title(s));
  if (m == "capitalize") return Value(Capitalize(s));
  if (m == "find" || m == "rfind" || m == "index" || m == "rindex") {
    const std::string& sub = ArgString(args, 0, "sub", m);
    const size_t hit = (m == "find" || m == "index") ? s.find(sub) : s.rfind(sub);
    if (hit == std::string::npos) {
      if (m == "index" || m == "rindex") Fail("substring not found");
      return Value(int64_t{-1});
    }
    return Value(CodePointIndex(s, hit));
  }
  if (m == "count") {
    const std::string& sub = ArgString(args, 0, "sub", m);
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
constexpr std::string_view kDictMethods[] = {"items", "keys", "values", "get"};

List DictItems(const Value& v) {
  List out;
  if (v.is_undefined()) return out;
  if (!v.is_dict()) Fail("items() needs a mapping, not " + v.TypeName());
  out.reserve(v.as_dict().size());
  for (const auto& [key, value] : v.as_dict()) out.push_back(Value::Tuple(List{Value(key), value}));
  return out;
}

// The value at a dotted attribute path ("function.name", "0"), as Jinja2's attribute filters
// look it up: items first.
Value AttributePath(const Value& item, const std::string& path) {
  Value v = item;
  size_t start = 0;
  while (true) {
    const size_t dot = path.find('.', start);
    const std::string part = path.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    const bool numeric = !part.empty() && std::all_of(part.begin(), part.end(), ::isdigit);
    v = numeric ? GetItem(v, Value(static_cast<int64_t>(std::stoll(part)))) : GetItem(v, Value(part));
    if (dot == std::string::npos) return v;
    if (v.is_undefined()) return v;
    start = dot + 1;
  }
}

// select/reject/selectattr/rejectattr: args start with the test name and its arguments.
Value SelectFilter(Interpreter& in, const Value& operand, const Args& args, bool by_attr, bool keep) {
  size_t next = 0;
  std::string attr;
  if (by_attr) {
    const Value* a = args.Get(0, "attribute");
    if (a == nullptr || !a->is_string()) Fail("selectattr/rejectattr need an attribute name");
    attr = a->as_string();
    next = 1;
  }
  std::string test;
  Args test_args;
  if (next < args.positional.size()) {
    if (!args.positional[next].is_string()) Fail("the test name must be a string");
    test = args.positional[next].as_string();
    test_args.positional.assign(args.positional.begin() + static_cast<std::ptrdiff_t>(next) + 1,
                                args.positional.end());
  }
  List out;
  for (const Value& item : Iterate(operand)) {
    in.Step();
    const Value subject = by_attr ? AttributePath(item, attr) : item;
    const bool pass = test.empty() ? subject.Truthy() : in.Test(test, subject, test_args);
    if (pass == keep) out.push_back(item);
  }
  return Value(std::move(out));
}

Value MapFilter(Interpreter& in, const Value& operand, const Args& args) {
  List out;
  if (const Value* attr = args.Get(99, "attribute")) {
    if (!attr->is_string()) Fail("map(attribute=...) needs a string");
    const Value* fallback = args.Get(99, "default");
    for (const Value& item : Iterate(operand)) {
      in.Step();
      Value v = AttributePath(item, attr->as_string());
      if (v.is_undefined() && fallback != nullptr) v = *fallback;
      out.push_back(std::move(v));
    }
    return Value(std::move(out));
  }
  if (args.positional.empty() || !args.positional[0].is_string()) Fail("map() needs a filter name or attribute=");
  Args filter_args;
  filter_args.positional.assign(args.positional.begin() + 1, args.positional.end());
  filter_args.keyword = args.keyword;
  for (const Value& item : Iterate(operand)) {
    in.Step();
    out.push_back(in.Filter(args.positional[0].as_string(), item, filter_args));
  }
  return Value(std::move(out));
}

Value ToJson(const Value& operand, const Args& args) {
  // transformers' signature: tojson(x, ensure_ascii=False, indent=None, separators=None,
  // sort_keys=False).
  JsonDumpOptions o;
  o.ensure_ascii = ArgBool(args, 0, "ensure_ascii", false);
  if (const Value* indent = args.Get(1, "indent"); indent != nullptr && !indent->is_none()) {
    if (indent->is_string()) {
      o.indent = indent->as_string();
    } else if (indent->is_int()) {
      o.indent = std::string(static_cast<size_t>(std::clamp<int64_t>(indent->as_int(), 0, 64)), ' ');
    } else {
      Fail("tojson: indent must be an integer or a string");
    }
  }
  if (const Value* sep = args.Get(2, "separators"); sep != nullptr && !sep->is_none()) {
    if (!sep->is_list() || sep->as_list().size() != 2 || !sep->as_list()[0].is_string() ||
        !sep->as_list()[1].is_string()) {
      Fail("tojson: separators must be a pair of strings");
    }
    o.item_separator = sep->as_list()[0].as_string();
    o.key_separator = sep->as_list()[1].as_string();
  }
  o.sort_keys = ArgBool(args, 3, "sort_keys", false);
  return Value(DumpJson(operand, o));
}

Value Indent(const Value& operand, const Args& args) {
  std::string indention;
  const Value* width = args.Get(0, "width");
  if (width != nullptr && width->is_string()) {
    indention = width->as_string();
  } else {
    indention.assign(static_cast<size_t>(std::clamp<int64_t>(ArgInt(args, 0, "width", 4), 0, 256)), ' ');
  }
  const bool first = ArgBool(args, 1, "first", false);
  const bool blank = ArgBool(args, 2, "blank", false);
  // Jinja2 appends "\n" and uses str.splitlines(), so a trailing newline adds no empty line.
  std::vector<std::string> parts;
  {
    const std::string s = operand.Str() + "\n";
    std::string line;
    for (size_t i = 0; i < s.size(); ++i) {
      if (s[i] == '\n' || s[i] == '\r') {
        parts.push_back(line);
        line.clear();
        if (s[i] == '\r' && i + 1 < s.size() && s[i + 1] == '\n') ++i;
      } else {
        line += s[i];
      }
    }
  }
  std::string rv;
  for (size_t i = 0; i < parts.size(); ++i) {
    if (i > 0) rv += "\n";
    if (i > 0 && (blank || !parts[i].empty())) rv += indention;
    rv += parts[i];
  }
  if (first) rv = indention + rv;
  return Value(std::move(rv));
}

int64_t Length(const Value& v) {
  switch (v.type()) {
    case Value::Type::kString: return static_cast<int64_t>(Utf8Length(v.as_string()));
    case Value::Type::kList: return static_cast<int64_t>(v.as_list().size());
    case Value::Type::kDict: return static_cast<int64_t>(v.as_dict().size());
    case Value::Type::kUndefined: return 0;
    default: Fail("object of type '" + v.TypeName() + "' has no len()");
  }
}

Value ToInt(const Value& v, const Args& args) {
  const Value* fallback = args.Get(0, "default");
  const Value def = fallback != nullptr ? *fallback : Value(int64_t{0});
  if (v.is_int() || v.is_bool()) return Value(v.as_int());
  if (v.is_float()) {
    const double d = v.as_double();
    if (!std::isfinite(d) || std::fabs(d) > 9.2e18) return def;
    return Value(static_cast<int64_t>(d));
  }
  if (v.is_string()) {
    const std::string s = PyStrip(v.as_string(), nullptr, true, true);
    char* end = nullptr;
    errno = 0;
    const long long i = std::strtoll(s.c_str(), &end, 10);
    if (!s.empty() && end == s.c_str() + s.size() && errno == 0) return Value(static_cast<int64_t>(i));
    const double d = std::strtod(s.c_str(), &end);
    if (!s.empty() && end == s.c_str() + s.size() && std::isfinite(d) && std::fabs(d) < 9.2e18) {
      return Value(static_cast<int64_t>(d));
    }
  }
  return def;
}

Value ToFloat(const Value& v, const Args& args) {
  const Value* fallback = args.Get(0, "default");
  const Value def = fallback != nullptr ? *fallback : Value(0.0);
  if (v.is_number()) return Value(v.as_double());
  if (v.is_string()) {
    const std::string s = PyStrip(v.as_string(), nullptr, true, true);
    char* end = nullptr;
    const double d = std::strtod(s.c_str(), &end);
    if (!s.empty() && end == s.c_str() + s.size()) return Value(d);
  }
  return def;
}

}  // namespace

std::string PyStrip(std::string_view s, const Value* chars, bool left, bool right) {
  const auto cps = CodePoints(s);
  std::vector<uint32_t> set;
  const bool whitespace = chars == nullptr || chars->is_none();
  if (!whitespace) {
    if (!chars->is_string()) Fail("strip arg must be None or str, not " + chars->TypeName());
    for (const CodePoint& c : CodePoints(chars->as_string())) set.push_back(c.cp);
  }
  auto strip = [&](uint32_t cp) {
    return whitespace ? IsPySpace(cp) : std::find(set.begin(), set.end(), cp) != set.end();
  };
  size_t begin = 0;
  size_t end = cps.size();
  if (left) {
    while (begin < end && strip(cps[begin].cp)) ++begin;
  }
  if (right) {
    while (end > begin && strip(cps[end - 1].cp)) --end;
  }
  if (begin == end) return "";
  const char* from = cps[begin].bytes.data();
  const char* to = cps[end - 1].bytes.data() + cps[end - 1].bytes.size();
  return std::string(from, static_cast<size_t>(to - from));
}

bool HasMethod(const Value& object, std::string_view method) {
  if (object.is_string()) {
    return std::find(std::begin(kStringMethods), std::end(kStringMethods), method) != std::end(kStringMethods);
  }
  if (object.is_dict()) {
    return std::find(std::begin(kDictMethods), std::end(kDictMethods), method) != std::end(kDictMethods);
  }
  return false;
}

Value CallMethod(Interpreter& in, const Value& object, std::string_view method, const Args& args) {
  if (object.is_string()) return StringMethod(in, object.as_string(), method, args);
  if (object.is_dict()) {
    if (method == "items") return Value(DictItems(object));
    if (method == "keys") return Value(Iterate(object));
    if (method == "values") {
      List out;
      for (const auto& kv : object.as_dict()) out.push_back(kv.second);
      return Value(std::move(out));
    }
    if (method == "get") {
      const Value* key = args.Get(0, "key");
      if (key == nullptr) Fail("get() takes at least 1 argument");
      if (key->is_string()) {
        if (const Value* v = object.Find(key->as_string())) return *v;
      }
      const Value* fallback = args.Get(1, "default");
      return fallback != nullptr ? *fallback : Value::None();
    }
  }
  Fail("'" + object.TypeName() + "' object has no method '" + std::string(method) + "'");
}

bool IsGlobalFunction(std::string_view name) {
  return name == "range" || name == "namespace" || name == "dict" || name == "raise_exception" ||
         name == "strftime_now";
}

Value CallGlobalFunction(Interpreter& in, std::string_view name, const Args& args) {
  if (name == "raise_exception") {
    const Value* message = args.Get(0, "message");
    JinjaError error{message != nullptr ? message->Str() : std::string("raise_exception() called")};
    error.raised = true;
    throw error;
  }
  if (name == "range") {
    if (args.positional.empty() || args.positional.size() > 3) Fail("range() takes 1 to 3 arguments");
    for (const Value& v : args.positional) {
      if (!v.is_int() && !v.is_bool()) Fail("range() arguments must be integers, not " + v.TypeName());
    }
    const int64_t start = args.positional.size() > 1 ? args.positional[0].as_int() : 0;
    const int64_t stop = args.positional.size() > 1 ? args.positional[1].as_int() : args.positional[0].as_int();
    const int64_t step = args.positional.size() > 2 ? args.positional[2].as_int() : 1;
    if (step == 0) Fail("range() arg 3 must not be zero");
    List out;
    for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) {
      in.Step();
      out.emplace_back(i);
    }
    return Value(std::move(out));
  }
  if (name == "namespace" || name == "dict") {
    Dict attrs;
    for (const Value& v : args.positional) {
      if (!v.is_dict()) Fail(std::string(name) + "() positional argument must be a mapping");
      attrs.insert(attrs.end(), v.as_dict().begin(), v.as_dict().end());
    }
    for (const auto& [key, value] : args.keyword) {
      bool replaced = false;
      for (auto& [k, slot] : attrs) {
        if (k == key) {
          slot = value;
          replaced = true;
        }
      }
      if (!replaced) attrs.emplace_back(key, value);
    }
    if (name == "dict") return Value(std::move(attrs));
    auto ns = std::make_shared<Namespace>();
    ns->attrs = std::move(attrs);
    return Value(std::move(ns));
  }
  if (name == "strftime_now") {
    const Value* format = args.Get(0, "format");
    if (format == nullptr || !format->is_string()) Fail("strftime_now() needs a format string");
    const std::time_t now = std::time(nullptr);
    std::tm local{};
    localtime_r(&now, &local);
    char buf[256];
    const size_t n = std::strftime(buf, sizeof buf, format->as_string().c_str(), &local);
    return Value(std::string(buf, n));
  }
  Fail("unknown function '" + std::string(name) + "'");
}

Value ApplyFilter(Interpreter& in, std::string_view name, const Value& operand, const Args& args) {
  if (name == "safe") return operand;
  if (name == "default" || name == "d") {
    const bool boolean = ArgBool(args, 1, "boolean", false);
    if (operand.is_undefined() || (boolean && !operand.Truthy())) {
      const Value* fallback = args.Get(0, "default_value");
      return fallback != nullptr ? *fallback : Value(std::string());
    }
    return operand;
  }
  if (name == "tojson") return ToJson(operand, args);
  if (name == "length" || name == "count") return Value(Length(operand));
  if (name == "string") return Value(operand.Str());
  if (name == "list") return Value(Iterate(operand));
  if (name == "items") return Value(DictItems(operand));
  if (name == "first" || name == "last") {
    List items = Iterate(operand);
    if (items.empty()) return Value::MakeUndefined("No " + std::string(name) + " item, sequence was empty.");
    return name == "first" ? items.front() : items.back();
  }
  if (name == "join") {
    const Value* sep = args.Get(0, "d");
    const Value* attr = args.Get(1, "attribute");
    std::string out;
    bool first = true;
    for (const Value& item : Iterate(operand)) {
      if (!first && sep != nullptr) out += sep->Str();
      first = false;
      out += (attr != nullptr && attr->is_string()) ? AttributePath(item, attr->as_string()).Str() : item.Str();
      in.CheckSize(out.size());
    }
    return Value(std::move(out));
  }
  if (name == "trim") return Value(PyStrip(operand.Str(), args.Get(0, "chars"), true, true));
  if (name == "lower") return Value(Lower(operand.Str()));
  if (name == "upper") return Value(Upper(operand.Str()));
  if (name == "capitalize") return Value(Capitalize(operand.Str()));
  if (name == "title") return Value(Title(operand.Str()));
  if (name == "replace") {
    return Value(Replace(in, operand.Str(), args.Get(0, "old") ? args.Get(0, "old")->Str() : "",
                         args.Get(1, "new") ? args.Get(1, "new")->Str() : "", ArgInt(args, 2, "count", -1)));
  }
  if (name == "indent") return Indent(operand, args);
  if (name == "int") return ToInt(operand, args);
  if (name == "float") return ToFloat(operand, args);
  if (name == "abs") {
    if (operand.is_float()) return Value(std::fabs(operand.as_double()));
    if (operand.is_int() || operand.is_bool()) {
      if (operand.as_int() == INT64_MIN) Fail("integer overflow");
      return Value(std::abs(operand.as_int()));
    }
    Fail("bad operand type for abs(): '" + operand.TypeName() + "'");
  }
  if (name == "reverse") {
    if (operand.is_string()) {
      auto chars = Utf8Split(operand.as_string());
      std::string out;
      for (auto it = chars.rbegin(); it != chars.rend(); ++it) out += *it;
      return Value(std::move(out));
    }
    List items = Iterate(operand);
    std::reverse(items.begin(), items.end());
    return Value(std::move(items));
  }
  if (name == "sort" || name == "dictsort") {
    const bool dict = name == "dictsort";
    List items = dict ? DictItems(operand) : Iterate(operand);
    const bool reverse = ArgBool(args, dict ? 2 : 0, "reverse", false);
    const bool case_sensitive = ArgBool(args, dict ? 0 : 1, "case_sensitive", false);
    const Value* attr = dict ? nullptr : args.Get(2, "attribute");
    auto key = [&](const Value& v) {
      Value k = dict ? v.as_list()[0] : (attr != nullptr && attr->is_string() ? AttributePath(v, attr->as_string()) : v);
      return (!case_sensitive && k.is_string()) ? Value(Lower(k.as_string())) : k;
    };
    in.Step(items.size());
    std::stable_sort(items.begin(), items.end(), [&](const Value& a, const Value& b) {
      return reverse ? LessThan(key(b), key(a)) : LessThan(key(a), key(b));
    });
    return Value(std::move(items));
  }
  if (name == "sum") {
    Value total = args.Get(1, "start") ? *args.Get(1, "start") : Value(int64_t{0});
    const Value* attr = args.Get(0, "attribute");
    for (const Value& item : Iterate(operand)) {
      total = BinaryOp(in, "+", total, attr != nullptr && attr->is_string() ? AttributePath(item, attr->as_string()) : item);
    }
    return total;
  }
  if (name == "unique") {
    List out;
    for (const Value& item : Iterate(operand)) {
      in.Step();
      const bool seen = std::any_of(out.begin(), out.end(), [&](const Value& o) {
        return (o.is_string() && item.is_string()) ? Lower(o.as_string()) == Lower(item.as_string()) : o.Equals(item);
      });
      if (!seen) out.push_back(item);
    }
    return Value(std::move(out));
  }
  if (name == "select") return SelectFilter(in, operand, args, false, true);
  if (name == "reject") return SelectFilter(in, operand, args, false, false);
  if (name == "selectattr") return SelectFilter(in, operand, args, true, true);
  if (name == "rejectattr") return SelectFilter(in, operand, args, true, false);
  if (name == "map") return MapFilter(in, operand, args);
  if (name == "attr") return GetAttr(operand, args.Get(0, "name") ? args.Get(0, "name")->Str() : "");
  if (name == "e" || name == "escape") {
    std::string out;
    for (char c : operand.Str()) {
      switch (c) {
        case '&': out += "&amp;"; break;
        case '<': out += "&lt;"; break;
        case '>': out += "&gt;"; break;
        case '"': out += "&#34;"; break;
        case '\'': out += "&#39;"; break;
        default: out += c;
      }
    }
    return Value(std::move(out));
  }
  Fail("unknown filter '" + std::string(name) + "'");
}

bool ApplyTest(Interpreter& in, std::string_view name, const Value& v, const Args& args) {
  (void)in;
  auto arg = [&]() -> const Value& {
    if (args.positional.empty()) Fail("test '" + std::string(name) + "' needs an argument");
    return args.positional[0];
  };
  if (name == "defined") return !v.is_undefined();
  if (name == "undefined") return v.is_undefined();
  if (name == "none") return v.is_none();
  if (name == "boolean") return v.is_bool();
  if (name == "true") return v.is_bool() && v.as_bool();
  if (name == "false") return v.is_bool() && !v.as_bool();
  if (name == "integer") return v.is_int();
  if (name == "float") return v.is_float();
  if (name == "number") return v.is_number();
  if (name == "string") return v.is_string();
  if (name == "mapping") return v.is_dict();
  if (name == "iterable") return v.is_list() || v.is_dict() || v.is_string() || v.is_undefined();
  if (name == "sequence") return v.is_list() || v.is_dict() || v.is_string() || v.is_undefined();
  if (name == "callable") return v.is_callable();
  if (name == "equalto" || name == "eq" || name == "==" || name == "sameas") return v.Equals(arg());
  if (name == "ne" || name == "!=") return !v.Equals(arg());
  if (name == "lt" || name == "lessthan" || name == "<") return LessThan(v, arg());
  if (name == "gt" || name == "greaterthan" || name == ">") return LessThan(arg(), v);
  if (name == "le" || name == "<=") return !LessThan(arg(), v);
  if (name == "ge" || name == ">=") return !LessThan(v, arg());
  if (name == "in") return Contains(arg(), v);
  if (name == "odd" || name == "even" || name == "divisibleby") {
    if (!v.is_int() && !v.is_bool()) Fail("test '" + std::string(name) + "' needs an integer");
    if (name == "odd") return v.as_int() % 2 != 0;
    if (name == "even") return v.as_int() % 2 == 0;
    const Value& d = arg();
    if ((!d.is_int() && !d.is_bool()) || d.as_int() == 0) Fail("divisibleby needs a non-zero integer");
    return v.as_int() % d.as_int() == 0;
  }
  if (name == "lower") return v.is_string() && Lower(v.as_string()) == v.as_string();
  if (name == "upper") return v.is_string() && Upper(v.as_string()) == v.as_string();
  Fail("unknown test '" + std::string(name) + "'");
}

}  // namespace myriad::tokenizer::jinja
