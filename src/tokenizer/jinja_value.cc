#include "tokenizer/jinja_value.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>

namespace myriad::tokenizer::jinja {
namespace {

// Values built inside a template can nest without bound ({% set x = [x] %} in a loop), so every
// recursive walk over a value stops here instead of overflowing the stack.
constexpr int kMaxPrintDepth = 256;

template <typename Json>
Value FromJsonImpl(const Json& j, int depth, int max_depth) {
  if (depth > max_depth) {
    Fail("JSON input nests deeper than " + std::to_string(max_depth) + " levels");
  }
  switch (j.type()) {
    case nlohmann::json::value_t::null:
    case nlohmann::json::value_t::discarded:
      return Value::None();
    case nlohmann::json::value_t::boolean:
      return Value(j.template get<bool>());
    case nlohmann::json::value_t::number_integer:
      return Value(j.template get<int64_t>());
    case nlohmann::json::value_t::number_unsigned: {
      const uint64_t u = j.template get<uint64_t>();
      if (u > static_cast<uint64_t>(INT64_MAX)) return Value(static_cast<double>(u));
      return Value(static_cast<int64_t>(u));
    }
    case nlohmann::json::value_t::number_float:
      return Value(j.template get<double>());
    case nlohmann::json::value_t::string:
      return Value(j.template get<std::string>());
    case nlohmann::json::value_t::array: {
      List list;
      list.reserve(j.size());
      for (const auto& item : j) list.push_back(FromJsonImpl(item, depth + 1, max_depth));
      return Value(std::move(list));
    }
    case nlohmann::json::value_t::object: {
      Dict dict;
      dict.reserve(j.size());
      for (auto it = j.begin(); it != j.end(); ++it) {
        dict.emplace_back(it.key(), FromJsonImpl(it.value(), depth + 1, max_depth));
      }
      return Value(std::move(dict));
    }
    case nlohmann::json::value_t::binary:
      break;
  }
  Fail("unsupported JSON value (binary)");
}

void CheckDepth(int depth) {
  if (depth > kMaxPrintDepth) {
    Fail("value nests deeper than " + std::to_string(kMaxPrintDepth) + " levels");
  }
}

void AppendPythonStringRepr(std::string& out, const std::string& s) {
  // Python prefers single quotes and switches to double when that avoids escaping.
  const bool has_single = s.find('\'') != std::string::npos;
  const bool has_double = s.find('"') != std::string::npos;
  const char quote = (has_single && !has_double) ? '"' : '\'';
  out += quote;
  for (unsigned char c : s) {
    switch (c) {
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c == static_cast<unsigned char>(quote)) {
          out += '\\';
          out += static_cast<char>(c);
        } else if (c < 0x20 || c == 0x7f) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\x%02x", c);
          out += buf;
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  out += quote;
}

// Decodes one code point at s[i], advancing i; malformed bytes decode as themselves so that
// nothing is lost (clients may send anything).
uint32_t DecodeUtf8(std::string_view s, size_t& i) {
  const auto c = static_cast<unsigned char>(s[i]);
  int extra = c >= 0xF0 ? 3 : c >= 0xE0 ? 2 : c >= 0xC0 ? 1 : 0;
  if (c >= 0xF8 || i + extra >= s.size()) extra = 0;  // malformed or truncated: the byte itself
  uint32_t cp = extra == 0 ? c : (c & (0x3F >> extra));
  for (int k = 1; k <= extra; ++k) cp = (cp << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3F);
  i += 1 + extra;
  return cp;
}

void AppendJsonString(std::string& out, const std::string& s, bool ensure_ascii) {
  out += '"';
  for (size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    char buf[16];
    if (c < 0x80) {
      ++i;
      switch (c) {
        case '"': out += "\\\""; break;
        case '\\': out += "\\\\"; break;
        case '\n': out += "\\n"; break;
        case '\r': out += "\\r"; break;
        case '\t': out += "\\t"; break;
        case '\b': out += "\\b"; break;
        case '\f': out += "\\f"; break;
        default:
          if (c < 0x20 || (ensure_ascii && c == 0x7f)) {
            std::snprintf(buf, sizeof buf, "\\u%04x", c);
            out += buf;
          } else {
            out += static_cast<char>(c);
          }
      }
      continue;
    }
    if (!ensure_ascii) {
      out += static_cast<char>(c);
      ++i;
      continue;
    }
    uint32_t cp = DecodeUtf8(s, i);
    if (cp >= 0x10000) {
      cp -= 0x10000;
      std::snprintf(buf, sizeof buf, "\\u%04x\\u%04x", 0xD800 + (cp >> 10), 0xDC00 + (cp & 0x3FF));
    } else {
      std::snprintf(buf, sizeof buf, "\\u%04x", cp);
    }
    out += buf;
  }
  out += '"';
}

void AppendJson(std::string& out, const Value& v, const JsonDumpOptions& o, int depth) {
  CheckDepth(depth);
  const std::string item_sep = o.item_separator ? *o.item_separator : (o.indent ? "," : ", ");
  auto newline = [&](int level) {
    if (!o.indent) return;
    out += '\n';
    for (int k = 0; k < level; ++k) out += *o.indent;
  };
  switch (v.type()) {
    case Value::Type::kNone: out += "null"; return;
    case Value::Type::kBool: out += v.as_bool() ? "true" : "false"; return;
    case Value::Type::kInt: out += std::to_string(v.as_int()); return;
    case Value::Type::kFloat: {
      const double d = v.as_double();
      if (std::isnan(d)) out += "NaN";
      else if (std::isinf(d)) out += d > 0 ? "Infinity" : "-Infinity";
      else out += FormatPythonFloat(d);
      return;
    }
    case Value::Type::kString: AppendJsonString(out, v.as_string(), o.ensure_ascii); return;
    case Value::Type::kList: {
      const List& list = v.as_list();
      if (list.empty()) { out += "[]"; return; }
      out += '[';
      for (size_t i = 0; i < list.size(); ++i) {
        if (i > 0) out += item_sep;
        newline(depth + 1);
        AppendJson(out, list[i], o, depth + 1);
      }
      newline(depth);
      out += ']';
      return;
    }
    case Value::Type::kDict:
    case Value::Type::kNamespace: {
      const Dict& dict = v.is_dict() ? v.as_dict() : v.as_namespace().attrs;
      if (dict.empty()) { out += "{}"; return; }
      std::vector<const std::pair<std::string, Value>*> items;
      items.reserve(dict.size());
      for (const auto& kv : dict) items.push_back(&kv);
      if (o.sort_keys) {
        std::stable_sort(items.begin(), items.end(),
                         [](auto* a, auto* b) { return a->first < b->first; });
      }
      out += '{';
      for (size_t i = 0; i < items.size(); ++i) {
        if (i > 0) out += item_sep;
        newline(depth + 1);
        AppendJsonString(out, items[i]->first, o.ensure_ascii);
        out += o.key_separator;
        AppendJson(out, items[i]->second, o, depth + 1);
      }
      newline(depth);
      out += '}';
      return;
    }
    case Value::Type::kUndefined:
    case Value::Type::kCallable:
      break;
  }
  Fail("tojson: object of type " + v.TypeName() + " is not JSON serializable");
}

}  // namespace

void Fail(std::string message) { throw JinjaError{std::move(message)}; }

Value::Value(List l) {
  uint32_t deepest = 0;
  for (const Value& item : l) deepest = std::max(deepest, item.depth());
  v_ = std::make_shared<const List>(std::move(l));
  depth_ = deepest + 1;
}

Value::Value(Dict d) {
  uint32_t deepest = 0;
  for (const auto& kv : d) deepest = std::max(deepest, kv.second.depth());
  v_ = std::make_shared<const Dict>(std::move(d));
  depth_ = deepest + 1;
}

Value Value::FromJson(const nlohmann::ordered_json& j, int max_depth) {
  return FromJsonImpl(j, 0, max_depth);
}
Value Value::FromJson(const nlohmann::json& j, int max_depth) {
  return FromJsonImpl(j, 0, max_depth);
}

int64_t Value::as_int() const {
  if (is_bool()) return as_bool() ? 1 : 0;
  return std::get<int64_t>(v_);
}

double Value::as_double() const {
  if (is_float()) return std::get<double>(v_);
  return static_cast<double>(as_int());
}

bool Value::Truthy() const {
  switch (type()) {
    case Type::kUndefined:
    case Type::kNone: return false;
    case Type::kBool: return as_bool();
    case Type::kInt: return as_int() != 0;
    case Type::kFloat: return as_double() != 0.0;
    case Type::kString: return !as_string().empty();
    case Type::kList: return !as_list().empty();
    case Type::kDict: return !as_dict().empty();
    case Type::kNamespace:
    case Type::kCallable: return true;
  }
  return false;
}

std::string Value::Str() const {
  switch (type()) {
    case Type::kUndefined: return "";
    case Type::kString: return as_string();
    default: {
      std::string out;
      AppendRepr(out, 0);
      return out;
    }
  }
}

std::string Value::Repr() const {
  std::string out;
  AppendRepr(out, 0);
  return out;
}

void Value::AppendRepr(std::string& out, int depth) const {
  CheckDepth(depth);
  switch (type()) {
    case Type::kUndefined:
      // Printed alone it is empty; inside a list or dict Python shows its repr.
      if (depth > 0) out += "Undefined";
      return;
    case Type::kNone: out += "None"; return;
    case Type::kBool: out += as_bool() ? "True" : "False"; return;
    case Type::kInt: out += std::to_string(as_int()); return;
    case Type::kFloat: {
      const double d = as_double();
      if (std::isnan(d)) out += "nan";
      else if (std::isinf(d)) out += d > 0 ? "inf" : "-inf";
      else out += FormatPythonFloat(d);
      return;
    }
    case Type::kString: AppendPythonStringRepr(out, as_string()); return;
    case Type::kList: {
      out += tuple_ ? '(' : '[';
      bool first = true;
      for (const Value& item : as_list()) {
        if (!first) out += ", ";
        first = false;
        item.AppendRepr(out, depth + 1);
      }
      if (tuple_ && as_list().size() == 1) out += ',';
      out += tuple_ ? ')' : ']';
      return;
    }
    case Type::kDict:
    case Type::kNamespace: {
      if (is_namespace()) out += "<Namespace ";
      out += '{';
      bool first = true;
      for (const auto& [key, item] : is_dict() ? as_dict() : as_namespace().attrs) {
        if (!first) out += ", ";
        first = false;
        AppendPythonStringRepr(out, key);
        out += ": ";
        item.AppendRepr(out, depth + 1);
      }
      out += '}';
      if (is_namespace()) out += '>';
      return;
    }
    case Type::kCallable:
      out += "<function ";
      out += as_callable()->name();
      out += '>';
      return;
  }
}

std::string Value::TypeName() const {
  switch (type()) {
    case Type::kUndefined: return "undefined";
    case Type::kNone: return "NoneType";
    case Type::kBool: return "bool";
    case Type::kInt: return "int";
    case Type::kFloat: return "float";
    case Type::kString: return "str";
    case Type::kList: return "list";
    case Type::kDict: return "dict";
    case Type::kNamespace: return "Namespace";
    case Type::kCallable: return "function";
  }
  return "?";
}

bool Value::Equals(const Value& other) const {
  if (is_number() && other.is_number()) {
    if (is_float() || other.is_float()) return as_double() == other.as_double();
    return as_int() == other.as_int();
  }
  if (type() != other.type()) return false;
  switch (type()) {
    case Type::kUndefined:
    case Type::kNone: return true;
    case Type::kString: return as_string() == other.as_string();
    case Type::kList: {
      const List& a = as_list();
      const List& b = other.as_list();
      if (a.size() != b.size() || tuple_ != other.tuple_) return false;
      for (size_t i = 0; i < a.size(); ++i) {
        if (!a[i].Equals(b[i])) return false;
      }
      return true;
    }
    case Type::kDict: {
      const Dict& a = as_dict();
      const Dict& b = other.as_dict();
      if (a.size() != b.size()) return false;
      for (const auto& [key, item] : a) {
        const Value* found = other.Find(key);
        if (found == nullptr || !item.Equals(*found)) return false;
      }
      return true;
    }
    case Type::kNamespace:
      return &as_namespace() == &other.as_namespace();
    case Type::kCallable:
      return as_callable() == other.as_callable();
    default:
      return false;
  }
}

const Value* Value::Find(std::string_view key) const {
  if (!is_dict() && !is_namespace()) return nullptr;
  const Dict& dict = is_dict() ? as_dict() : as_namespace().attrs;
  for (const auto& kv : dict) {
    if (kv.first == key) return &kv.second;
  }
  return nullptr;
}

std::string FormatPythonFloat(double d) {
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof buf, d, std::chars_format::scientific);
  std::string sci(buf, res.ptr);
  // sci is "[-]D[.DDD]e[+-]XX": split into sign, digits and decimal exponent.
  std::string sign;
  size_t pos = 0;
  if (sci[0] == '-') {
    sign = "-";
    pos = 1;
  }
  const size_t e = sci.find('e');
  std::string digits;
  for (size_t i = pos; i < e; ++i) {
    if (sci[i] != '.') digits += sci[i];
  }
  const int exp = std::stoi(sci.substr(e + 1));
  if (exp >= -4 && exp < 16) {
    std::string out;
    if (exp < 0) {
      out = "0." + std::string(static_cast<size_t>(-exp - 1), '0') + digits;
    } else if (static_cast<int>(digits.size()) <= exp + 1) {
      out = digits + std::string(static_cast<size_t>(exp + 1) - digits.size(), '0') + ".0";
    } else {
      out = digits.substr(0, static_cast<size_t>(exp + 1)) + "." +
            digits.substr(static_cast<size_t>(exp + 1));
    }
    return sign + out;
  }
  std::string mantissa = digits.substr(0, 1);
  if (digits.size() > 1) mantissa += "." + digits.substr(1);
  char exp_buf[16];
  std::snprintf(exp_buf, sizeof exp_buf, "e%c%02d", exp < 0 ? '-' : '+', exp < 0 ? -exp : exp);
  return sign + mantissa + exp_buf;
}

std::string DumpJson(const Value& value, const JsonDumpOptions& options) {
  std::string out;
  AppendJson(out, value, options, 0);
  return out;
}

void AppendUtf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

size_t Utf8Length(std::string_view s) {
  size_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

std::vector<std::string_view> Utf8Split(std::string_view s) {
  std::vector<std::string_view> out;
  out.reserve(s.size());
  size_t i = 0;
  while (i < s.size()) {
    size_t j = i + 1;
    while (j < s.size() && (static_cast<unsigned char>(s[j]) & 0xC0) == 0x80) ++j;
    out.push_back(s.substr(i, j - i));
    i = j;
  }
  return out;
}

}  // namespace myriad::tokenizer::jinja
