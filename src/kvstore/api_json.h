#pragma once
// Request parsing and error answers for the master's JSON API (kvstore/master_server.h): field
// getters that answer 400 naming the field, block-key parsing, and the mapping of the master's
// status codes to HTTP. nlohmann::json is used without exceptions (parse with
// allow_exceptions = false and type checks before every get), per the no-exceptions rule.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/status/status.h"
#include "core/block_hash.h"
#include "net/http.h"

namespace myriad::kvstore::api {

// The error types of the API, in the order of MasterServer's error counters.
enum class ErrorType : int {
  kInvalidRequest,
  kNotFound,
  kConflict,
  kUnavailable,
  kMethodNotAllowed,
  kInternal,
  kUnauthorized,
};
std::string_view ErrorTypeName(ErrorType type);
// The error type of an HTTP status the API answers (kInternal for others).
ErrorType ErrorTypeOfStatus(int status);

net::HttpResponse Error(int status, ErrorType type, std::string_view message,
                        std::string_view param = {});
// 400 NotFound 404, AlreadyExists/FailedPrecondition 409, ResourceExhausted/Unavailable 503...
net::HttpResponse StatusError(const absl::Status& status, std::string_view param = {});
int HttpStatusOf(absl::StatusCode code);

net::HttpResponse Json(int status, const nlohmann::json& body);

// "0x..." hex or decimal, 64 bits.
std::optional<BlockKey> ParseKey(std::string_view text);
std::string FormatKey(BlockKey key);
// The fields of a JSON object body. Each getter returns false after storing a 400 answer that
// names the field in error(); optional getters leave the default when the field is absent.
class Fields {
 public:
  // False (and error() set) when the body is not a JSON object.
  bool Parse(std::string_view body);

  bool String(const char* name, std::string* out);
  bool Uint(const char* name, uint64_t max, uint64_t* out);
  bool OptionalUint(const char* name, uint64_t max, uint64_t* out);
  bool OptionalBool(const char* name, bool* out);
  bool OptionalString(const char* name, std::string* out);
  // An array of at most `max_count` integers, each in [0, max].
  bool OptionalUints(const char* name, size_t max_count, uint64_t max, std::vector<uint64_t>* out);
  // A non-empty array of keys, at most `max` of them.
  bool Keys(const char* name, size_t max, std::vector<BlockKey>* out);
  bool OptionalKeys(const char* name, size_t max, std::vector<BlockKey>* out);
  bool Key(const char* name, BlockKey* out);
  bool OptionalKey(const char* name, BlockKey* out);

  const net::HttpResponse& error() const { return error_; }

 private:
  const nlohmann::json* Find(const char* name, bool required);
  bool Fail(const char* name, std::string message);

  nlohmann::json json_;
  net::HttpResponse error_;
};

}  // namespace myriad::kvstore::api
