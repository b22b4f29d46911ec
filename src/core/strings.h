#pragma once
// Small string helpers. Debian's Abseil has its own string_view type, so Myriad formats with
// fmt and keeps std::string_view in its own interfaces.
#include <string>
#include <string_view>
#include <vector>

namespace myriad {

bool EqualsIgnoreCase(std::string_view a, std::string_view b);
std::string_view StripWhitespace(std::string_view s);
std::string Join(const std::vector<std::string>& parts, std::string_view sep);
// Whether `s` is well-formed UTF-8 (RFC 3629: no overlong forms, no surrogates, at most
// U+10FFFF). Names that reach JSON, Prometheus labels and logs must be.
bool IsValidUtf8(std::string_view s);

}  // namespace myriad
