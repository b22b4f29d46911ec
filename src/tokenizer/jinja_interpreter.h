#pragma once
// Tree-walking evaluation of a parsed template. Internal to the jinja_* files: errors are thrown
// as JinjaError and turned into absl::Status by Template (jinja_template.h). Every resource a
// client can influence is bounded by RenderLimits: output size, string and list sizes, loop
// iterations and macro recursion.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tokenizer/jinja_ast.h"
#include "tokenizer/jinja_value.h"

namespace myriad::tokenizer::jinja {

struct RenderLimits {
  // Rendered text, and any single string or list built while rendering.
  size_t max_output_bytes = 16 << 20;
  // Loop iterations plus macro calls, over the whole render.
  uint64_t max_steps = 1'000'000;
  // Macro calls nested in macro calls.
  int max_call_depth = 64;
  // Lists and dicts nested in one another (client JSON is held to 128 levels on the way in).
  uint32_t max_value_depth = 200;
};

// Arguments of a filter, test, method or function call.
struct Args {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> keyword;

  // Positional argument `index`, else keyword `name`, else nullptr.
  const Value* Get(size_t index, std::string_view name) const;
  // Typed getters that fail with a message naming the function and argument.
  const std::string& String(size_t index, std::string_view name, std::string_view fn) const;
  int64_t Int(size_t index, std::string_view name, int64_t fallback) const;
  bool Bool(size_t index, std::string_view name, bool fallback) const;
  size_t size() const { return positional.size() + keyword.size(); }
};

class Interpreter;

// Variables of one scope: the render globals, a loop iteration, a macro call. Lookup walks out
// to the enclosing scopes, as Jinja2's does; assignment always binds in the innermost one
// (which is why templates need namespace() to carry state out of a loop).
struct Scope {
  Scope* parent = nullptr;
  std::vector<std::pair<std::string, Value>> vars;

  const Value* Find(std::string_view name) const;
  void Set(std::string_view name, Value value);
};

// A callable builtin function (range, namespace, raise_exception...) or method bound to its
// object ("abc".startswith).
struct BuiltinFunction : Callable {
  std::string fn;
  explicit BuiltinFunction(std::string name) : fn(std::move(name)) {}
  std::string_view name() const override { return fn; }
};
struct BoundMethod : Callable {
  Value object;
  std::string method;
  BoundMethod(Value o, std::string m) : object(std::move(o)), method(std::move(m)) {}
  std::string_view name() const override { return method; }
};

class Interpreter {
 public:
  Interpreter(const RenderLimits& limits, std::string* out) : limits_(limits), out_(out) {}

  // Renders `body` with `globals` as the outermost variables.
  void Run(const Body& body, std::vector<std::pair<std::string, Value>> globals);

  // For builtins: call a template value (macro, builtin, bound method).
  Value CallValue(const Value& callee, Args args);
  // For builtins: apply a filter or test by name (map, select, selectattr).
  Value Filter(std::string_view name, const Value& operand, const Args& args);
  bool Test(std::string_view name, const Value& operand, const Args& args);
  // Counts one unit of work (loop iteration, list element built) against max_steps.
  void Step(uint64_t n = 1);
  // Fails when a string or list about to be built would exceed max_output_bytes.
  void CheckSize(size_t size) const;
  // Fails when a value built by the template nests deeper than max_value_depth.
  const Value& CheckDepth(const Value& value) const;
  // namespace() objects of this render: their attributes are cleared when the render ends,
  // which breaks any reference cycle a template made ({% set ns.self = ns %}).
  void Track(const std::shared_ptr<Namespace>& ns) { namespaces_.push_back(ns); }
  const RenderLimits& limits() const { return limits_; }

 private:
  enum class Flow { kNormal, kBreak, kContinue };

  Flow Exec(const Body& body, Scope& scope);
  Flow ExecNode(const Node& node, Scope& scope);
  void ExecFor(const Node& node, Scope& scope);
  void Append(std::string_view text);
  // Renders `body` into a string instead of the output (macro bodies, set blocks).
  std::string Capture(const Body& body, Scope& scope);

  Value Eval(const Expr& e, Scope& scope);
  Value EvalInner(const Expr& e, Scope& scope);
  Value EvalBinary(const Expr& e, Scope& scope);
  Value EvalCompare(const Expr& e, Scope& scope);
  Args EvalArgs(const Expr& e, Scope& scope, size_t first);
  Value EvalFilterChain(const Expr& e, Scope& scope, const Value& input);
  Value CallMacro(const Node& macro, Args args, const Value* caller);

  RenderLimits limits_;
  std::string* out_;
  Scope* root_ = nullptr;
  uint64_t steps_ = 0;
  int call_depth_ = 0;
  std::vector<std::weak_ptr<Namespace>> namespaces_;

  friend struct MacroValue;
  friend struct CallerValue;
};

// Binary arithmetic and comparison with Python semantics (exposed for filters such as sum).
Value BinaryOp(Interpreter& in, std::string_view op, const Value& a, const Value& b);
// Python's a < b for numbers, strings and lists; throws for other types.
bool LessThan(const Value& a, const Value& b);
// Python's "needle in haystack".
bool Contains(const Value& haystack, const Value& needle);
// obj.name as Jinja2 resolves it (Python attribute first, then item); Undefined when absent.
Value GetAttr(const Value& obj, const std::string& name);
// obj[key] as Jinja2 resolves it (item first, then attribute); Undefined when absent.
Value GetItem(const Value& obj, const Value& key);
// The items "for x in value" visits (a dict yields its keys, a string its characters).
List Iterate(const Value& value);

}  // namespace myriad::tokenizer::jinja
