#include "tokenizer/jinja_builtins.h"

#include "tokenizer/jinja_strings.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <ctime>

namespace myriad::tokenizer::jinja {
namespace {

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
    errno = 0;
    const long long index = numeric ? std::strtoll(part.c_str(), nullptr, 10) : 0;
    v = numeric && errno == 0 ? GetItem(v, Value(static_cast<int64_t>(index))) : GetItem(v, Value(part));
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
  o.ensure_ascii = args.Bool(0, "ensure_ascii", false);
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
  o.sort_keys = args.Bool(3, "sort_keys", false);
  return Value(DumpJson(operand, o));
}

Value Indent(const Value& operand, const Args& args) {
  std::string indention;
  const Value* width = args.Get(0, "width");
  if (width != nullptr && width->is_string()) {
    indention = width->as_string();
  } else {
    indention.assign(static_cast<size_t>(std::clamp<int64_t>(args.Int(0, "width", 4), 0, 256)), ' ');
  }
  const bool first = args.Bool(1, "first", false);
  const bool blank = args.Bool(2, "blank", false);
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

bool HasMethod(const Value& object, std::string_view method) {
  if (object.is_string()) return IsStringMethod(method);
  if (object.is_dict()) {
    return std::find(std::begin(kDictMethods), std::end(kDictMethods), method) != std::end(kDictMethods);
  }
  return false;
}

Value CallMethod(Interpreter& in, const Value& object, std::string_view method, const Args& args) {
  if (object.is_string()) return CallStringMethod(in, object.as_string(), method, args);
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
    if (name == "dict") return in.CheckDepth(Value(std::move(attrs)));
    auto ns = std::make_shared<Namespace>();
    for (const auto& kv : attrs) ns->depth = std::max(ns->depth, kv.second.depth() + 1);
    ns->attrs = std::move(attrs);
    in.Track(ns);
    return in.CheckDepth(Value(std::move(ns)));
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
    const bool boolean = args.Bool(1, "boolean", false);
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
  if (name == "capitalize") return Value(CapitalizeStr(operand.Str()));
  if (name == "title") return Value(TitleStr(operand.Str()));
  if (name == "replace") {
    return Value(ReplaceStr(in, operand.Str(), args.Get(0, "old") ? args.Get(0, "old")->Str() : "",
                         args.Get(1, "new") ? args.Get(1, "new")->Str() : "", args.Int(2, "count", -1)));
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
    const bool reverse = args.Bool(dict ? 2 : 0, "reverse", false);
    const bool case_sensitive = args.Bool(dict ? 0 : 1, "case_sensitive", false);
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
  static constexpr std::string_view kUnaryTests[] = {
      "defined", "undefined", "none", "boolean", "true", "false", "integer", "float", "number",
      "string", "mapping", "iterable", "sequence", "callable", "odd", "even", "lower", "upper"};
  if (args.size() > 0 && std::find(std::begin(kUnaryTests), std::end(kUnaryTests), name) != std::end(kUnaryTests)) {
    Fail("test '" + std::string(name) + "' takes no arguments");
  }
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
