#pragma once
// The `normalizer` of tokenizer.json: Unicode normalization forms (ICU) and Sequence.
#include <memory>
#include <string>
#include <string_view>

#include <nlohmann/json_fwd.hpp>

#include "absl/status/statusor.h"

namespace myriad::tokenizer {

class Normalizer {
 public:
  virtual ~Normalizer() = default;
  // The normalized `in`: `in` itself when normalizing leaves it unchanged (most prompts: no
  // copy), else `buffer`, whose contents it replaces. Thread-safe.
  virtual std::string_view Normalize(std::string_view in, std::string& buffer) const = 0;
  virtual std::string Describe() const = 0;
};

// Parses `j` (the value of `field`); a null result means the identity (null, or an empty
// Sequence), which the encoder skips entirely. Unsupported types are errors naming the field.
absl::StatusOr<std::unique_ptr<Normalizer>> ParseNormalizer(const nlohmann::json& j, const std::string& field);

}  // namespace myriad::tokenizer
