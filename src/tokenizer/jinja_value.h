#pragma once
// Values of the Jinja interpreter: Python's object model cut down to what chat templates touch
// (undefined, None, bool, int, float, str, list, dict, namespace, callables). Lists and dicts are
// shared and never mutated once built, as in HF's ImmutableSandboxedEnvironment; only
// namespace() objects change, which is their purpose: state that outlives a loop iteration.
// Printing, comparison and truthiness follow Python, because the reference renderer (vLLM, via
// transformers) is Python's Jinja2 and prompts must match it byte for byte.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

namespace myriad::tokenizer::jinja {

// The interpreter's internal error. It never leaves the jinja_* files: Template converts it to
// an absl::Status at its boundary. line/col are 1-based; 0 means "not yet known" and the
// interpreter fills in the position of the node it was evaluating.
struct JinjaError {
  std::string message;
  int line = 0;
  int col = 0;
  // Raised by the template itself through raise_exception(message): the message is meant for
  // the client and is passed on as is.
  bool raised = false;
};

[[noreturn]] void Fail(std::string message);

class Value;
using List = std::vector<Value>;
// Insertion-ordered like Python's dict (tojson must keep the client's key order). Chat-template
// dicts are small, so lookup is linear.
using Dict = std::vector<std::pair<std::string, Value>>;

// Something callable from a template (a macro, a builtin, a bound string method). The
// interpreter defines the kinds and dispatches on them.
class Callable {
 public:
  virtual ~Callable() = default;
  virtual std::string_view name() const = 0;
};

// namespace(): the one mutable object.
struct Namespace {
  Dict attrs;
  // Deepest nesting ever assigned into it (see Value::depth()).
  uint32_t depth = 1;
};

struct Undefined {
  // What was looked up, for the message when an undefined value is used: "'x' is undefined".
  std::string hint;
};

class Value {
 public:
  enum class Type { kUndefined, kNone, kBool, kInt, kFloat, kString, kList, kDict, kNamespace, kCallable };

  Value() : v_(Undefined{}) {}
  static Value MakeUndefined(std::string hint) { return Value(Undefined{std::move(hint)}); }
  static Value None() { return Value(std::monostate{}); }
  Value(bool b) : v_(b) {}  // NOLINT(google-explicit-constructor): literals read naturally
  Value(int64_t i) : v_(i) {}  // NOLINT
  Value(int i) : v_(static_cast<int64_t>(i)) {}  // NOLINT
  Value(double d) : v_(d) {}  // NOLINT
  Value(std::string s) : v_(std::move(s)) {}  // NOLINT
  Value(const char* s) : v_(std::string(s)) {}  // NOLINT
  Value(List l);  // NOLINT
  // A tuple is a list that prints as (a, b) and never equals a list, as in Python; dict.items()
  // and tuple literals make them.
  static Value Tuple(List l) {
    Value v(std::move(l));
    v.tuple_ = true;
    return v;
  }
  bool is_tuple() const { return tuple_; }
  Value(Dict d);  // NOLINT
  Value(std::shared_ptr<Namespace> ns) : v_(std::move(ns)) {}  // NOLINT
  Value(std::shared_ptr<const Callable> c) : v_(std::move(c)) {}  // NOLINT

  // JSON into values; objects keep their key order. Nesting deeper than max_depth is an error
  // (the input comes from clients).
  static Value FromJson(const nlohmann::ordered_json& j, int max_depth = 128);
  static Value FromJson(const nlohmann::json& j, int max_depth = 128);

  Type type() const { return static_cast<Type>(v_.index()); }
  bool is_undefined() const { return type() == Type::kUndefined; }
  bool is_none() const { return type() == Type::kNone; }
  bool is_bool() const { return type() == Type::kBool; }
  bool is_int() const { return type() == Type::kInt; }
  bool is_float() const { return type() == Type::kFloat; }
  // Python's bool is an int: True + 1 == 2.
  bool is_number() const { return is_int() || is_float() || is_bool(); }
  bool is_string() const { return type() == Type::kString; }
  bool is_list() const { return type() == Type::kList; }
  bool is_dict() const { return type() == Type::kDict; }
  bool is_namespace() const { return type() == Type::kNamespace; }
  bool is_callable() const { return type() == Type::kCallable; }

  bool as_bool() const { return std::get<bool>(v_); }
  int64_t as_int() const;  // bool or int
  double as_double() const;  // bool, int or float
  const std::string& as_string() const { return std::get<std::string>(v_); }
  const List& as_list() const { return *std::get<std::shared_ptr<const List>>(v_); }
  const Dict& as_dict() const { return *std::get<std::shared_ptr<const Dict>>(v_); }
  Namespace& as_namespace() const { return *std::get<std::shared_ptr<Namespace>>(v_); }
  const std::shared_ptr<const Callable>& as_callable() const {
    return std::get<std::shared_ptr<const Callable>>(v_);
  }
  const std::string& undefined_hint() const { return std::get<Undefined>(v_).hint; }

  // Python truthiness (undefined is false).
  bool Truthy() const;
  // Python's str(): what {{ value }} prints. Undefined prints as "".
  std::string Str() const;
  // Python's repr(): how values print inside a list or dict.
  std::string Repr() const;
  // Python's type name, for error messages.
  std::string TypeName() const;
  // Python ==, including 1 == 1.0 == True and deep list/dict equality.
  bool Equals(const Value& other) const;

  // How deeply lists, dicts and namespaces nest inside this value (0 for a scalar). Kept at
  // construction so that the interpreter can refuse values nested deeply enough to overflow
  // the stack when they are printed, compared or destroyed.
  uint32_t depth() const { return is_namespace() ? as_namespace().depth : depth_; }

  // Member of a dict or namespace; nullptr when absent.
  const Value* Find(std::string_view key) const;

 private:
  explicit Value(Undefined u) : v_(std::move(u)) {}
  explicit Value(std::monostate n) : v_(n) {}

  void AppendRepr(std::string& out, int depth) const;

  std::variant<Undefined, std::monostate, bool, int64_t, double, std::string,
               std::shared_ptr<const List>, std::shared_ptr<const Dict>,
               std::shared_ptr<Namespace>, std::shared_ptr<const Callable>>
      v_;
  bool tuple_ = false;
  uint32_t depth_ = 0;
};

// Python's repr() of a float: shortest round-trip digits, scientific below 1e-4 and from 1e16.
std::string FormatPythonFloat(double d);

// Python's json.dumps(value, ensure_ascii, indent, separators, sort_keys) as transformers
// installs it for tojson: non-ASCII kept raw unless ensure_ascii, keys in insertion order.
// No indent means one line; separators default as in Python (", " or "," with an indent).
struct JsonDumpOptions {
  bool ensure_ascii = false;
  std::optional<std::string> indent;  // the text of one level
  std::optional<std::string> item_separator;
  std::string key_separator = ": ";
  bool sort_keys = false;
};
std::string DumpJson(const Value& value, const JsonDumpOptions& options);

// Appends code point `cp` as UTF-8.
void AppendUtf8(std::string& out, uint32_t cp);
// Number of Unicode code points in UTF-8 text (Python's len(str)).
size_t Utf8Length(std::string_view s);
// Code points of UTF-8 text, each as its own UTF-8 string (for indexing and slicing str).
std::vector<std::string_view> Utf8Split(std::string_view s);

}  // namespace myriad::tokenizer::jinja
