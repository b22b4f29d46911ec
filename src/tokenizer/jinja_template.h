#pragma once
// A compiled Jinja2 template (the subset chat templates use), rendered against JSON-like
// variables. Parsing and rendering never throw: errors come back as absl::Status naming the
// template source, line and column. Parse once, render many times; Render is const and safe to
// call from several threads at once.
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "tokenizer/jinja_ast.h"
#include "tokenizer/jinja_interpreter.h"
#include "tokenizer/jinja_lexer.h"
#include "tokenizer/jinja_value.h"

namespace myriad::tokenizer::jinja {

struct TemplateOptions {
  // HF's apply_chat_template settings (trim_blocks, lstrip_blocks) by default.
  LexOptions lex;
  size_t max_source_bytes = 1 << 20;
  int max_nesting = 128;
};

class Template {
 public:
  static absl::StatusOr<Template> Parse(std::string_view source, std::string source_name,
                                        const TemplateOptions& options = {});

  // Errors: InvalidArgument for a render error ("<source>:<line>:<col>: <what>"), and for
  // raise_exception(message) with exactly the template's message.
  absl::StatusOr<std::string> Render(std::vector<std::pair<std::string, Value>> globals,
                                     const RenderLimits& limits = {}) const;

  const std::string& source_name() const { return source_name_; }

 private:
  Template(std::string source_name, std::shared_ptr<const Body> body)
      : source_name_(std::move(source_name)), body_(std::move(body)) {}

  std::string source_name_;
  std::shared_ptr<const Body> body_;
};

}  // namespace myriad::tokenizer::jinja
