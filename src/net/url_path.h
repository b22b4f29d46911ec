#pragma once
// A name (a model, a backend, a namespace) as one URL path segment, and back. Model names carry
// '/' ("meta-llama/Llama-3.1-8B") and may carry '?', '#', '%' or spaces, each of which would
// change what a path means: the sender encodes, the server decodes the segment.
#include <optional>
#include <string>
#include <string_view>

namespace myriad::net {

// Everything but RFC 3986's unreserved characters percent-encoded ("/" -> "%2F").
std::string PathSegment(std::string_view name);
// "%2F" -> "/"; nullopt for a bad escape. Other characters pass as they are, so an unencoded
// name decodes to itself.
std::optional<std::string> PercentDecode(std::string_view text);

}  // namespace myriad::net
