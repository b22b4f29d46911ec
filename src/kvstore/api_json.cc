#include "kvstore/api_json.h"

#include <fmt/format.h>

#include <cctype>
#include <charconv>

namespace myriad::kvstore::api {

std::string_view ErrorTypeName(ErrorType type) {
  switch (type) {
    case ErrorType::kInvalidRequest: return "invalid_request";
    case ErrorType::kNotFound: return "not_found";
    case ErrorType::kConflict: return "conflict";
    case ErrorType::kUnavailable: return "unavailable";
    case ErrorType::kMethodNotAllowed: return "method_not_allowed";
    case ErrorType::kInternal: return "internal";
    case ErrorType::kUnauthorized: return "unauthorized";
  }
  return "internal";
}

ErrorType ErrorTypeOfStatus(int status) {
  switch (status) {
    case 400: return ErrorType::kInvalidRequest;
    case 401: return ErrorType::kUnauthorized;
    case 404: return ErrorType::kNotFound;
    case 405: return ErrorType::kMethodNotAllowed;
    case 409: return ErrorType::kConflict;
    case 503: return ErrorType::kUnavailable;
    default: return ErrorType::kInternal;
  }
}

net::HttpResponse Error(int status, ErrorType type, std::string_view message,
                        std::string_view param) {
  return net::JsonError(status, ErrorTypeName(type), message, param);
}

int HttpStatusOf(absl::StatusCode code) {
  switch (code) {
    case absl::StatusCode::kOk: return 200;
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kOutOfRange: return 400;
    case absl::StatusCode::kUnauthenticated: return 401;
    case absl::StatusCode::kNotFound: return 404;
    case absl::StatusCode::kAlreadyExists:
    case absl::StatusCode::kFailedPrecondition:
    case absl::StatusCode::kAborted: return 409;
    // No placement possible (too few fault domains, no room) or the like: retry later.
    case absl::StatusCode::kResourceExhausted:
    case absl::StatusCode::kUnavailable: return 503;
    case absl::StatusCode::kDeadlineExceeded: return 504;
    default: return 500;
  }
}

net::HttpResponse StatusError(const absl::Status& status, std::string_view param) {
  const int http = HttpStatusOf(status.code());
  return Error(http, ErrorTypeOfStatus(http), std::string(status.message()), param);
}

net::HttpResponse Json(int status, const nlohmann::json& body) {
  net::HttpResponse r;
  r.status = status;
  r.body = body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  return r;
}

std::optional<BlockKey> ParseKey(std::string_view text) {
  int base = 10;
  if (text.size() > 2 && text[0] == '0' && (text[1] == 'x' || text[1] == 'X')) {
    text.remove_prefix(2);
    base = 16;
  }
  BlockKey key = 0;
  const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), key, base);
  if (text.empty() || ec != std::errc() || ptr != text.data() + text.size()) return std::nullopt;
  return key;
}

std::string FormatKey(BlockKey key) { return fmt::format("0x{:016x}", key); }

namespace {

// The API's bodies nest three levels at most. Deeper documents are refused before parsing:
// the parser itself is iterative, but other code walking a value (dump) recurses, and a
// megabyte of '[' would overflow the stack of an io thread.
constexpr int kMaxDepth = 16;

bool TooDeep(std::string_view body) {
  int depth = 0;
  bool in_string = false, escaped = false;
  for (char c : body) {
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > kMaxDepth) return true;
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return false;
}

// A value in an error message: strings quoted and cut short, others by type, never dumped
// whole (a client's value can be large).
std::string Describe(const nlohmann::json& v) {
  if (v.is_string()) {
    const std::string& s = v.get_ref<const std::string&>();
    if (s.size() <= 40) return fmt::format("\"{}\"", s);
    return fmt::format("\"{}...\" ({} bytes)", s.substr(0, 40), s.size());
  }
  if (v.is_number_integer() || v.is_number_float() || v.is_boolean()) return v.dump();
  return fmt::format("a JSON {}", v.type_name());
}

}  // namespace

bool Fields::Parse(std::string_view body) {
  if (TooDeep(body)) {
    error_ = Error(400, ErrorType::kInvalidRequest,
                   fmt::format("the request body nests deeper than {} levels", kMaxDepth));
    return false;
  }
  json_ = nlohmann::json::parse(body.begin(), body.end(), nullptr, /*allow_exceptions=*/false);
  if (json_.is_discarded()) {
    error_ = Error(400, ErrorType::kInvalidRequest, "the request body is not valid JSON");
    return false;
  }
  if (!json_.is_object()) {
    error_ = Error(400, ErrorType::kInvalidRequest, "the request body must be a JSON object");
    return false;
  }
  return true;
}

bool Fields::Fail(const char* name, std::string message) {
  error_ = Error(400, ErrorType::kInvalidRequest, message, name);
  return false;
}

const nlohmann::json* Fields::Find(const char* name, bool required) {
  auto it = json_.find(name);
  if (it == json_.end() || it->is_null()) {
    if (required) Fail(name, fmt::format("missing field '{}'", name));
    return nullptr;
  }
  return &*it;
}

bool Fields::String(const char* name, std::string* out) {
  const nlohmann::json* v = Find(name, true);
  if (v == nullptr) return false;
  if (!v->is_string() || v->get_ref<const std::string&>().empty()) {
    return Fail(name, fmt::format("field '{}' must be a non-empty string", name));
  }
  *out = v->get<std::string>();
  return true;
}

bool Fields::OptionalString(const char* name, std::string* out) {
  if (Find(name, false) == nullptr) return true;
  return String(name, out);
}

bool Fields::Uint(const char* name, uint64_t max, uint64_t* out) {
  const nlohmann::json* v = Find(name, true);
  if (v == nullptr) return false;
  if (!v->is_number_unsigned() || v->get<uint64_t>() > max) {
    return Fail(name, fmt::format("field '{}' must be an integer in [0, {}]", name, max));
  }
  *out = v->get<uint64_t>();
  return true;
}

bool Fields::OptionalUint(const char* name, uint64_t max, uint64_t* out) {
  if (Find(name, false) == nullptr) return true;
  return Uint(name, max, out);
}

bool Fields::OptionalUints(const char* name, size_t max_count, uint64_t max,
                           std::vector<uint64_t>* out) {
  const nlohmann::json* v = Find(name, false);
  if (v == nullptr) return true;
  if (!v->is_array() || v->size() > max_count) {
    return Fail(name, fmt::format("field '{}' must be an array of at most {} integers", name, max_count));
  }
  for (const nlohmann::json& e : *v) {
    if (!e.is_number_unsigned() || e.get<uint64_t>() > max) {
      return Fail(name, fmt::format("field '{}' must hold integers in [0, {}]", name, max));
    }
    out->push_back(e.get<uint64_t>());
  }
  return true;
}

bool Fields::OptionalBool(const char* name, bool* out) {
  const nlohmann::json* v = Find(name, false);
  if (v == nullptr) return true;
  if (!v->is_boolean()) return Fail(name, fmt::format("field '{}' must be true or false", name));
  *out = v->get<bool>();
  return true;
}

namespace {

std::optional<BlockKey> KeyOf(const nlohmann::json& v) {
  if (v.is_number_unsigned()) return v.get<uint64_t>();
  if (v.is_string()) return ParseKey(v.get_ref<const std::string&>());
  return std::nullopt;
}

}  // namespace

bool Fields::Key(const char* name, BlockKey* out) {
  const nlohmann::json* v = Find(name, true);
  if (v == nullptr) return false;
  std::optional<BlockKey> key = KeyOf(*v);
  if (!key) {
    return Fail(name, fmt::format("field '{}' must be a 64-bit key: a decimal or 0x-prefixed hex "
                                  "string, or an unsigned integer",
                                  name));
  }
  *out = *key;
  return true;
}

bool Fields::OptionalKey(const char* name, BlockKey* out) {
  if (Find(name, false) == nullptr) return true;
  return Key(name, out);
}

bool Fields::OptionalKeys(const char* name, size_t max, std::vector<BlockKey>* out) {
  if (Find(name, false) == nullptr) return true;
  return Keys(name, max, out);
}

bool Fields::Keys(const char* name, size_t max, std::vector<BlockKey>* out) {
  const nlohmann::json* v = Find(name, true);
  if (v == nullptr) return false;
  if (!v->is_array() || v->empty()) {
    return Fail(name, fmt::format("field '{}' must be a non-empty array of keys", name));
  }
  if (v->size() > max) {
    return Fail(name, fmt::format("field '{}' has {} keys, more than the {} allowed per request",
                                  name, v->size(), max));
  }
  out->clear();
  out->reserve(v->size());
  for (size_t i = 0; i < v->size(); ++i) {
    std::optional<BlockKey> key = KeyOf((*v)[i]);
    if (!key) {
      return Fail(name, fmt::format("{}[{}]: {} is not a 64-bit key (a decimal or 0x-prefixed hex "
                                    "string, or an unsigned integer)",
                                    name, i, Describe((*v)[i])));
    }
    out->push_back(*key);
  }
  return true;
}

}  // namespace myriad::kvstore::api
