#pragma once
// Jinja2's builtin filters, tests and global functions, and the str and dict methods templates
// call ("text".startswith, message.get), limited to what chat templates use. Semantics follow
// Jinja2 3.1 and Python; the deviations are noted where they are implemented.
#include <string_view>

#include "tokenizer/jinja_interpreter.h"
#include "tokenizer/jinja_value.h"

namespace myriad::tokenizer::jinja {

// range, namespace, dict, raise_exception, strftime_now (the last two are HF's additions).
bool IsGlobalFunction(std::string_view name);
Value CallGlobalFunction(Interpreter& in, std::string_view name, const Args& args);

// Whether obj.method resolves to a method (Python attributes win over dict keys on ".").
bool HasMethod(const Value& object, std::string_view method);
Value CallMethod(Interpreter& in, const Value& object, std::string_view method, const Args& args);

Value ApplyFilter(Interpreter& in, std::string_view name, const Value& operand, const Args& args);
bool ApplyTest(Interpreter& in, std::string_view name, const Value& operand, const Args& args);

// object[start:stop:step] of a list or str, with Python's index rules; bounds may be None.
Value Slice(const Value& object, const Value& start, const Value& stop, const Value& step);

}  // namespace myriad::tokenizer::jinja
