#include "gateway/etcd_codec.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "absl/strings/escaping.h"
#include "core/strings.h"
#include "net/json_text.h"

namespace myriad::gateway {

using json = nlohmann::json;

std::string EncodeRegistration(const BackendConfig& b) {
  json j = {{"name", b.name}, {"url", b.url}, {"role", std::string(RoleName(b.role))},
            {"model", b.model}, {"dp_ranks", b.dp_ranks}};
  if (!b.kv_events.empty()) j["kv_events"] = b.kv_events;
  if (!b.kv_replay.empty()) j["kv_replay"] = b.kv_replay;
  if (!b.version.empty()) j["version"] = b.version;
  return net::JsonText(j);
}

namespace {

// A key as an error message shows it: any bytes may be under the prefix.
std::string ShownKey(std::string_view key) {
  return IsValidUtf8(key) ? std::string(key) : absl::CHexEscape(std::string(key));
}

absl::Status FieldError(std::string_view key, std::string_view field, std::string_view what) {
  return absl::InvalidArgumentError(fmt::format("etcd key '{}': {}: {}", ShownKey(key), field, what));
}

absl::Status GetString(const json& j, std::string_view key, const char* field, std::string* out) {
  auto it = j.find(field);
  if (it == j.end() || it->is_null()) return absl::OkStatus();
  if (!it->is_string()) return FieldError(key, field, "must be a string");
  *out = it->get<std::string>();
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<BackendConfig> DecodeRegistration(std::string_view key, std::string_view value) {
  json j = json::parse(value, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return FieldError(key, "value", "not valid JSON");
  if (!j.is_object()) return FieldError(key, "value", "not a JSON object");
  BackendConfig b;
  const size_t slash = key.rfind('/');
  b.name = std::string(slash == std::string_view::npos ? key : key.substr(slash + 1));
  for (auto [field, out] : {std::pair{"name", &b.name}, {"url", &b.url}, {"model", &b.model},
                            {"kv_events", &b.kv_events}, {"kv_replay", &b.kv_replay},
                            {"version", &b.version}}) {
    if (absl::Status st = GetString(j, key, field, out); !st.ok()) return st;
  }
  std::string role = "colocated";
  if (absl::Status st = GetString(j, key, "role", &role); !st.ok()) return st;
  if (role == "colocated") b.role = BackendRole::kColocated;
  else if (role == "prefill") b.role = BackendRole::kPrefill;
  else if (role == "decode") b.role = BackendRole::kDecode;
  else return FieldError(key, "role", fmt::format("'{}' is not prefill, decode or colocated", role));
  if (auto it = j.find("dp_ranks"); it != j.end() && !it->is_null()) {
    if (!it->is_number_integer()) return FieldError(key, "dp_ranks", "must be an integer");
    const int64_t v = it->get<int64_t>();
    if (v < 1 || v > kMaxDpRanks) return FieldError(key, "dp_ranks", fmt::format("must be in [1, {}]", kMaxDpRanks));
    b.dp_ranks = static_cast<int>(v);
  }
  if (absl::Status st = ValidateBackend(b, fmt::format("etcd key '{}'", ShownKey(key))); !st.ok()) return st;
  return b;
}

}  // namespace myriad::gateway
