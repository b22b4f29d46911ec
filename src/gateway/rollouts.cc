#include "gateway/rollouts.h"

#include <fmt/format.h>

namespace myriad::gateway {

using json = nlohmann::json;

Nanos OutcomeTpot(const RequestOutcome& o) {
  if (o.ttft_s < 0) return -1;
  return policy::TimePerOutputToken(SecondsToNanos(o.duration_s) - SecondsToNanos(o.ttft_s), o.output_tokens);
}

bool WithinSlo(const RequestOutcome& o, const policy::SloTargets& slo) {
  if (o.ttft_s < 0) return policy::MeetsSlo(slo, SecondsToNanos(o.duration_s), -1);
  return policy::MeetsSlo(slo, SecondsToNanos(o.ttft_s), OutcomeTpot(o));
}

RolloutTable::RolloutTable(std::vector<RolloutConfig> rollouts) {
  for (RolloutConfig& ro : rollouts) {
    const std::string model = ro.model;
    rollouts_.emplace(model, std::move(ro));
  }
}

const RolloutConfig* RolloutTable::Find(std::string_view model) const {
  auto it = rollouts_.find(model);
  return it == rollouts_.end() ? nullptr : &it->second;
}

std::string RolloutTable::Pick(std::string_view model, std::string_view key, bool canary_available, bool* fallback) {
  *fallback = false;
  const RolloutConfig* ro = Find(model);
  if (!ro) return "";
  if (policy::PickArm(key, ro->share) == policy::RolloutArm::kStable) return ro->stable;
  if (canary_available) return ro->canary;
  *fallback = true;
  ++fallbacks_[ro->model];
  return ro->stable;
}

policy::VersionWindow& RolloutTable::WindowOf(const std::string& model, const std::string& version) {
  return windows_[{model, version}];
}

void RolloutTable::Record(std::string_view model, std::string_view version, bool slo_met, bool error) {
  const RolloutConfig* ro = Find(model);
  if (!ro || (version != ro->stable && version != ro->canary)) return;
  policy::VersionWindow& w = WindowOf(ro->model, std::string(version));
  ++w.requests;
  w.slo_met += slo_met;
  w.errors += error;
}

absl::Status RolloutTable::Apply(const std::string& model, const json& change) {
  auto it = rollouts_.find(model);
  if (it == rollouts_.end()) return absl::NotFoundError(fmt::format("no rollout of model '{}'", model));
  if (!change.is_object()) return absl::InvalidArgumentError("body: expected a JSON object");
  RolloutConfig next = it->second;
  const bool has_share = change.contains("share"), has_action = change.contains("action");
  if (has_share == has_action) return absl::InvalidArgumentError("body: give one of share or action");
  if (has_share) {
    const json& s = change["share"];
    if (!s.is_number()) return absl::InvalidArgumentError("share: must be a number in [0, 1]");
    next.share = s.get<double>();
  } else {
    const json& a = change["action"];
    const std::string action = a.is_string() ? a.get<std::string>() : "";
    if (action == "promote") {
      next.stable = next.canary;
      next.share = 0;
    } else if (action == "rollback") {
      next.share = 0;
    } else {
      return absl::InvalidArgumentError("action: must be promote or rollback");
    }
  }
  if (next.stable == next.canary && next.share == 0) {
    // Promoted: there is one version left and nothing to split.
    it->second = std::move(next);
    return absl::OkStatus();
  }
  if (absl::Status st = ValidateRollout(next, "rollout"); !st.ok()) {
    return absl::InvalidArgumentError(std::string(st.message()).substr(sizeof("rollout: ") - 1));
  }
  it->second = std::move(next);
  return absl::OkStatus();
}

namespace {

json WindowJson(const policy::VersionWindow& w) {
  return {{"requests", w.requests}, {"slo_met", w.slo_met}, {"errors", w.errors}};
}

}  // namespace

json RolloutTable::Json() const {
  json list = json::array();
  for (const auto& [model, ro] : rollouts_) {
    json versions = json::object();
    for (const std::string* v : {&ro.stable, &ro.canary}) {
      auto w = windows_.find({model, *v});
      versions[*v] = WindowJson(w == windows_.end() ? policy::VersionWindow{} : w->second);
    }
    auto f = fallbacks_.find(model);
    list.push_back({{"model", model}, {"stable", ro.stable}, {"canary", ro.canary}, {"share", ro.share},
                    {"promoted", ro.stable == ro.canary}, {"versions", versions},
                    {"canary_fallbacks", f == fallbacks_.end() ? 0 : f->second}});
  }
  return list;
}

std::vector<RolloutConfig> RolloutTable::Configs() const {
  std::vector<RolloutConfig> out;
  for (const auto& [model, ro] : rollouts_) out.push_back(ro);
  return out;
}

void RolloutTable::WriteMetrics(net::PrometheusWriter& w) const {
  w.Family("myriad_gateway_rollout_canary_share", "The canary version's share of a model's requests.",
           net::MetricType::kGauge);
  for (const auto& [model, ro] : rollouts_) w.Sample("myriad_gateway_rollout_canary_share", {{"model", model}}, ro.share);
  // Labels only from the config's rollouts (promotion reuses a declared name): bounded.
  w.Family("myriad_gateway_version_requests_total",
           "Finished requests of a rolled-out model by version and outcome: slo_met, slo_missed, error.",
           net::MetricType::kCounter);
  for (const auto& [key, win] : windows_) {
    const auto& [model, version] = key;
    const int64_t missed = win.requests - win.slo_met - win.errors;
    for (const auto& [outcome, v] : {std::pair<const char*, int64_t>{"slo_met", win.slo_met},
                                     {"slo_missed", missed < 0 ? 0 : missed}, {"error", win.errors}}) {
      w.Sample("myriad_gateway_version_requests_total", {{"model", model}, {"version", version}, {"outcome", outcome}}, v);
    }
  }
  w.Family("myriad_gateway_rollout_canary_fallbacks_total",
           "Requests the split sent to the canary that the stable version served: the canary had no backend.",
           net::MetricType::kCounter);
  for (const auto& [model, ro] : rollouts_) {
    auto f = fallbacks_.find(model);
    w.Sample("myriad_gateway_rollout_canary_fallbacks_total", {{"model", model}}, f == fallbacks_.end() ? 0 : f->second);
  }
}

}  // namespace myriad::gateway
