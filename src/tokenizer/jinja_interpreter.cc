#include "tokenizer/jinja_interpreter.h"

#include <algorithm>
#include <cmath>

#include "tokenizer/jinja_builtins.h"

namespace myriad::tokenizer::jinja {

const Value* Args::Get(size_t index, std::string_view name) const {
  if (index < positional.size()) return &positional[index];
  for (const auto& [key, value] : keyword) {
    if (key == name) return &value;
  }
  return nullptr;
}

const std::string& Args::String(size_t index, std::string_view name, std::string_view fn) const {
  const Value* v = Get(index, name);
  if (v == nullptr) Fail(std::string(fn) + "() missing argument '" + std::string(name) + "'");
  if (!v->is_string()) {
    Fail(std::string(fn) + "() argument '" + std::string(name) + "' must be str, not " + v->TypeName());
  }
  return v->as_string();
}

int64_t Args::Int(size_t index, std::string_view name, int64_t fallback) const {
  const Value* v = Get(index, name);
  if (v == nullptr || v->is_none()) return fallback;
  if (!v->is_int() && !v->is_bool()) Fail("argument '" + std::string(name) + "' must be an integer");
  return v->as_int();
}

bool Args::Bool(size_t index, std::string_view name, bool fallback) const {
  const Value* v = Get(index, name);
  return v == nullptr ? fallback : v->Truthy();
}

const Value* Scope::Find(std::string_view name) const {
  for (const Scope* s = this; s != nullptr; s = s->parent) {
    for (const auto& [key, value] : s->vars) {
      if (key == name) return &value;
    }
  }
  return nullptr;
}

void Scope::Set(std::string_view name, Value value) {
  for (auto& [key, slot] : vars) {
    if (key == name) {
      slot = std::move(value);
      return;
    }
  }
  vars.emplace_back(std::string(name), std::move(value));
}

// A {% macro %}: the node outlives the render, and the macro runs in a scope under the render
// globals.
struct MacroValue : Callable {
  const Node* node;
  explicit MacroValue(const Node* n) : node(n) {}
  std::string_view name() const override { return node->targets[0]; }
};

// caller() inside a macro invoked by {% call %}. The scope it renders in lives on the C++ stack
// of the call block, so once that block ends the callable refuses to run (a template could
// have stored it in a namespace).
struct CallerValue : Callable {
  const Body* body;
  Scope* scope;
  std::shared_ptr<bool> alive;
  std::string_view name() const override { return "caller"; }
};

// loop.cycle(a, b, ...) of one iteration.
struct LoopCycle : Callable {
  int64_t index0;
  explicit LoopCycle(int64_t i) : index0(i) {}
  std::string_view name() const override { return "cycle"; }
};

void Interpreter::Run(const Body& body, std::vector<std::pair<std::string, Value>> globals) {
  struct Cleanup {
    Interpreter& in;
    ~Cleanup() {
      in.root_ = nullptr;
      for (const auto& weak : in.namespaces_) {
        if (auto ns = weak.lock()) ns->attrs.clear();
      }
    }
  } cleanup{*this};
  Scope root;
  root.vars = std::move(globals);
  root_ = &root;
  Exec(body, root);
}

const Value& Interpreter::CheckDepth(const Value& value) const {
  if (value.depth() > limits_.max_value_depth) {
    Fail("render limit: a value nests deeper than " + std::to_string(limits_.max_value_depth) + " levels");
  }
  return value;
}

void Interpreter::Step(uint64_t n) {
  steps_ += n;
  if (steps_ > limits_.max_steps) {
    Fail("render limit: more than " + std::to_string(limits_.max_steps) +
         " loop iterations, macro calls and list elements");
  }
}

void Interpreter::CheckSize(size_t size) const {
  if (size > limits_.max_output_bytes) {
    Fail("render limit: a value or the output would exceed " +
         std::to_string(limits_.max_output_bytes) + " bytes");
  }
}

void Interpreter::Append(std::string_view text) {
  CheckSize(out_->size() + text.size());
  out_->append(text);
}

std::string Interpreter::Capture(const Body& body, Scope& scope) {
  std::string buffer;
  std::string* saved = out_;
  out_ = &buffer;
  try {
    Exec(body, scope);
  } catch (...) {
    out_ = saved;
    throw;
  }
  out_ = saved;
  return buffer;
}

Interpreter::Flow Interpreter::Exec(const Body& body, Scope& scope) {
  for (const NodePtr& node : body) {
    const Flow flow = ExecNode(*node, scope);
    if (flow != Flow::kNormal) return flow;
  }
  return Flow::kNormal;
}

Interpreter::Flow Interpreter::ExecNode(const Node& node, Scope& scope) {
  try {
    switch (node.kind) {
      case Node::Kind::kText:
        Append(node.text);
        break;
      case Node::Kind::kOutput: {
        const Value v = Eval(*node.expr, scope);
        if (v.is_string()) {
          Append(v.as_string());
        } else {
          Append(v.Str());
        }
        break;
      }
      case Node::Kind::kIf:
        for (size_t i = 0; i < node.bodies.size(); ++i) {
          if (i >= node.conditions.size() || Eval(*node.conditions[i], scope).Truthy()) {
            return Exec(node.bodies[i], scope);
          }
        }
        break;
      case Node::Kind::kFor:
        ExecFor(node, scope);
        break;
      case Node::Kind::kSet: {
        Value value = Eval(*node.expr, scope);
        if (!node.attr.empty()) {
          const Value* target = scope.Find(node.targets[0]);
          if (target == nullptr || !target->is_namespace()) {
            Fail("cannot assign attribute '" + node.attr + "' of '" + node.targets[0] +
                 "': only namespace() objects can be changed");
          }
          Namespace& ns = target->as_namespace();
          ns.depth = std::max(ns.depth, value.depth() + 1);
          CheckDepth(*target);
          Dict& attrs = ns.attrs;
          for (auto& [key, slot] : attrs) {
            if (key == node.attr) {
              slot = std::move(value);
              return Flow::kNormal;
            }
          }
          attrs.emplace_back(node.attr, std::move(value));
        } else if (node.targets.size() == 1) {
          scope.Set(node.targets[0], std::move(value));
        } else {
          List items = Iterate(value);
          if (items.size() != node.targets.size()) {
            Fail("cannot unpack " + std::to_string(items.size()) + " values into " +
                 std::to_string(node.targets.size()) + " names");
          }
          for (size_t i = 0; i < items.size(); ++i) scope.Set(node.targets[i], std::move(items[i]));
        }
        break;
      }
      case Node::Kind::kSetBlock:
        scope.Set(node.targets[0], Value(Capture(node.bodies[0], scope)));
        break;
      case Node::Kind::kMacro:
        scope.Set(node.targets[0], Value(std::shared_ptr<const Callable>(
                                       std::make_shared<MacroValue>(&node))));
        break;
      case Node::Kind::kCallBlock: {
        const Expr& call = *node.expr;
        const Value callee = Eval(*call.args[0], scope);
        if (!callee.is_callable() || dynamic_cast<const MacroValue*>(callee.as_callable().get()) == nullptr) {
          Fail("{% call %} needs a macro");
        }
        Scope caller_scope{&scope, {}};
        auto caller = std::make_shared<CallerValue>();
        caller->body = &node.bodies[0];
        caller->scope = &caller_scope;
        caller->alive = std::make_shared<bool>(true);
        const Value caller_value{std::shared_ptr<const Callable>(caller)};
        Args args = EvalArgs(call, scope, 1);
        Value result;
        try {
          result = CallMacro(*static_cast<const MacroValue&>(*callee.as_callable()).node,
                             std::move(args), &caller_value);
        } catch (...) {
          *caller->alive = false;
          throw;
        }
        *caller->alive = false;
        Append(result.Str());
        break;
      }
      case Node::Kind::kFilterBlock: {
        Scope inner{&scope, {}};
        const Value text(Capture(node.bodies[0], inner));
        Append(EvalFilterChain(*node.expr, scope, text).Str());
        break;
      }
      case Node::Kind::kBreak:
        return Flow::kBreak;
      case Node::Kind::kContinue:
        return Flow::kContinue;
      case Node::Kind::kScope:
        return Exec(node.bodies[0], scope);
    }
  } catch (JinjaError& e) {
    if (e.line == 0) {
      e.line = node.line;
      e.col = node.col;
    }
    throw;
  }
  return Flow::kNormal;
}

void Interpreter::ExecFor(const Node& node, Scope& scope) {
  const Value iterable = Eval(*node.expr, scope);
  List items;
  try {
    items = Iterate(iterable);
  } catch (JinjaError& e) {
    e.line = node.expr->line;
    e.col = node.expr->col;
    throw;
  }
  auto bind = [&](Scope& s, const Value& item) {
    if (node.targets.size() == 1) {
      s.Set(node.targets[0], item);
      return;
    }
    const List parts = Iterate(item);
    if (parts.size() != node.targets.size()) {
      Fail("cannot unpack " + std::to_string(parts.size()) + " values into " +
           std::to_string(node.targets.size()) + " loop variables");
    }
    for (size_t i = 0; i < parts.size(); ++i) s.Set(node.targets[i], parts[i]);
  };
  if (node.filter) {
    // Jinja2 filters before looping, so loop.length and loop.last count only kept items.
    List kept;
    for (const Value& item : items) {
      Step();
      Scope probe{&scope, {}};
      bind(probe, item);
      if (Eval(*node.filter, probe).Truthy()) kept.push_back(item);
    }
    items = std::move(kept);
  }
  const auto n = static_cast<int64_t>(items.size());
  for (int64_t i = 0; i < n; ++i) {
    Step();
    Scope iteration{&scope, {}};
    bind(iteration, items[static_cast<size_t>(i)]);
    Dict loop;
    loop.reserve(12);
    loop.emplace_back("index", Value(i + 1));
    loop.emplace_back("index0", Value(i));
    loop.emplace_back("revindex", Value(n - i));
    loop.emplace_back("revindex0", Value(n - i - 1));
    loop.emplace_back("first", Value(i == 0));
    loop.emplace_back("last", Value(i == n - 1));
    loop.emplace_back("length", Value(n));
    loop.emplace_back("depth", Value(1));
    loop.emplace_back("depth0", Value(0));
    loop.emplace_back("previtem", i > 0 ? items[static_cast<size_t>(i - 1)]
                                        : Value::MakeUndefined("'loop.previtem' is undefined"));
    loop.emplace_back("nextitem", i + 1 < n ? items[static_cast<size_t>(i + 1)]
                                            : Value::MakeUndefined("'loop.nextitem' is undefined"));
    loop.emplace_back("cycle", Value(std::shared_ptr<const Callable>(std::make_shared<LoopCycle>(i))));
    iteration.vars.emplace_back("loop", Value(std::move(loop)));
    if (Exec(node.bodies[0], iteration) == Flow::kBreak) break;
  }
  if (n == 0 && node.bodies.size() > 1) {
    Scope otherwise{&scope, {}};
    Exec(node.bodies[1], otherwise);
  }
}

Value Interpreter::Eval(const Expr& e, Scope& scope) {
  try {
    return EvalInner(e, scope);
  } catch (JinjaError& error) {
    if (error.line == 0) {
      error.line = e.line;
      error.col = e.col;
    }
    throw;
  }
}

Args Interpreter::EvalArgs(const Expr& e, Scope& scope, size_t first) {
  Args args;
  args.positional.reserve(e.args.size() - first);
  for (size_t i = first; i < e.args.size(); ++i) args.positional.push_back(Eval(*e.args[i], scope));
  for (const auto& [key, expr] : e.kwargs) args.keyword.emplace_back(key, Eval(*expr, scope));
  return args;
}

Value Interpreter::EvalFilterChain(const Expr& e, Scope& scope, const Value& input) {
  if (e.kind != Expr::Kind::kFilter) return input;
  const Value operand = EvalFilterChain(*e.args[0], scope, input);
  return Filter(e.name, operand, EvalArgs(e, scope, 1));
}

Value Interpreter::EvalInner(const Expr& e, Scope& scope) {
  switch (e.kind) {
    case Expr::Kind::kLiteral:
      return e.literal;
    case Expr::Kind::kName: {
      if (const Value* v = scope.Find(e.name)) return *v;
      if (IsGlobalFunction(e.name)) {
        return Value(std::shared_ptr<const Callable>(std::make_shared<BuiltinFunction>(e.name)));
      }
      return Value::MakeUndefined("'" + e.name + "' is undefined");
    }
    case Expr::Kind::kList: {
      List list;
      list.reserve(e.args.size());
      for (const ExprPtr& item : e.args) list.push_back(Eval(*item, scope));
      return CheckDepth(e.tuple ? Value::Tuple(std::move(list)) : Value(std::move(list)));
    }
    case Expr::Kind::kDict: {
      Dict dict;
      for (size_t i = 0; i + 1 < e.args.size(); i += 2) {
        const Value key = Eval(*e.args[i], scope);
        if (!key.is_string()) Fail("dict keys must be strings, not " + key.TypeName());
        Value value = Eval(*e.args[i + 1], scope);
        bool replaced = false;
        for (auto& [k, slot] : dict) {
          if (k == key.as_string()) {
            slot = value;
            replaced = true;
          }
        }
        if (!replaced) dict.emplace_back(key.as_string(), std::move(value));
      }
      return CheckDepth(Value(std::move(dict)));
    }
    case Expr::Kind::kAttr:
      return GetAttr(Eval(*e.args[0], scope), e.name);
    case Expr::Kind::kItem:
      return GetItem(Eval(*e.args[0], scope), Eval(*e.args[1], scope));
    case Expr::Kind::kSlice: {
      const Value object = Eval(*e.args[0], scope);
      Value bounds[3];
      for (int i = 0; i < 3; ++i) {
        bounds[i] = e.args[static_cast<size_t>(i) + 1] ? Eval(*e.args[static_cast<size_t>(i) + 1], scope)
                                                       : Value::None();
      }
      return Slice(object, bounds[0], bounds[1], bounds[2]);
    }
    case Expr::Kind::kCall: {
      const Value callee = Eval(*e.args[0], scope);
      return CallValue(callee, EvalArgs(e, scope, 1));
    }
    case Expr::Kind::kFilter: {
      const Value operand = Eval(*e.args[0], scope);
      return Filter(e.name, operand, EvalArgs(e, scope, 1));
    }
    case Expr::Kind::kTest: {
      const Value operand = Eval(*e.args[0], scope);
      return Value(Test(e.name, operand, EvalArgs(e, scope, 1)) != e.negated);
    }
    case Expr::Kind::kUnary: {
      const Value v = Eval(*e.args[0], scope);
      if (e.name == "not") return Value(!v.Truthy());
      if (v.is_undefined()) Fail(v.undefined_hint());
      if (!v.is_number()) Fail("bad operand type for unary " + e.name + ": '" + v.TypeName() + "'");
      if (e.name == "+") return v.is_float() ? v : Value(v.as_int());
      if (v.is_float()) return Value(-v.as_double());
      if (v.as_int() == INT64_MIN) Fail("integer overflow");
      return Value(-v.as_int());
    }
    case Expr::Kind::kBinary:
      return EvalBinary(e, scope);
    case Expr::Kind::kCompare:
      return EvalCompare(e, scope);
    case Expr::Kind::kCondition:
      if (Eval(*e.args[0], scope).Truthy()) return Eval(*e.args[1], scope);
      if (e.args[2]) return Eval(*e.args[2], scope);
      return Value::MakeUndefined("the conditional expression has no else branch");
  }
  Fail("unknown expression");
}

Value Interpreter::EvalBinary(const Expr& e, Scope& scope) {
  Value left = Eval(*e.args[0], scope);
  if (e.name == "and") return left.Truthy() ? Eval(*e.args[1], scope) : left;
  if (e.name == "or") return left.Truthy() ? left : Eval(*e.args[1], scope);
  const Value right = Eval(*e.args[1], scope);
  return BinaryOp(*this, e.name, left, right);
}

Value Interpreter::EvalCompare(const Expr& e, Scope& scope) {
  Value left = Eval(*e.args[0], scope);
  for (size_t i = 0; i < e.ops.size(); ++i) {
    Value right = Eval(*e.args[i + 1], scope);
    const std::string& op = e.ops[i];
    bool result;
    if (op == "==") result = left.Equals(right);
    else if (op == "!=") result = !left.Equals(right);
    else if (op == "<") result = LessThan(left, right);
    else if (op == ">") result = LessThan(right, left);
    else if (op == "<=") result = !LessThan(right, left);
    else if (op == ">=") result = !LessThan(left, right);
    else if (op == "in") result = Contains(right, left);
    else result = !Contains(right, left);
    if (!result) return Value(false);
    left = std::move(right);
  }
  return Value(true);
}

Value Interpreter::CallValue(const Value& callee, Args args) {
  if (callee.is_undefined()) Fail(callee.undefined_hint());
  if (!callee.is_callable()) Fail("'" + callee.TypeName() + "' object is not callable");
  const Callable* c = callee.as_callable().get();
  if (const auto* macro = dynamic_cast<const MacroValue*>(c)) {
    return CallMacro(*macro->node, std::move(args), nullptr);
  }
  if (const auto* caller = dynamic_cast<const CallerValue*>(c)) {
    if (!*caller->alive) Fail("caller() used after its {% call %} block ended");
    if (++call_depth_ > limits_.max_call_depth) {
      --call_depth_;
      Fail("render limit: macro calls nest deeper than " + std::to_string(limits_.max_call_depth));
    }
    Scope inner{caller->scope, {}};
    std::string text;
    try {
      text = Capture(*caller->body, inner);
    } catch (...) {
      --call_depth_;
      throw;
    }
    --call_depth_;
    return Value(std::move(text));
  }
  if (const auto* method = dynamic_cast<const BoundMethod*>(c)) {
    return CallMethod(*this, method->object, method->method, args);
  }
  if (const auto* cycle = dynamic_cast<const LoopCycle*>(c)) {
    if (args.positional.empty()) Fail("loop.cycle() needs at least one argument");
    return args.positional[static_cast<size_t>(cycle->index0) % args.positional.size()];
  }
  if (const auto* fn = dynamic_cast<const BuiltinFunction*>(c)) {
    return CallGlobalFunction(*this, fn->fn, args);
  }
  Fail("object is not callable");
}

Value Interpreter::CallMacro(const Node& macro, Args args, const Value* caller) {
  Step();
  if (++call_depth_ > limits_.max_call_depth) {
    --call_depth_;
    Fail("render limit: macro calls nest deeper than " + std::to_string(limits_.max_call_depth));
  }
  struct Unwind {
    int& depth;
    ~Unwind() { --depth; }
  } unwind{call_depth_};
  Scope scope{root_, {}};
  if (args.positional.size() > macro.params.size()) {
    Fail("macro '" + macro.targets[0] + "' takes " + std::to_string(macro.params.size()) +
         " arguments, got " + std::to_string(args.positional.size()));
  }
  for (size_t i = 0; i < macro.params.size(); ++i) {
    const auto& [param, default_expr] = macro.params[i];
    if (const Value* v = args.Get(i, param)) {
      scope.Set(param, *v);
    } else if (default_expr) {
      scope.Set(param, Eval(*default_expr, scope));
    } else {
      scope.Set(param, Value::MakeUndefined("'" + param + "' is undefined"));
    }
  }
  for (const auto& [key, value] : args.keyword) {
    bool known = false;
    for (const auto& param : macro.params) known = known || param.first == key;
    if (!known && key != "caller") {
      Fail("macro '" + macro.targets[0] + "' has no parameter '" + key + "'");
    }
  }
  if (caller != nullptr) scope.Set("caller", *caller);
  return Value(Capture(macro.bodies[0], scope));
}

Value Interpreter::Filter(std::string_view name, const Value& operand, const Args& args) {
  return ApplyFilter(*this, name, operand, args);
}

bool Interpreter::Test(std::string_view name, const Value& operand, const Args& args) {
  return ApplyTest(*this, name, operand, args);
}

}  // namespace myriad::tokenizer::jinja
