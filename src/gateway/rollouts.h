#pragma once
// The gateway's model rollouts (config `rollouts:`, /admin/rollouts): each model's stable and
// canary versions and the canary's share, which version a request goes to (policy/rollout.h's
// split) and each version's outcomes since start, which the controller reads to judge the
// canary. Guarded by the gateway's lock.
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/status/status.h"
#include "gateway/config.h"
#include "gateway/request_metrics.h"
#include "net/prometheus.h"
#include "policy/rollout.h"
#include "policy/slo.h"

namespace myriad::gateway {

// The SLO verdict of one finished request (policy::MeetsSlo, the simulator's): its first
// streamed token within `slo.ttft` and its mean time per output token after the first (the rest
// of the stream over the engine's token count less one) within `slo.tpot`. An unstreamed answer
// has neither time: its whole duration is held to the TTFT target.
bool WithinSlo(const RequestOutcome& o, const policy::SloTargets& slo);
// Its mean time per output token after the first (policy::TimePerOutputToken); -1 when not
// streamed or of one token (or an unknown count).
Nanos OutcomeTpot(const RequestOutcome& o);

class RolloutTable {
 public:
  explicit RolloutTable(std::vector<RolloutConfig> rollouts);

  const RolloutConfig* Find(std::string_view model) const;
  // The version that serves a request of `model` with this key ("" when the model has no
  // rollout). `canary_available` says whether the canary has a backend to take it; when it
  // has none the stable version serves, `*fallback` is set and the fallback is counted.
  std::string Pick(std::string_view model, std::string_view key, bool canary_available, bool* fallback);

  // A finished request of `model` served by `version` (ignored unless the version is one of
  // the model's rollout: the labels stay bounded by the config).
  void Record(std::string_view model, std::string_view version, bool slo_met, bool error);

  // The admin API's change: {"share": x}, {"action": "promote"} (the canary becomes stable,
  // share 0) or {"action": "rollback"} (share 0). Returns the error to answer (400/404).
  absl::Status Apply(const std::string& model, const nlohmann::json& change);

  nlohmann::json Json() const;
  // Every rollout as it stands now (for gateway/rollout_state.h).
  std::vector<RolloutConfig> Configs() const;
  void WriteMetrics(net::PrometheusWriter& w) const;

 private:
  policy::VersionWindow& WindowOf(const std::string& model, const std::string& version);

  std::map<std::string, RolloutConfig, std::less<>> rollouts_;  // by model
  std::map<std::pair<std::string, std::string>, policy::VersionWindow> windows_;  // (model, version)
  std::map<std::string, uint64_t, std::less<>> fallbacks_;  // by model: canary had no backend
};

}  // namespace myriad::gateway
