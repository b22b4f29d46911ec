#include "gateway/rollout_state.h"

#include <fmt/format.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

namespace myriad::gateway {

using json = nlohmann::json;

namespace {

constexpr size_t kMaxStateBytes = size_t{1} << 20;

absl::Status Bad(const std::string& path, const std::string& field, const std::string& what) {
  return absl::InvalidArgumentError(fmt::format("{}: {}: {}", path, field, what));
}

}  // namespace

absl::Status ApplyRolloutState(const std::string& path, std::vector<RolloutConfig>* rollouts) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    if (errno == ENOENT) return absl::OkStatus();  // no change yet
    return absl::InvalidArgumentError(fmt::format("{}: cannot read: {}", path, std::strerror(errno)));
  }
  std::ostringstream text;
  text << in.rdbuf();
  if (text.str().size() > kMaxStateBytes) {
    return absl::InvalidArgumentError(fmt::format("{}: {} bytes; at most {}", path, text.str().size(), kMaxStateBytes));
  }
  const json state = json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
  if (!state.is_object() || !state.contains("rollouts") || !state["rollouts"].is_array()) {
    return Bad(path, "rollouts", "expected a JSON object with a list 'rollouts'");
  }
  const json& list = state["rollouts"];
  for (size_t i = 0; i < list.size(); ++i) {
    const std::string field = fmt::format("rollouts[{}]", i);
    const json& e = list[i];
    if (!e.is_object()) return Bad(path, field, "expected an object");
    RolloutConfig saved;
    for (auto [key, out] : {std::pair<const char*, std::string*>{"model", &saved.model},
                            {"stable", &saved.stable}, {"canary", &saved.canary}}) {
      if (!e.contains(key) || !e[key].is_string()) return Bad(path, field + "." + key, "expected a string");
      *out = e[key].get<std::string>();
    }
    if (!e.contains("share") || !e["share"].is_number()) return Bad(path, field + ".share", "expected a number");
    saved.share = e["share"].get<double>();
    const bool promoted = saved.stable == saved.canary && saved.share == 0;
    if (!promoted) {
      if (absl::Status st = ValidateRollout(saved, field); !st.ok()) {
        return absl::InvalidArgumentError(fmt::format("{}: {}", path, std::string(st.message())));
      }
    }
    for (RolloutConfig& ro : *rollouts) {
      if (ro.model != saved.model) continue;
      const bool same_versions = saved.stable == ro.stable && saved.canary == ro.canary;
      const bool promotion_of_it = promoted && saved.stable == ro.canary;
      if (same_versions || promotion_of_it) ro = saved;
    }
  }
  return absl::OkStatus();
}

absl::Status SaveRolloutState(const std::string& path, const std::vector<RolloutConfig>& rollouts) {
  json list = json::array();
  for (const RolloutConfig& ro : rollouts) {
    list.push_back({{"model", ro.model}, {"stable", ro.stable}, {"canary", ro.canary}, {"share", ro.share}});
  }
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << json({{"rollouts", list}}).dump(2) << '\n';
    out.flush();
    if (!out) return absl::UnavailableError(fmt::format("{}: cannot write: {}", tmp, std::strerror(errno)));
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    return absl::UnavailableError(fmt::format("{}: cannot rename to {}: {}", tmp, path, std::strerror(errno)));
  }
  return absl::OkStatus();
}

}  // namespace myriad::gateway
