#pragma once
// Typed access to tokenizer.json fields whose errors name the field ("pre_tokenizer.type").
#include <string>
#include <string_view>

#include <fmt/format.h>

#include <iterator>
#include <nlohmann/json.hpp>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace myriad::tokenizer {

// Concatenation for messages (Debian's Abseil has its own string_view, so absl::StrCat does not
// take std::string_view).
template <typename... Args>
void Append(std::string* out, const Args&... args) {
  (fmt::format_to(std::back_inserter(*out), "{}", args), ...);
}
template <typename... Args>
std::string Cat(const Args&... args) {
  std::string s;
  Append(&s, args...);
  return s;
}

// The member `key` of object `j` (at `field`), or an error when absent or not a string.
inline absl::StatusOr<std::string> GetString(const nlohmann::json& j, std::string_view key, std::string_view field) {
  if (!j.is_object()) return absl::InvalidArgumentError(Cat(field, ": expected an object"));
  auto it = j.find(key);
  if (it == j.end() || !it->is_string()) {
    return absl::InvalidArgumentError(Cat(field, ".", key, ": expected a string"));
  }
  return it->get<std::string>();
}

inline absl::StatusOr<const nlohmann::json*> GetArray(const nlohmann::json& j, std::string_view key,
                                                      std::string_view field) {
  if (!j.is_object()) return absl::InvalidArgumentError(Cat(field, ": expected an object"));
  auto it = j.find(key);
  if (it == j.end() || !it->is_array()) {
    return absl::InvalidArgumentError(Cat(field, ".", key, ": expected an array"));
  }
  return &*it;
}

// A boolean member; absent or null gives `fallback`.
inline absl::StatusOr<bool> GetBool(const nlohmann::json& j, std::string_view key, std::string_view field,
                                    bool fallback) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return fallback;
  if (!it->is_boolean()) return absl::InvalidArgumentError(Cat(field, ".", key, ": expected true or false"));
  return it->get<bool>();
}

inline absl::Status Unsupported(std::string_view field, std::string_view value) {
  return absl::InvalidArgumentError(Cat(field, " '", value, "' is not supported"));
}

}  // namespace myriad::tokenizer
