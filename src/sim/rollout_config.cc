#include "sim/rollout_config.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace myriad::sim {

absl::Status ParseRollout(const YamlReader& rd, const YAML::Node& n, const std::string& p,
                          const std::vector<std::string>& pool_names, const std::vector<int>& pool_counts,
                          RolloutSimConfig* c) {
  MYRIAD_RETURN_IF_ERROR(rd.Map(n, p, {"start", "interval", "canary", "ladder", "min_requests", "max_slo_drop",
                                       "max_error_increase", "slowdown", "wrong_answers"}));
  c->enabled = true;
  MYRIAD_RETURN_IF_ERROR(rd.Duration(n, "start", p, &c->start));
  MYRIAD_RETURN_IF_ERROR(rd.Check(n, "start", p, c->start >= 0 && c->start <= 7 * 24 * kHour,
                                  "must be between 0s and 168h", FormatDuration(c->start)));
  MYRIAD_RETURN_IF_ERROR(rd.Duration(n, "interval", p, &c->interval));
  MYRIAD_RETURN_IF_ERROR(rd.Check(n, "interval", p, c->interval == 0 || (c->interval >= kSecond && c->interval <= kHour),
                                  "must be between 1s and 1h", FormatDuration(c->interval)));
  const YAML::Node cn = n["canary"];
  if (!cn || !cn.IsSequence() || cn.size() == 0 || cn.size() > pool_names.size()) {
    return rd.Error(cn ? cn : n, p + ".canary",
                    fmt::format("expected a list of 1 to {} pools, each {{pool: NAME, units: N}}", pool_names.size()));
  }
  for (size_t i = 0; i < cn.size(); ++i) {
    const YAML::Node e = cn[i];
    const std::string cp = fmt::format("{}.canary[{}]", p, i);
    MYRIAD_RETURN_IF_ERROR(rd.Map(e, cp, {"pool", "units"}));
    CanaryUnits u;
    MYRIAD_RETURN_IF_ERROR(rd.Get(e, "pool", cp, &u.pool));
    const auto it = std::find(pool_names.begin(), pool_names.end(), u.pool);
    if (it == pool_names.end()) return rd.Error(e["pool"] ? e["pool"] : e, cp + ".pool", fmt::format("'{}' names no pool", u.pool));
    u.pool_index = static_cast<int>(it - pool_names.begin());
    for (const CanaryUnits& o : c->canary) {
      if (o.pool_index == u.pool_index) return rd.Error(e["pool"], cp + ".pool", fmt::format("'{}' is listed twice", u.pool));
    }
    // The stable version keeps at least one unit of the pool.
    const int count = pool_counts[static_cast<size_t>(u.pool_index)];
    MYRIAD_RETURN_IF_ERROR(rd.Get(e, "units", cp, &u.units));
    MYRIAD_RETURN_IF_ERROR(rd.Check(e, "units", cp, u.units >= 1 && u.units < count,
                                    fmt::format("must be between 1 and the pool's count less one, {}", count - 1), u.units));
    c->canary.push_back(std::move(u));
  }
  for (size_t i = 0; i < pool_names.size(); ++i) {
    const bool listed = std::any_of(c->canary.begin(), c->canary.end(),
                                    [&](const CanaryUnits& u) { return u.pool_index == static_cast<int>(i); });
    // A prefill unit's KV is only of use to a decode unit of the same version.
    if (!listed && pool_counts[i] > 0) {
      return rd.Error(cn, p + ".canary",
                      fmt::format("must list every pool: the new version runs in each role (missing '{}')", pool_names[i]));
    }
  }
  policy::JudgeOptions& j = c->judge;
  if (const YAML::Node l = n["ladder"]) {
    if (!l.IsSequence()) return rd.Error(l, p + ".ladder", "expected a list of shares");
    j.ladder.clear();
    for (size_t i = 0; i < l.size(); ++i) {
      double v = 0;
      MYRIAD_RETURN_IF_ERROR(rd.Read(l[i], fmt::format("{}.ladder[{}]", p, i), &v));
      j.ladder.push_back(v);
    }
  }
  MYRIAD_RETURN_IF_ERROR(rd.Get(n, "min_requests", p, &j.min_requests));
  MYRIAD_RETURN_IF_ERROR(rd.Get(n, "max_slo_drop", p, &j.max_slo_drop));
  MYRIAD_RETURN_IF_ERROR(rd.Get(n, "max_error_increase", p, &j.max_error_increase));
  // The judge's own bounds, the ones the controller's config is held to.
  if (absl::Status st = policy::ValidateJudgeOptions(j); !st.ok()) return rd.Error(n, p, std::string(st.message()));
  MYRIAD_RETURN_IF_ERROR(rd.Get(n, "slowdown", p, &c->slowdown));
  MYRIAD_RETURN_IF_ERROR(rd.Check(n, "slowdown", p, c->slowdown >= 1 && c->slowdown <= kMaxCanarySlowdown,
                                  fmt::format("must be between 1 and {}", kMaxCanarySlowdown), c->slowdown));
  MYRIAD_RETURN_IF_ERROR(rd.Get(n, "wrong_answers", p, &c->wrong_answers));
  return rd.Check(n, "wrong_answers", p, c->wrong_answers >= 0 && c->wrong_answers <= 1, "must be between 0 and 1",
                  c->wrong_answers);
}

}  // namespace myriad::sim
