#pragma once
// Recursive-descent parser for the Jinja2 subset chat templates use, following Jinja2's own
// grammar and operator precedence (jinja2/parser.py): filters and tests bind tighter than
// arithmetic, "not" looser than comparisons, comparisons chain as in Python.
#include <vector>

#include "tokenizer/jinja_ast.h"
#include "tokenizer/jinja_lexer.h"

namespace myriad::tokenizer::jinja {

// Throws JinjaError with the line and column of the offending token. Nesting (of expressions
// and of blocks) deeper than max_depth is an error, so a hostile template cannot exhaust the
// stack.
Body Parse(const std::vector<Token>& tokens, int max_depth);

}  // namespace myriad::tokenizer::jinja
