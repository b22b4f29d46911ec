#include "tokenizer/jinja_parser.h"

#include <algorithm>
#include <initializer_list>
#include <string_view>

namespace myriad::tokenizer::jinja {
namespace {

std::string Describe(const Token& t) {
  switch (t.type) {
    case TokenType::kText: return "template text";
    case TokenType::kVarBegin: return "'{{'";
    case TokenType::kVarEnd: return "'}}'";
    case TokenType::kBlockBegin: return "'{%'";
    case TokenType::kBlockEnd: return "'%}'";
    case TokenType::kName: return "'" + t.text + "'";
    case TokenType::kString: return "a string";
    case TokenType::kInt:
    case TokenType::kFloat: return "number " + t.text;
    case TokenType::kOp: return "'" + t.text + "'";
    case TokenType::kEnd: return "end of template";
  }
  return "?";
}

class Parser {
 public:
  Parser(const std::vector<Token>& tokens, int max_depth) : tokens_(tokens), max_depth_(max_depth) {}

  Body ParseTemplate() {
    std::string end;
    return ParseBody({}, &end, tokens_.front());
  }

 private:
  // Guards recursion: every nested expression or block passes through one.
  class DepthGuard {
   public:
    DepthGuard(Parser& p, const Token& at) : p_(p) {
      if (++p_.depth_ > p_.max_depth_) {
        p_.FailAt(at, "template nests deeper than " + std::to_string(p_.max_depth_) + " levels");
      }
    }
    ~DepthGuard() { --p_.depth_; }
    DepthGuard(const DepthGuard&) = delete;
    DepthGuard& operator=(const DepthGuard&) = delete;

   private:
    Parser& p_;
  };

  // Guards operator and postfix chains (a + b + c, x|f|g, a.b.c): each link deepens the tree
  // that rendering walks recursively, so links count against max_depth like nesting does.
  class ChainGuard {
   public:
    explicit ChainGuard(Parser& p) : p_(p) {}
    ~ChainGuard() { p_.depth_ -= links_; }
    ChainGuard(const ChainGuard&) = delete;
    ChainGuard& operator=(const ChainGuard&) = delete;
    void Link(const Token& at) {
      ++links_;
      if (++p_.depth_ > p_.max_depth_) {
        p_.FailAt(at, "template nests deeper than " + std::to_string(p_.max_depth_) + " levels");
      }
    }

   private:
    Parser& p_;
    int links_ = 0;
  };

  const Token& Peek(size_t ahead = 0) const {
    return tokens_[std::min(pos_ + ahead, tokens_.size() - 1)];
  }
  const Token& Next() {
    const Token& t = Peek();
    if (pos_ < tokens_.size() - 1) ++pos_;
    return t;
  }
  bool IsOp(std::string_view op, size_t ahead = 0) const {
    return Peek(ahead).type == TokenType::kOp && Peek(ahead).text == op;
  }
  bool IsName(std::string_view name, size_t ahead = 0) const {
    return Peek(ahead).type == TokenType::kName && Peek(ahead).text == name;
  }
  bool SkipOp(std::string_view op) {
    if (!IsOp(op)) return false;
    Next();
    return true;
  }
  bool SkipName(std::string_view name) {
    if (!IsName(name)) return false;
    Next();
    return true;
  }

  [[noreturn]] void FailAt(const Token& t, std::string message) const {
    throw JinjaError{std::move(message), t.line, t.col};
  }
  void ExpectOp(std::string_view op) {
    if (!SkipOp(op)) FailAt(Peek(), "expected '" + std::string(op) + "', found " + Describe(Peek()));
  }
  void Expect(TokenType type, std::string_view what) {
    if (Peek().type != type) FailAt(Peek(), "expected " + std::string(what) + ", found " + Describe(Peek()));
    Next();
  }
  // "%}" that opens a body; Jinja2 also accepts "{% if x: %}" there.
  void ExpectBodyStart() {
    SkipOp(":");
    Expect(TokenType::kBlockEnd, "'%}'");
  }

  std::string ExpectName(std::string_view what) {
    if (Peek().type != TokenType::kName) {
      FailAt(Peek(), "expected " + std::string(what) + ", found " + Describe(Peek()));
    }
    return Next().text;
  }

  static ExprPtr Make(Expr::Kind kind, const Token& at) {
    auto e = std::make_unique<Expr>();
    e->kind = kind;
    e->line = at.line;
    e->col = at.col;
    return e;
  }
  static NodePtr MakeNode(Node::Kind kind, const Token& at) {
    auto n = std::make_unique<Node>();
    n->kind = kind;
    n->line = at.line;
    n->col = at.col;
    return n;
  }

  // Parses nodes until a block tag whose keyword is in `ends`; consumes "{% keyword" and
  // stores the keyword in *end. `opener` is the tag being closed, for the error message.
  Body ParseBody(std::initializer_list<std::string_view> ends, std::string* end, const Token& opener) {
    DepthGuard guard(*this, opener);
    Body body;
    while (true) {
      const Token& t = Peek();
      switch (t.type) {
        case TokenType::kEnd:
          if (ends.size() == 0) return body;
          FailAt(opener, "block opened here is never closed: expected '{% " +
                             std::string(*(ends.end() - 1)) + " %}' before the end of the template");
        case TokenType::kText: {
          auto node = MakeNode(Node::Kind::kText, t);
          node->text = Next().text;
          body.push_back(std::move(node));
          break;
        }
        case TokenType::kVarBegin: {
          auto node = MakeNode(Node::Kind::kOutput, Next());
          node->expr = ParseTuple(true);
          Expect(TokenType::kVarEnd, "'}}'");
          body.push_back(std::move(node));
          break;
        }
        case TokenType::kBlockBegin: {
          const Token& keyword = Peek(1);
          if (keyword.type == TokenType::kName &&
              std::find(ends.begin(), ends.end(), keyword.text) != ends.end()) {
            Next();
            *end = Next().text;
            return body;
          }
          Next();
          body.push_back(ParseStatement());
          break;
        }
        default:
          FailAt(t, "unexpected " + Describe(t));
      }
    }
  }

  NodePtr ParseStatement() {
    const Token& keyword = Peek();
    const std::string name = ExpectName("a statement keyword");
    if (name == "if") return ParseIf(keyword);
    if (name == "for") return ParseFor(keyword);
    if (name == "set") return ParseSet(keyword);
    if (name == "macro") return ParseMacro(keyword);
    if (name == "call") return ParseCallBlock(keyword);
    if (name == "filter") return ParseFilterBlock(keyword);
    if (name == "break" || name == "continue") {
      auto node = MakeNode(name == "break" ? Node::Kind::kBreak : Node::Kind::kContinue, keyword);
      Expect(TokenType::kBlockEnd, "'%}'");
      return node;
    }
    if (name == "generation") {
      auto node = MakeNode(Node::Kind::kScope, keyword);
      ExpectBodyStart();
      std::string end;
      node->bodies.push_back(ParseBody({"endgeneration"}, &end, keyword));
      Expect(TokenType::kBlockEnd, "'%}'");
      return node;
    }
    if (name.starts_with("end") || name == "elif" || name == "else") {
      FailAt(keyword, "unexpected '{% " + name + " %}' with no open block it could close");
    }
    FailAt(keyword, "unknown or unsupported statement '" + name + "'");
  }

  NodePtr ParseIf(const Token& keyword) {
    auto node = MakeNode(Node::Kind::kIf, keyword);
    while (true) {
      // Jinja2 parses if/elif conditions without the "a if b else c" form.
      node->conditions.push_back(ParseTuple(false));
      ExpectBodyStart();
      std::string end;
      node->bodies.push_back(ParseBody({"elif", "else", "endif"}, &end, keyword));
      if (end == "elif") continue;
      if (end == "else") {
        ExpectBodyStart();
        node->bodies.push_back(ParseBody({"endif"}, &end, keyword));
      }
      Expect(TokenType::kBlockEnd, "'%}'");
      return node;
    }
  }

  std::vector<std::string> ParseTargets() {
    std::vector<std::string> targets;
    const bool paren = SkipOp("(");
    do {
      targets.push_back(ExpectName("a variable name"));
    } while (SkipOp(","));
    if (paren) ExpectOp(")");
    return targets;
  }

  NodePtr ParseFor(const Token& keyword) {
    auto node = MakeNode(Node::Kind::kFor, keyword);
    node->targets = ParseTargets();
    if (!SkipName("in")) FailAt(Peek(), "expected 'in' in for loop, found " + Describe(Peek()));
    node->expr = ParseTuple(false);
    if (SkipName("if")) node->filter = ParseExpression(true);
    if (IsName("recursive")) FailAt(Peek(), "recursive for loops are not supported");
    ExpectBodyStart();
    std::string end;
    node->bodies.push_back(ParseBody({"else", "endfor"}, &end, keyword));
    if (end == "else") {
      ExpectBodyStart();
      node->bodies.push_back(ParseBody({"endfor"}, &end, keyword));
    }
    Expect(TokenType::kBlockEnd, "'%}'");
    return node;
  }

  NodePtr ParseSet(const Token& keyword) {
    auto node = MakeNode(Node::Kind::kSet, keyword);
    if (Peek().type == TokenType::kName && IsOp(".", 1)) {
      node->targets.push_back(Next().text);
      Next();
      node->attr = ExpectName("an attribute name");
    } else {
      node->targets = ParseTargets();
    }
    if (SkipOp("=")) {
      node->expr = ParseTuple(true);
      Expect(TokenType::kBlockEnd, "'%}'");
      return node;
    }
    if (!node->attr.empty() || node->targets.size() != 1) {
      FailAt(Peek(), "expected '=' in set, found " + Describe(Peek()));
    }
    node->kind = Node::Kind::kSetBlock;
    ExpectBodyStart();
    std::string end;
    node->bodies.push_back(ParseBody({"endset"}, &end, keyword));
    Expect(TokenType::kBlockEnd, "'%}'");
    return node;
  }

  void ParseParams(Node& node) {
    ExpectOp("(");
    while (!IsOp(")")) {
      std::string param = ExpectName("a parameter name");
      ExprPtr default_value;
      if (SkipOp("=")) default_value = ParseExpression(true);
      node.params.emplace_back(std::move(param), std::move(default_value));
      if (!SkipOp(",")) break;
    }
    ExpectOp(")");
  }

  NodePtr ParseMacro(const Token& keyword) {
    auto node = MakeNode(Node::Kind::kMacro, keyword);
    node->targets.push_back(ExpectName("a macro name"));
    ParseParams(*node);
    ExpectBodyStart();
    std::string end;
    node->bodies.push_back(ParseBody({"endmacro"}, &end, keyword));
    if (Peek().type == TokenType::kName) Next();  // {% endmacro name %}
    Expect(TokenType::kBlockEnd, "'%}'");
    return node;
  }

  NodePtr ParseCallBlock(const Token& keyword) {
    auto node = MakeNode(Node::Kind::kCallBlock, keyword);
    if (IsOp("(")) ParseParams(*node);
    node->expr = ParseExpression(true);
    if (node->expr->kind != Expr::Kind::kCall) FailAt(keyword, "{% call %} needs a macro call");
    ExpectBodyStart();
    std::string end;
    node->bodies.push_back(ParseBody({"endcall"}, &end, keyword));
    Expect(TokenType::kBlockEnd, "'%}'");
    return node;
  }

  NodePtr ParseFilterBlock(const Token& keyword) {
    auto node = MakeNode(Node::Kind::kFilterBlock, keyword);
    auto placeholder = Make(Expr::Kind::kLiteral, keyword);
    placeholder->literal = Value::None();
    node->expr = ParseFilter(std::move(placeholder), /*after_pipe=*/true);
    ChainGuard chain(*this);
    while (IsOp("|")) {
      chain.Link(Peek());
      node->expr = ParseFilter(std::move(node->expr));
    }
    ExpectBodyStart();
    std::string end;
    node->bodies.push_back(ParseBody({"endfilter"}, &end, keyword));
    Expect(TokenType::kBlockEnd, "'%}'");
    return node;
  }

  // Expressions, loosest binding first.

  ExprPtr ParseTuple(bool with_condexpr) {
    const Token& start = Peek();
    ExprPtr first = ParseExpression(with_condexpr);
    if (!IsOp(",")) return first;
    auto tuple = Make(Expr::Kind::kList, start);
    tuple->tuple = true;
    tuple->args.push_back(std::move(first));
    while (SkipOp(",")) {
      if (Peek().type == TokenType::kBlockEnd || Peek().type == TokenType::kVarEnd || IsOp(")")) break;
      tuple->args.push_back(ParseExpression(with_condexpr));
    }
    return tuple;
  }

  ExprPtr ParseExpression(bool with_condexpr) {
    DepthGuard guard(*this, Peek());
    return with_condexpr ? ParseCondExpr() : ParseOr();
  }

  ExprPtr ParseCondExpr() {
    ChainGuard chain(*this);
    ExprPtr expr = ParseOr();
    while (IsName("if")) {
      const Token& at = Next();
      chain.Link(at);
      auto cond = Make(Expr::Kind::kCondition, at);
      cond->args.push_back(ParseOr());
      cond->args.push_back(std::move(expr));
      cond->args.push_back(SkipName("else") ? ParseCondExpr() : nullptr);
      expr = std::move(cond);
    }
    return expr;
  }

  ExprPtr Binary(const Token& at, std::string op, ExprPtr left, ExprPtr right) {
    auto e = Make(Expr::Kind::kBinary, at);
    e->name = std::move(op);
    e->args.push_back(std::move(left));
    e->args.push_back(std::move(right));
    return e;
  }

  ExprPtr ParseOr() {
    ChainGuard chain(*this);
    ExprPtr left = ParseAnd();
    while (IsName("or")) {
      const Token& at = Next();
      chain.Link(at);
      left = Binary(at, "or", std::move(left), ParseAnd());
    }
    return left;
  }

  ExprPtr ParseAnd() {
    ChainGuard chain(*this);
    ExprPtr left = ParseNot();
    while (IsName("and")) {
      const Token& at = Next();
      chain.Link(at);
      left = Binary(at, "and", std::move(left), ParseNot());
    }
    return left;
  }

  ExprPtr ParseNot() {
    if (IsName("not")) {
      const Token& at = Next();
      DepthGuard guard(*this, at);
      auto e = Make(Expr::Kind::kUnary, at);
      e->name = "not";
      e->args.push_back(ParseNot());
      return e;
    }
    return ParseCompare();
  }

  ExprPtr ParseCompare() {
    const Token& start = Peek();
    ExprPtr first = ParseMath1();
    ExprPtr cmp;
    while (true) {
      std::string op;
      const Token& t = Peek();
      if (t.type == TokenType::kOp &&
          (t.text == "==" || t.text == "!=" || t.text == "<" || t.text == ">" || t.text == "<=" ||
           t.text == ">=")) {
        op = t.text;
        Next();
      } else if (IsName("in")) {
        op = "in";
        Next();
      } else if (IsName("not") && IsName("in", 1)) {
        op = "not in";
        Next();
        Next();
      } else {
        break;
      }
      if (!cmp) {
        cmp = Make(Expr::Kind::kCompare, start);
        cmp->args.push_back(std::move(first));
      }
      cmp->ops.push_back(std::move(op));
      cmp->args.push_back(ParseMath1());
    }
    return cmp ? std::move(cmp) : std::move(first);
  }

  ExprPtr ParseMath1() {
    ChainGuard chain(*this);
    ExprPtr left = ParseConcat();
    while (IsOp("+") || IsOp("-")) {
      const Token& at = Next();
      chain.Link(at);
      left = Binary(at, at.text, std::move(left), ParseConcat());
    }
    return left;
  }

  ExprPtr ParseConcat() {
    ChainGuard chain(*this);
    ExprPtr left = ParseMath2();
    while (IsOp("~")) {
      const Token& at = Next();
      chain.Link(at);
      left = Binary(at, "~", std::move(left), ParseMath2());
    }
    return left;
  }

  ExprPtr ParseMath2() {
    ChainGuard chain(*this);
    ExprPtr left = ParsePow();
    while (IsOp("*") || IsOp("/") || IsOp("//") || IsOp("%")) {
      const Token& at = Next();
      chain.Link(at);
      left = Binary(at, at.text, std::move(left), ParsePow());
    }
    return left;
  }

  ExprPtr ParsePow() {
    ChainGuard chain(*this);
    ExprPtr left = ParseUnary(true);
    while (IsOp("**")) {
      const Token& at = Next();
      chain.Link(at);
      left = Binary(at, "**", std::move(left), ParseUnary(true));
    }
    return left;
  }

  ExprPtr ParseUnary(bool with_filter) {
    const Token& at = Peek();
    DepthGuard guard(*this, at);
    ExprPtr node;
    if (IsOp("-") || IsOp("+")) {
      Next();
      node = Make(Expr::Kind::kUnary, at);
      node->name = at.text;
      node->args.push_back(ParseUnary(false));
    } else {
      node = ParsePrimary();
    }
    node = ParsePostfix(std::move(node));
    if (with_filter) node = ParseFilterExpr(std::move(node));
    return node;
  }

  ExprPtr ParsePrimary() {
    const Token& t = Peek();
    switch (t.type) {
      case TokenType::kName: {
        Next();
        auto e = Make(Expr::Kind::kLiteral, t);
        if (t.text == "true" || t.text == "True") e->literal = Value(true);
        else if (t.text == "false" || t.text == "False") e->literal = Value(false);
        else if (t.text == "none" || t.text == "None") e->literal = Value::None();
        else {
          e->kind = Expr::Kind::kName;
          e->name = t.text;
        }
        return e;
      }
      case TokenType::kString: {
        auto e = Make(Expr::Kind::kLiteral, t);
        std::string s;
        while (Peek().type == TokenType::kString) s += Next().text;  // "a" "b" is "ab"
        e->literal = Value(std::move(s));
        return e;
      }
      case TokenType::kInt:
      case TokenType::kFloat: {
        Next();
        auto e = Make(Expr::Kind::kLiteral, t);
        e->literal = t.type == TokenType::kInt ? Value(t.int_value) : Value(t.float_value);
        return e;
      }
      case TokenType::kOp:
        if (t.text == "(") {
          Next();
          if (SkipOp(")")) {
            auto empty = Make(Expr::Kind::kList, t);
            empty->tuple = true;
            return empty;
          }
          ExprPtr inner = ParseTuple(true);
          ExpectOp(")");
          return inner;
        }
        if (t.text == "[") {
          Next();
          auto list = Make(Expr::Kind::kList, t);
          while (!IsOp("]")) {
            list->args.push_back(ParseExpression(true));
            if (!SkipOp(",")) break;
          }
          ExpectOp("]");
          return list;
        }
        if (t.text == "{") {
          Next();
          auto dict = Make(Expr::Kind::kDict, t);
          while (!IsOp("}")) {
            dict->args.push_back(ParseExpression(true));
            ExpectOp(":");
            dict->args.push_back(ParseExpression(true));
            if (!SkipOp(",")) break;
          }
          ExpectOp("}");
          return dict;
        }
        break;
      default:
        break;
    }
    FailAt(t, "unexpected " + Describe(t) + " where an expression was expected");
  }

  ExprPtr ParsePostfix(ExprPtr node) {
    ChainGuard chain(*this);
    while (true) {
      const Token& at = Peek();
      if (IsOp(".") || IsOp("[") || IsOp("(")) chain.Link(at);
      if (IsOp(".")) {
        Next();
        if (Peek().type == TokenType::kInt) {
          auto item = Make(Expr::Kind::kItem, at);
          auto index = Make(Expr::Kind::kLiteral, Peek());
          index->literal = Value(Next().int_value);
          item->args.push_back(std::move(node));
          item->args.push_back(std::move(index));
          node = std::move(item);
          continue;
        }
        auto attr = Make(Expr::Kind::kAttr, at);
        attr->name = ExpectName("an attribute name after '.'");
        attr->args.push_back(std::move(node));
        node = std::move(attr);
      } else if (IsOp("[")) {
        Next();
        node = ParseSubscript(std::move(node), at);
        ExpectOp("]");
      } else if (IsOp("(")) {
        node = ParseCall(std::move(node));
      } else {
        return node;
      }
    }
  }

  ExprPtr ParseSubscript(ExprPtr object, const Token& at) {
    ExprPtr start;
    if (IsOp("]") || !IsOp(":")) {
      // x[], x[a] and x[a, b] (the last two index by a tuple: Undefined, as in Jinja2).
      if (IsOp("]")) {
        start = Make(Expr::Kind::kList, at);
        start->tuple = true;
      } else {
        start = ParseTuple(true);
      }
      if (!IsOp(":")) {
        auto item = Make(Expr::Kind::kItem, at);
        item->args.push_back(std::move(object));
        item->args.push_back(std::move(start));
        return item;
      }
    }
    auto slice = Make(Expr::Kind::kSlice, at);
    slice->args.push_back(std::move(object));
    slice->args.push_back(std::move(start));
    ExpectOp(":");
    slice->args.push_back(IsOp("]") || IsOp(":") ? nullptr : ParseExpression(true));
    if (SkipOp(":")) {
      slice->args.push_back(IsOp("]") ? nullptr : ParseExpression(true));
    } else {
      slice->args.push_back(nullptr);
    }
    return slice;
  }

  // Arguments "(a, b, key=value)" into e->args (after what is already there) and e->kwargs.
  void ParseArgs(Expr& e) {
    ExpectOp("(");
    while (!IsOp(")")) {
      if (IsOp("*") || IsOp("**")) FailAt(Peek(), "*args and **kwargs are not supported");
      if (Peek().type == TokenType::kName && IsOp("=", 1)) {
        std::string key = Next().text;
        Next();
        e.kwargs.emplace_back(std::move(key), ParseExpression(true));
      } else {
        if (!e.kwargs.empty()) FailAt(Peek(), "positional argument after keyword argument");
        e.args.push_back(ParseExpression(true));
      }
      if (!SkipOp(",")) break;
    }
    ExpectOp(")");
  }

  ExprPtr ParseCall(ExprPtr callee) {
    auto call = Make(Expr::Kind::kCall, Peek());
    call->args.push_back(std::move(callee));
    ParseArgs(*call);
    return call;
  }

  std::string ParseDottedName(std::string_view what) {
    std::string name = ExpectName(what);
    while (IsOp(".") && Peek(1).type == TokenType::kName) {
      Next();
      name += "." + Next().text;
    }
    return name;
  }

  // A filter application; after_pipe when the "|" is implied ({% filter name %}).
  ExprPtr ParseFilter(ExprPtr operand, bool after_pipe = false) {
    const Token& at = Peek();
    if (!after_pipe) ExpectOp("|");
    auto f = Make(Expr::Kind::kFilter, at);
    f->name = ParseDottedName("a filter name after '|'");
    f->args.push_back(std::move(operand));
    if (IsOp("(")) ParseArgs(*f);
    return f;
  }

  ExprPtr ParseFilterExpr(ExprPtr node) {
    ChainGuard chain(*this);
    while (true) {
      if (IsOp("|") || IsName("is") || IsOp("(")) chain.Link(Peek());
      if (IsOp("|")) {
        node = ParseFilter(std::move(node));
      } else if (IsName("is")) {
        const Token& at = Next();
        auto test = Make(Expr::Kind::kTest, at);
        test->negated = SkipName("not");
        test->name = ParseDottedName("a test name after 'is'");
        test->args.push_back(std::move(node));
        const Token& t = Peek();
        if (IsOp("(")) {
          ParseArgs(*test);
        } else if ((t.type == TokenType::kName && t.text != "else" && t.text != "or" &&
                    t.text != "and" && t.text != "if" && t.text != "is" && t.text != "in" &&
                    t.text != "not") ||
                   t.type == TokenType::kString || t.type == TokenType::kInt ||
                   t.type == TokenType::kFloat || IsOp("[") || IsOp("{")) {
          // "x is divisibleby 3": one argument without parentheses.
          test->args.push_back(ParsePostfix(ParsePrimary()));
        }
        node = std::move(test);
      } else if (IsOp("(")) {
        node = ParseCall(std::move(node));
      } else {
        return node;
      }
    }
  }

  const std::vector<Token>& tokens_;
  size_t pos_ = 0;
  int depth_ = 0;
  int max_depth_;
};

}  // namespace

Body Parse(const std::vector<Token>& tokens, int max_depth) {
  return Parser(tokens, max_depth).ParseTemplate();
}

}  // namespace myriad::tokenizer::jinja
