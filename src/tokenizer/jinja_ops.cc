// Operators, attribute and item access, slicing, and the str and dict methods, with Python's
// semantics (Jinja2 evaluates all of these with Python's own operators).
#include <algorithm>
#include <cmath>

#include "tokenizer/jinja_builtins.h"
#include "tokenizer/jinja_interpreter.h"

namespace myriad::tokenizer::jinja {
namespace {

[[noreturn]] void FailOperands(std::string_view op, const Value& a, const Value& b) {
  Fail("unsupported operand type(s) for " + std::string(op) + ": '" + a.TypeName() + "' and '" +
       b.TypeName() + "'");
}

int64_t AddInt(int64_t a, int64_t b) {
  int64_t r = 0;
  if (__builtin_add_overflow(a, b, &r)) Fail("integer overflow");
  return r;
}
int64_t SubInt(int64_t a, int64_t b) {
  int64_t r = 0;
  if (__builtin_sub_overflow(a, b, &r)) Fail("integer overflow");
  return r;
}
int64_t MulInt(int64_t a, int64_t b) {
  int64_t r = 0;
  if (__builtin_mul_overflow(a, b, &r)) Fail("integer overflow");
  return r;
}

Value Repeat(Interpreter& in, const Value& seq, int64_t n) {
  if (n <= 0) return seq.is_string() ? Value(std::string()) : Value(List{});
  if (seq.is_string()) {
    const std::string& s = seq.as_string();
    if (!s.empty() && static_cast<uint64_t>(n) > in.limits().max_output_bytes / s.size()) {
      in.CheckSize(in.limits().max_output_bytes + 1);
    }
    std::string out;
    out.reserve(s.size() * static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) out += s;
    return Value(std::move(out));
  }
  const List& items = seq.as_list();
  in.Step(static_cast<uint64_t>(n) * std::max<size_t>(items.size(), 1));
  List out;
  for (int64_t i = 0; i < n; ++i) out.insert(out.end(), items.begin(), items.end());
  return Value(std::move(out));
}

Value IntPow(int64_t base, int64_t exp) {
  int64_t result = 1;
  while (exp > 0) {
    if (exp & 1) result = MulInt(result, base);
    exp >>= 1;
    if (exp > 0) base = MulInt(base, base);
  }
  return Value(result);
}

std::string ObjectName(const Value& v) {
  if (v.is_none()) return "'None'";
  // Appending (not "'" + name) sidesteps a GCC 12 -Wrestrict false positive at -O3.
  std::string out = "'";
  out += v.TypeName();
  out += " object'";
  return out;
}

}  // namespace

Value BinaryOp(Interpreter& in, std::string_view op, const Value& a, const Value& b) {
  if (op == "~") {
    std::string out = a.Str();
    const std::string right = b.Str();
    in.CheckSize(out.size() + right.size());
    return Value(out + right);
  }
  if (a.is_undefined()) Fail(a.undefined_hint());
  if (b.is_undefined()) Fail(b.undefined_hint());
  const bool numbers = a.is_number() && b.is_number();
  const bool floats = numbers && (a.is_float() || b.is_float());
  if (op == "+") {
    if (floats) return Value(a.as_double() + b.as_double());
    if (numbers) return Value(AddInt(a.as_int(), b.as_int()));
    if (a.is_string() && b.is_string()) {
      in.CheckSize(a.as_string().size() + b.as_string().size());
      return Value(a.as_string() + b.as_string());
    }
    if (a.is_list() && b.is_list()) {
      in.Step(b.as_list().size());
      List out = a.as_list();
      out.insert(out.end(), b.as_list().begin(), b.as_list().end());
      return Value(std::move(out));
    }
    FailOperands(op, a, b);
  }
  if (op == "*") {
    if (floats) return Value(a.as_double() * b.as_double());
    if (numbers) return Value(MulInt(a.as_int(), b.as_int()));
    if ((a.is_string() || a.is_list()) && (b.is_int() || b.is_bool())) return Repeat(in, a, b.as_int());
    if ((b.is_string() || b.is_list()) && (a.is_int() || a.is_bool())) return Repeat(in, b, a.as_int());
    FailOperands(op, a, b);
  }
  if (a.is_string() && op == "%") Fail("printf-style string formatting ('%') is not supported");
  if (!numbers) FailOperands(op, a, b);
  if (op == "-") {
    if (floats) return Value(a.as_double() - b.as_double());
    return Value(SubInt(a.as_int(), b.as_int()));
  }
  if (op == "**") {
    if (!floats && b.as_int() >= 0) return IntPow(a.as_int(), b.as_int());
    return Value(std::pow(a.as_double(), b.as_double()));
  }
  const bool zero = floats ? b.as_double() == 0.0 : b.as_int() == 0;
  if (zero) Fail(op == "%" ? "integer modulo by zero" : "division by zero");
  if (op == "/") return Value(a.as_double() / b.as_double());
  if (op == "//") {
    if (floats) return Value(std::floor(a.as_double() / b.as_double()));
    if (a.as_int() == INT64_MIN && b.as_int() == -1) Fail("integer overflow");
    int64_t q = a.as_int() / b.as_int();
    if ((a.as_int() % b.as_int() != 0) && ((a.as_int() < 0) != (b.as_int() < 0))) --q;
    return Value(q);
  }
  if (op == "%") {
    if (floats) {
      double r = std::fmod(a.as_double(), b.as_double());
      if (r != 0 && ((r < 0) != (b.as_double() < 0))) r += b.as_double();
      return Value(r);
    }
    if (b.as_int() == -1) return Value(int64_t{0});
    int64_t r = a.as_int() % b.as_int();
    if (r != 0 && ((r < 0) != (b.as_int() < 0))) r += b.as_int();
    return Value(r);
  }
  Fail("unknown operator " + std::string(op));
}

bool LessThan(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) return a.as_double() < b.as_double();
    return a.as_int() < b.as_int();
  }
  if (a.is_string() && b.is_string()) return a.as_string() < b.as_string();
  if (a.is_list() && b.is_list()) {
    const List& x = a.as_list();
    const List& y = b.as_list();
    for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
      if (!x[i].Equals(y[i])) return LessThan(x[i], y[i]);
    }
    return x.size() < y.size();
  }
  if (a.is_undefined()) Fail(a.undefined_hint());
  if (b.is_undefined()) Fail(b.undefined_hint());
  Fail("'<' not supported between instances of '" + a.TypeName() + "' and '" + b.TypeName() + "'");
}

bool Contains(const Value& haystack, const Value& needle) {
  switch (haystack.type()) {
    case Value::Type::kString:
      if (!needle.is_string()) {
        Fail("'in <string>' requires string as left operand, not " + needle.TypeName());
      }
      return haystack.as_string().find(needle.as_string()) != std::string::npos;
    case Value::Type::kList:
      for (const Value& item : haystack.as_list()) {
        if (item.Equals(needle)) return true;
      }
      return false;
    case Value::Type::kDict:
      return needle.is_string() && haystack.Find(needle.as_string()) != nullptr;
    case Value::Type::kUndefined:
      return false;  // Jinja2's Undefined iterates as empty
    default:
      Fail("argument of type '" + haystack.TypeName() + "' is not iterable");
  }
}

Value GetAttr(const Value& obj, const std::string& name) {
  if (obj.is_undefined()) Fail(obj.undefined_hint());
  if (HasMethod(obj, name)) {
    return Value(std::shared_ptr<const Callable>(std::make_shared<BoundMethod>(obj, name)));
  }
  if (obj.is_dict() || obj.is_namespace()) {
    if (const Value* v = obj.Find(name)) return *v;
  }
  return Value::MakeUndefined(ObjectName(obj) + " has no attribute '" + name + "'");
}

Value GetItem(const Value& obj, const Value& key) {
  if (obj.is_undefined()) Fail(obj.undefined_hint());
  if ((obj.is_list() || obj.is_string()) && (key.is_int() || key.is_bool())) {
    int64_t index = key.as_int();
    if (obj.is_list()) {
      const List& list = obj.as_list();
      const auto n = static_cast<int64_t>(list.size());
      if (index < 0) index += n;
      if (index >= 0 && index < n) return list[static_cast<size_t>(index)];
    } else {
      const auto chars = Utf8Split(obj.as_string());
      const auto n = static_cast<int64_t>(chars.size());
      if (index < 0) index += n;
      if (index >= 0 && index < n) return Value(std::string(chars[static_cast<size_t>(index)]));
    }
    return Value::MakeUndefined(obj.TypeName() + " object has no element " + std::to_string(key.as_int()));
  }
  if (key.is_string()) {
    if (obj.is_dict() || obj.is_namespace()) {
      if (const Value* v = obj.Find(key.as_string())) return *v;
    }
    return GetAttr(obj, key.as_string());
  }
  return Value::MakeUndefined(ObjectName(obj) + " has no element " + key.Repr());
}

List Iterate(const Value& value) {
  switch (value.type()) {
    case Value::Type::kList:
      return value.as_list();
    case Value::Type::kDict: {
      List keys;
      keys.reserve(value.as_dict().size());
      for (const auto& kv : value.as_dict()) keys.emplace_back(kv.first);
      return keys;
    }
    case Value::Type::kString: {
      List chars;
      for (std::string_view c : Utf8Split(value.as_string())) chars.emplace_back(std::string(c));
      return chars;
    }
    case Value::Type::kUndefined:
      return {};
    default:
      Fail("'" + value.TypeName() + "' object is not iterable");
  }
}

Value Slice(const Value& object, const Value& start, const Value& stop, const Value& step) {
  if (object.is_undefined()) Fail(object.undefined_hint());
  if (!object.is_list() && !object.is_string()) Fail("'" + object.TypeName() + "' object is not subscriptable");
  auto index = [](const Value& v, const char* what) -> int64_t {
    if (!v.is_int() && !v.is_bool()) Fail(std::string("slice ") + what + " must be an integer or none");
    return v.as_int();
  };
  const int64_t st = step.is_none() ? 1 : index(step, "step");
  if (st == 0) Fail("slice step cannot be zero");
  std::vector<std::string_view> chars;
  int64_t n;
  if (object.is_string()) {
    chars = Utf8Split(object.as_string());
    n = static_cast<int64_t>(chars.size());
  } else {
    n = static_cast<int64_t>(object.as_list().size());
  }
  // Python's slice.indices().
  const int64_t lower = st < 0 ? -1 : 0;
  const int64_t upper = st < 0 ? n - 1 : n;
  auto clamp = [&](const Value& v, int64_t missing, const char* what) {
    if (v.is_none()) return missing;
    int64_t i = index(v, what);
    if (i < 0) {
      i += n;
      if (i < lower) i = lower;
    } else if (i > upper) {
      i = upper;
    }
    return i;
  };
  const int64_t from = clamp(start, st < 0 ? upper : lower, "start");
  const int64_t to = clamp(stop, st < 0 ? lower : upper, "stop");
  if (object.is_string()) {
    std::string out;
    for (int64_t i = from; st > 0 ? i < to : i > to; i += st) out += chars[static_cast<size_t>(i)];
    return Value(std::move(out));
  }
  List out;
  const List& list = object.as_list();
  for (int64_t i = from; st > 0 ? i < to : i > to; i += st) out.push_back(list[static_cast<size_t>(i)]);
  return Value(std::move(out));
}

}  // namespace myriad::tokenizer::jinja
