#include "tokenizer/jinja_template.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "tokenizer/jinja_parser.h"

namespace myriad::tokenizer::jinja {
namespace {

std::string Where(const std::string& source_name, const JinjaError& e) {
  if (e.line == 0) return absl::StrCat(source_name, ": ", e.message);
  return absl::StrCat(source_name, ":", e.line, ":", e.col, ": ", e.message);
}

}  // namespace

absl::StatusOr<Template> Template::Parse(std::string_view source, std::string source_name,
                                         const TemplateOptions& options) {
  if (source.size() > options.max_source_bytes) {
    return absl::InvalidArgumentError(absl::StrCat(source_name, ": template is ", source.size(),
                                                   " bytes, more than the limit of ",
                                                   options.max_source_bytes));
  }
  try {
    const std::vector<Token> tokens = Lex(source, options.lex);
    auto body = std::make_shared<const Body>(jinja::Parse(tokens, options.max_nesting));
    return Template(std::move(source_name), std::move(body));
  } catch (const JinjaError& e) {
    return absl::InvalidArgumentError(Where(source_name, e));
  } catch (const std::bad_alloc&) {
    return absl::ResourceExhaustedError(source_name + ": out of memory while parsing the template");
  } catch (const std::exception& e) {
    // Not expected: every error path throws JinjaError. Kept so nothing escapes the module.
    return absl::InternalError(absl::StrCat(source_name, ": ", e.what()));
  }
}

absl::StatusOr<std::string> Template::Render(std::vector<std::pair<std::string, Value>> globals,
                                             const RenderLimits& limits) const {
  std::string out;
  try {
    Interpreter interpreter(limits, &out);
    interpreter.Run(*body_, std::move(globals));
  } catch (const JinjaError& e) {
    if (e.raised) return absl::InvalidArgumentError(e.message);
    return absl::InvalidArgumentError(Where(source_name_, e));
  } catch (const std::bad_alloc&) {
    return absl::ResourceExhaustedError(source_name_ + ": out of memory while rendering");
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat(source_name_, ": ", e.what()));
  }
  return out;
}

}  // namespace myriad::tokenizer::jinja
