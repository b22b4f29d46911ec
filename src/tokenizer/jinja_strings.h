#pragma once
// Python's str operations on UTF-8 text, for the str methods and string filters. Lengths and
// indexes count code points, whitespace is Unicode whitespace, as in Python. Case mapping covers
// ASCII, Latin-1, Latin Extended-A, Greek and Cyrillic (Python covers all of Unicode).
#include <cstdint>
#include <string>
#include <string_view>

#include "tokenizer/jinja_interpreter.h"
#include "tokenizer/jinja_value.h"

namespace myriad::tokenizer::jinja {

// str.strip/lstrip/rstrip: `chars` of None (or nullptr) strips whitespace.
std::string PyStrip(std::string_view s, const Value* chars, bool left, bool right);
std::string Lower(const std::string& s);
std::string Upper(const std::string& s);
std::string CapitalizeStr(const std::string& s);
std::string TitleStr(const std::string& s);
// str.replace(from, to, count); count < 0 replaces all.
std::string ReplaceStr(Interpreter& in, const std::string& s, const std::string& from,
                       const std::string& to, int64_t count);

bool IsStringMethod(std::string_view method);
Value CallStringMethod(Interpreter& in, const std::string& s, std::string_view method, const Args& args);

}  // namespace myriad::tokenizer::jinja
