#pragma once
// The parsed form of a template: expressions and statements, each with the line and column it
// came from so that render errors can point at the template source.
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "tokenizer/jinja_value.h"

namespace myriad::tokenizer::jinja {

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

struct Expr {
  enum class Kind {
    kLiteral,   // literal
    kName,      // name
    kList,      // args: items (tuples are lists too)
    kDict,      // kwargs: key expression in args[2i], value in args[2i+1]
    kAttr,      // args[0].name
    kItem,      // args[0][args[1]]
    kSlice,     // args[0][args[1]:args[2]:args[3]], absent bounds are null
    kCall,      // args[0](args[1..], kwargs)
    kFilter,    // args[0] | name(args[1..], kwargs)
    kTest,      // args[0] is [not] name(args[1..])
    kUnary,     // name is "-", "+" or "not"; args[0]
    kBinary,    // name is the operator (+ - * / // % ** ~ and or in "not in"); args[0], args[1]
    kCompare,   // chained: args[0] ops[0] args[1] ops[1] args[2] ...
    kCondition, // args[1] if args[0] else args[2] (args[2] may be null)
  };
  Kind kind = Kind::kLiteral;
  int line = 0;
  int col = 0;
  Value literal;
  std::string name;
  bool negated = false;  // kTest: "is not"
  bool tuple = false;    // kList: written as a tuple, (a, b) or a, b
  std::vector<ExprPtr> args;
  std::vector<std::pair<std::string, ExprPtr>> kwargs;
  std::vector<std::string> ops;  // kCompare
};

struct Node;
using NodePtr = std::unique_ptr<Node>;
using Body = std::vector<NodePtr>;

struct Node {
  enum class Kind {
    kText,       // text
    kOutput,     // {{ expr }}
    kIf,         // conditions[i] guards bodies[i]; a trailing extra body is the else
    kFor,        // for targets in expr [if filter]: bodies[0], else: bodies[1]
    kSet,        // set targets = expr, or set ns.attr (attr non-empty) = expr
    kSetBlock,   // {% set name %}bodies[0]{% endset %}
    kMacro,      // macro name(params with defaults): bodies[0]
    kCallBlock,  // {% call expr %}bodies[0]{% endcall %}: caller() renders the body
    kFilterBlock,  // {% filter expr %}bodies[0]{% endfilter %}: expr is a kFilter on null
    kBreak,
    kContinue,
    kScope,      // bodies[0] rendered as is ({% generation %} of HF's AssistantTracker)
  };
  Kind kind = Kind::kText;
  int line = 0;
  int col = 0;
  std::string text;
  ExprPtr expr;
  ExprPtr filter;  // kFor's "if" clause
  std::vector<ExprPtr> conditions;
  std::vector<Body> bodies;
  std::vector<std::string> targets;
  std::string attr;
  // kMacro: parameter names and default values (null when none).
  std::vector<std::pair<std::string, ExprPtr>> params;
};

}  // namespace myriad::tokenizer::jinja
