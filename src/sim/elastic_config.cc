#include "sim/elastic_config.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "sim/fault_config.h"

namespace myriad::sim {
namespace {

absl::Status FindPool(const YamlReader& rd, const YAML::Node& n, const char* key, const std::string& p,
                      const std::vector<std::string>& names, std::string* name, int* index) {
  MYRIAD_RETURN_IF_ERROR(rd.Get(n, key, p, name));
  const auto it = std::find(names.begin(), names.end(), *name);
  if (it == names.end()) {
    return rd.Error(n[key] ? n[key] : n, p + "." + key, fmt::format("'{}' names no pool", *name));
  }
  *index = static_cast<int>(it - names.begin());
  return absl::OkStatus();
}

absl::Status ParseUnits(const YamlReader& rd, const YAML::Node& n, const char* key, const std::string& p, int lo,
                        int count, int* out) {
  if (*out < 0) *out = count;
  MYRIAD_RETURN_IF_ERROR(rd.Get(n, key, p, out));
  return rd.Check(n, key, p, *out >= lo && *out <= count,
                  fmt::format("must be between {} and the pool's count, {}", lo, count), *out);
}

absl::Status ParseFraction(const YamlReader& rd, const YAML::Node& n, const char* key, const std::string& p,
                           double lo, double hi, double* out) {
  MYRIAD_RETURN_IF_ERROR(rd.Get(n, key, p, out));
  return rd.Check(n, key, p, *out >= lo && *out <= hi && std::isfinite(*out), fmt::format("must be in [{}, {}]", lo, hi),
                  *out);
}

}  // namespace

int CanaryFloor(const ElasticConfig& c, int pool) {
  for (const AutoscaleConfig& a : c.autoscale) {
    if (a.pool_index == pool) return a.min;
  }
  const PdRatioConfig& pd = c.pd_ratio;
  if (pd.enabled && (pd.prefill_index == pool || pd.decode_index == pool)) return pd.options.min_units;
  return std::numeric_limits<int>::max();
}

absl::Status ParseElastic(const YamlReader& rd, const YAML::Node& n, const std::vector<std::string>& pool_names,
                          const std::vector<int>& pool_counts, ElasticConfig* c) {
  const std::string p = "elastic";
  MYRIAD_RETURN_IF_ERROR(rd.Map(n, p, {"interval", "forecast", "scale_out", "sleep", "autoscale", "pd_ratio", "rollout",
                                       "restarts"}));
  c->enabled = true;
  MYRIAD_RETURN_IF_ERROR(rd.Duration(n, "interval", p, &c->interval));
  MYRIAD_RETURN_IF_ERROR(rd.Check(n, "interval", p, c->interval >= kMinElasticInterval && c->interval <= kHour,
                                  "must be between 1s and 1h", FormatDuration(c->interval)));
  if (const YAML::Node f = n["forecast"]) {
    const std::string fp = p + ".forecast";
    MYRIAD_RETURN_IF_ERROR(rd.Map(f, fp, {"period", "buckets", "profile"}));
    MYRIAD_RETURN_IF_ERROR(rd.Duration(f, "period", fp, &c->forecast_period));
    MYRIAD_RETURN_IF_ERROR(rd.Get(f, "buckets", fp, &c->forecast_buckets));
    if (const auto bad = policy::CheckForecast(c->forecast_period, c->forecast_buckets)) {
      return rd.Refused(f, fp, bad->key, bad->why);
    }
    if (const YAML::Node pr = f["profile"]) {
      const std::string pp = fp + ".profile";
      if (!pr.IsSequence() || pr.size() == 0 || pr.size() > policy::kMaxForecastBuckets) {
        return rd.Error(pr, pp, fmt::format("expected a list of 1 to {} relative rates", policy::kMaxForecastBuckets));
      }
      for (size_t i = 0; i < pr.size(); ++i) {
        double v = 0;
        const std::string vp = fmt::format("{}[{}]", pp, i);
        MYRIAD_RETURN_IF_ERROR(rd.Read(pr[i], vp, &v));
        if (!(v > 0)) return rd.Error(pr[i], vp, fmt::format("must be positive, got {}", v));
        c->forecast_profile.push_back(v);
      }
    }
  }
  if (const YAML::Node so = n["scale_out"]) {
    MYRIAD_RETURN_IF_ERROR(ParseRecovery(rd, so, p + ".scale_out", &c->scale_out, nullptr));
  }
  c->sleep.warmup = c->scale_out.warmup;
  c->sleep.readiness = c->scale_out.readiness;
  if (const YAML::Node sl = n["sleep"]) {
    const std::string sp = p + ".sleep";
    MYRIAD_RETURN_IF_ERROR(rd.Map(sl, sp, {"mode", "max_units", "pcie_gb_per_s"}));
    std::string mode = "off";
    MYRIAD_RETURN_IF_ERROR(rd.Get(sl, "mode", sp, &mode));
    MYRIAD_RETURN_IF_ERROR(rd.Check(sl, "mode", sp, mode == "off" || mode == "host" || mode == "gpu",
                                    "must be off, host or gpu", mode));
    c->sleep.mode = mode == "host" ? policy::SleepMode::kHost : mode == "gpu" ? policy::SleepMode::kGpu : policy::SleepMode::kOff;
    MYRIAD_RETURN_IF_ERROR(rd.Get(sl, "max_units", sp, &c->sleep.max_sleeping));
    MYRIAD_RETURN_IF_ERROR(rd.Check(sl, "max_units", sp, c->sleep.max_sleeping >= 0 && c->sleep.max_sleeping <= kMaxSleepingUnits,
                                    fmt::format("must be between 0 and {}", kMaxSleepingUnits), c->sleep.max_sleeping));
    double pcie = c->sleep.pcie_bytes_per_s / 1e9;
    MYRIAD_RETURN_IF_ERROR(ParseFraction(rd, sl, "pcie_gb_per_s", sp, 0.1, 1000, &pcie));
    c->sleep.pcie_bytes_per_s = pcie * 1e9;
  }
  if (const YAML::Node a = n["autoscale"]) {
    if (!a.IsSequence()) return rd.Error(a, p + ".autoscale", "expected a list of pools");
    for (size_t i = 0; i < a.size(); ++i) {
      const YAML::Node e = a[i];
      const std::string ap = fmt::format("{}.autoscale[{}]", p, i);
      MYRIAD_RETURN_IF_ERROR(rd.Map(e, ap, {"pool", "min", "initial", "target_utilisation", "headroom",
                                            "scale_in_dwell", "scale_in_margin", "scale_in_step"}));
      AutoscaleConfig s;
      MYRIAD_RETURN_IF_ERROR(FindPool(rd, e, "pool", ap, pool_names, &s.pool, &s.pool_index));
      for (const auto& other : c->autoscale) {
        if (other.pool_index == s.pool_index) return rd.Error(e["pool"], ap + ".pool", fmt::format("'{}' is listed twice", s.pool));
      }
      const int count = pool_counts[static_cast<size_t>(s.pool_index)];
      MYRIAD_RETURN_IF_ERROR(rd.Check(e, "pool", ap, count >= 1, "names a pool of no units", s.pool));
      s.min = std::min(1, count);
      MYRIAD_RETURN_IF_ERROR(ParseUnits(rd, e, "min", ap, 1, count, &s.min));
      MYRIAD_RETURN_IF_ERROR(ParseUnits(rd, e, "initial", ap, s.min, count, &s.initial));
      // The scaler's keys and bounds are the policy's own, the controller's autoscale's too (the
      // keys allowed above are the subset a scenario sets).
      const policy::OptionFields fields = policy::ScalerFields(s.scaler);
      MYRIAD_RETURN_IF_ERROR(rd.Fields(e, ap, fields.numbers, fields.durations));
      if (const auto bad = policy::CheckScalerOptions(s.scaler)) return rd.Refused(e, ap, bad->key, bad->why);
      c->autoscale.push_back(std::move(s));
    }
  }
  if (const YAML::Node d = n["pd_ratio"]) {
    const std::string dp = p + ".pd_ratio";
    PdRatioConfig& r = c->pd_ratio;
    MYRIAD_RETURN_IF_ERROR(rd.Map(d, dp, {"prefill", "decode", "prefill_initial", "decode_initial", "high", "low",
                                          "queue_high", "confirm", "dwell", "min_units"}));
    r.enabled = true;
    MYRIAD_RETURN_IF_ERROR(FindPool(rd, d, "prefill", dp, pool_names, &r.prefill, &r.prefill_index));
    MYRIAD_RETURN_IF_ERROR(FindPool(rd, d, "decode", dp, pool_names, &r.decode, &r.decode_index));
    for (const auto& a : c->autoscale) {
      if (a.pool_index == r.prefill_index || a.pool_index == r.decode_index) {
        // Two controllers resizing one pool would undo each other's moves.
        return rd.Error(d, dp, fmt::format("pool '{}' is autoscaled too; pd_ratio moves units between pools of a "
                                           "fixed total",
                                           a.pool));
      }
    }
    policy::PdRatioOptions& o = r.options;
    // The policy's own keys and bounds, the controller's pd_ratio's too; min_units is bounded here.
    const policy::OptionFields fields = policy::PdRatioFields(o);
    MYRIAD_RETURN_IF_ERROR(rd.Fields(d, dp, fields.numbers, fields.durations));
    if (const auto bad = policy::CheckPdRatioOptions(o)) return rd.Refused(d, dp, bad->key, bad->why);
    const int pc = pool_counts[static_cast<size_t>(r.prefill_index)], dc = pool_counts[static_cast<size_t>(r.decode_index)];
    MYRIAD_RETURN_IF_ERROR(rd.Get(d, "min_units", dp, &o.min_units));
    MYRIAD_RETURN_IF_ERROR(rd.Check(d, "min_units", dp, o.min_units >= 1 && o.min_units <= std::min(pc, dc),
                                    fmt::format("must be between 1 and the smaller pool's count, {}", std::min(pc, dc)),
                                    o.min_units));
    MYRIAD_RETURN_IF_ERROR(ParseUnits(rd, d, "prefill_initial", dp, o.min_units, pc, &r.prefill_initial));
    MYRIAD_RETURN_IF_ERROR(ParseUnits(rd, d, "decode_initial", dp, o.min_units, dc, &r.decode_initial));
  }
  if (const YAML::Node rs = n["restarts"]) {
    if (!rs.IsSequence() || rs.size() == 0 || rs.size() > kMaxRestarts) {
      return rd.Error(rs, p + ".restarts",
                      fmt::format("expected a list of 1 to {} restarts, each {{pool: NAME, at: TIME, max_out: N}}",
                                  kMaxRestarts));
    }
    for (size_t i = 0; i < rs.size(); ++i) {
      const YAML::Node e = rs[i];
      const std::string rp = fmt::format("{}.restarts[{}]", p, i);
      MYRIAD_RETURN_IF_ERROR(rd.Map(e, rp, {"pool", "at", "max_out", "min_serving_fraction"}));
      RestartConfig r;
      MYRIAD_RETURN_IF_ERROR(FindPool(rd, e, "pool", rp, pool_names, &r.pool, &r.pool_index));
      const int count = pool_counts[static_cast<size_t>(r.pool_index)];
      MYRIAD_RETURN_IF_ERROR(rd.Duration(e, "at", rp, &r.at));
      MYRIAD_RETURN_IF_ERROR(rd.Check(e, "at", rp, r.at >= 0 && r.at <= 7 * 24 * kHour, "must be between 0s and 168h",
                                      FormatDuration(r.at)));
      MYRIAD_RETURN_IF_ERROR(rd.Get(e, "max_out", rp, &r.options.max_out));
      MYRIAD_RETURN_IF_ERROR(rd.Check(e, "max_out", rp, r.options.max_out >= 1 && r.options.max_out <= count,
                                      fmt::format("must be between 1 and the pool's count, {}", count),
                                      r.options.max_out));
      MYRIAD_RETURN_IF_ERROR(rd.Get(e, "min_serving_fraction", rp, &r.options.min_serving_fraction));
      MYRIAD_RETURN_IF_ERROR(rd.Check(e, "min_serving_fraction", rp,
                                      policy::ValidateRestartOptions(r.options).ok(), "must be in [0, 1)",
                                      r.options.min_serving_fraction));
      c->restarts.push_back(std::move(r));
    }
  }
  if (const YAML::Node ro = n["rollout"]) {
    const std::string rp = p + ".rollout";
    MYRIAD_RETURN_IF_ERROR(ParseRollout(rd, ro, rp, pool_names, pool_counts, &c->rollout));
    for (size_t i = 0; i < c->rollout.canary.size(); ++i) {
      const CanaryUnits& cu = c->rollout.canary[i];
      const int floor = CanaryFloor(*c, cu.pool_index);
      if (cu.units >= floor) {
        // The canary's units are the pool's first, allocated from the start and never scaled in:
        // below the pool's floor, so that the stable version always keeps a unit.
        return rd.Error(ro["canary"][i], fmt::format("{}.canary[{}].units", rp, i),
                        fmt::format("must be below the pool's floor of {} units (elastic min or pd_ratio "
                                    "min_units; got {})",
                                    floor, cu.units));
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace myriad::sim
