#include "control/config.h"


#include <fmt/format.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "core/config_file.h"
#include "core/yaml_reader.h"
#include "net/http.h"

namespace myriad::control {

namespace {

// A bound as a user writes it in the file ("10ms", "1h").
std::string Bound(Nanos n) {
  if (n == 0) return "0s";
  for (auto [unit, name] : {std::pair{kHour, "h"}, {kMinute, "m"}, {kSecond, "s"}, {kMillisecond, "ms"}}) {
    if (n % unit == 0) return fmt::format("{}{}", n / unit, name);
  }
  return fmt::format("{}ns", n);
}

// A duration in [lo, hi], read into *out when present.
absl::Status Bounded(const YamlReader& r, const YAML::Node& map, const char* key, const std::string& path, Nanos lo,
                     Nanos hi, Nanos* out) {
  MYRIAD_RETURN_IF_ERROR(r.Duration(map, key, path, out));
  return r.Check(map, key, path, *out >= lo && *out <= hi, fmt::format("must be in [{}, {}]", Bound(lo), Bound(hi)),
                 map[key] ? map[key].Scalar() : Bound(*out));
}

template <typename T>
absl::Status BoundedNumber(const YamlReader& r, const YAML::Node& map, const char* key, const std::string& path,
                           T lo, T hi, T* out) {
  MYRIAD_RETURN_IF_ERROR(r.Get(map, key, path, out));
  return r.Check(map, key, path, *out >= lo && *out <= hi, fmt::format("must be in [{}, {}]", lo, hi), *out);
}

absl::Status Url(const YamlReader& r, const YAML::Node& map, const char* key, const std::string& path,
                 std::string* out) {
  MYRIAD_RETURN_IF_ERROR(r.Get(map, key, path, out));
  if (map[key] && !net::ParseHttpUrl(*out).ok()) {
    return r.Error(map[key], YamlReader::Join(path, key), fmt::format("'{}' is not an http://host:port URL", *out));
  }
  return absl::OkStatus();
}

// A fraction-like number in [lo, hi] (finite: Read refuses NaN and infinities).
absl::Status Fraction(const YamlReader& r, const YAML::Node& map, const char* key, const std::string& path, double lo,
                      double hi, double* out) {
  return BoundedNumber(r, map, key, path, lo, hi, out);
}

// autoscale: the simulator's `elastic.autoscale` and `elastic.forecast` bounds, per role.
absl::Status ParseAutoscale(const YamlReader& r, const YAML::Node& a, AutoscaleConfig* c) {
  const std::string p = "autoscale";
  MYRIAD_RETURN_IF_ERROR(r.Map(a, p, {"pools", "target_utilisation", "headroom", "lead_time",
                                      "scale_in_dwell", "scale_in_margin", "scale_in_step", "smoothing",
                                      "trend_window", "forecast"}));
  const YAML::Node pools = a["pools"];
  if (!pools) return r.Error(a, p + ".pools", "required: the pools to scale, e.g. {colocated: {min: 1, max: 4}}");
  MYRIAD_RETURN_IF_ERROR(r.Map(pools, p + ".pools", {"colocated", "prefill", "decode"}));
  for (const auto& kv : pools) {
    const std::string pp = p + ".pools." + kv.first.Scalar();
    MYRIAD_RETURN_IF_ERROR(r.Map(kv.second, pp, {"min", "max"}));
    if (!kv.second["max"]) return r.Error(kv.second, pp + ".max", "required: the most engines of the pool");
    PoolBounds b;
    MYRIAD_RETURN_IF_ERROR(BoundedNumber(r, kv.second, "max", pp, 1, static_cast<int>(kMaxEngines), &b.max));
    MYRIAD_RETURN_IF_ERROR(BoundedNumber(r, kv.second, "min", pp, 1, b.max, &b.min));
    c->pools[kv.first.Scalar()] = b;
  }
  // The scaler's bounds are the policy's own, the simulator's elastic.autoscale's too.
  const policy::OptionFields fields = policy::ScalerFields(c->scaler);
  MYRIAD_RETURN_IF_ERROR(r.Fields(a, p, fields.numbers, fields.durations));
  if (const auto bad = policy::CheckScalerOptions(c->scaler)) return r.Refused(a, p, bad->key, bad->why);
  if (const YAML::Node f = a["forecast"]) {
    const std::string fp = p + ".forecast";
    MYRIAD_RETURN_IF_ERROR(r.Map(f, fp, {"period", "buckets"}));
    MYRIAD_RETURN_IF_ERROR(r.Duration(f, "period", fp, &c->forecast_period));
    MYRIAD_RETURN_IF_ERROR(r.Get(f, "buckets", fp, &c->forecast_buckets));
    if (const auto bad = policy::CheckForecast(c->forecast_period, c->forecast_buckets)) {
      return r.Refused(f, fp, bad->key, bad->why);
    }
  }
  return absl::OkStatus();
}

absl::Status ParseSignals(const YamlReader& r, const YAML::Node& n, ElasticSignalsConfig* c) {
  MYRIAD_RETURN_IF_ERROR(r.Map(n, "signals", {"engine_concurrency", "smoothing"}));
  MYRIAD_RETURN_IF_ERROR(
      Fraction(r, n, "engine_concurrency", "signals", 0.01, kMaxEngineConcurrency, &c->engine_concurrency));
  return Bounded(r, n, "smoothing", "signals", kMillisecond, kHour, &c->smoothing);
}

// pd_ratio: the simulator's `elastic.pd_ratio` bounds; the pools are the prefill and decode roles.
absl::Status ParsePdRatio(const YamlReader& r, const YAML::Node& d, const AutoscaleConfig& scaled,
                          PdRatioControlConfig* c) {
  const std::string p = "pd_ratio";
  MYRIAD_RETURN_IF_ERROR(r.Map(d, p, {"high", "low", "queue_high", "confirm", "dwell", "min_engines"}));
  for (const char* role : {"prefill", "decode"}) {
    if (scaled.pools.count(role)) {
      // Two controllers resizing one pool would undo each other's moves.
      return r.Error(d, p, fmt::format("the {} pool is autoscaled too; pd_ratio moves engines between pools of a "
                                       "fixed total",
                                       role));
    }
  }
  c->enabled = true;
  policy::PdRatioOptions& o = c->options;
  // The policy's own keys and bounds, the simulator's elastic.pd_ratio's too; min_engines is
  // this file's.
  const policy::OptionFields fields = policy::PdRatioFields(o);
  MYRIAD_RETURN_IF_ERROR(r.Fields(d, p, fields.numbers, fields.durations));
  if (const auto bad = policy::CheckPdRatioOptions(o)) return r.Refused(d, p, bad->key, bad->why);
  return BoundedNumber(r, d, "min_engines", p, 1, static_cast<int>(kMaxEngines), &o.min_units);
}

}  // namespace

absl::StatusOr<ControlConfig> ParseControlConfig(std::string_view yaml, std::string_view source, bool fleet_given) {
  YamlReader r{std::string(source)};
  YAML::Node root;
  try {
    root = YAML::Load(std::string(yaml));
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(fmt::format("{}:{}: {}", std::string(source), e.mark.line + 1, e.msg));
  }
  ControlConfig c;
  if (!root || root.IsNull()) {
    if (fleet_given) return c;
    return r.Error(root, "", "empty: name the engines or the gateway");
  }
  MYRIAD_RETURN_IF_ERROR(r.UniqueKeys(root));
  MYRIAD_RETURN_IF_ERROR(r.Map(root, "", {"listen", "scrape", "detect", "straggler", "gate", "gateway", "engines",
                                          "actuators", "dry_run", "ha", "rollout", "signals", "autoscale", "pd_ratio",
                                          "admin_token"}));
  MYRIAD_RETURN_IF_ERROR(r.Get(root, "admin_token", "", &c.admin_token));
  MYRIAD_RETURN_IF_ERROR(r.Get(root, "listen", "", &c.listen));
  if (!net::ParseHostPort(c.listen).ok()) {
    return r.Error(root["listen"], "listen", fmt::format("'{}' is not HOST:PORT", c.listen));
  }
  MYRIAD_RETURN_IF_ERROR(r.Get(root, "dry_run", "", &c.dry_run));
  if (const YAML::Node s = root["scrape"]) {
    MYRIAD_RETURN_IF_ERROR(r.Map(s, "scrape", {"interval", "timeout"}));
    MYRIAD_RETURN_IF_ERROR(Bounded(r, s, "interval", "scrape", kMinScrapeInterval, kMaxScrapeInterval,
                                   &c.scrape_interval));
    MYRIAD_RETURN_IF_ERROR(Bounded(r, s, "timeout", "scrape", kMillisecond, kMaxScrapeTimeout, &c.scrape_timeout));
  }
  policy::FleetControllerOptions& p = c.policy;
  if (const YAML::Node d = root["detect"]) {
    MYRIAD_RETURN_IF_ERROR(r.Map(d, "detect", {"hang_after", "crash_after_failed_probes", "restart_timeout"}));
    MYRIAD_RETURN_IF_ERROR(Bounded(r, d, "hang_after", "detect", kMillisecond, policy::kMaxHangAfter, &p.hang_after));
    MYRIAD_RETURN_IF_ERROR(BoundedNumber(r, d, "crash_after_failed_probes", "detect", 1, policy::kMaxHealthCount,
                                         &p.crash_after_failed_probes));
    MYRIAD_RETURN_IF_ERROR(Bounded(r, d, "restart_timeout", "detect", kSecond, 24 * kHour, &p.restart_timeout));
  }
  if (const YAML::Node s = root["straggler"]) {
    MYRIAD_RETURN_IF_ERROR(r.Map(s, "straggler", {"min_excess", "robust_z", "windows"}));
    MYRIAD_RETURN_IF_ERROR(BoundedNumber(r, s, "min_excess", "straggler", 0.0, 10.0, &p.straggler.min_excess));
    MYRIAD_RETURN_IF_ERROR(BoundedNumber(r, s, "robust_z", "straggler", 0.0, 100.0, &p.straggler.robust_z));
    MYRIAD_RETURN_IF_ERROR(BoundedNumber(r, s, "windows", "straggler", 1, policy::kMaxHealthCount,
                                         &p.straggler.windows));
  }
  if (const YAML::Node g = root["gate"]) {
    MYRIAD_RETURN_IF_ERROR(
        r.Map(g, "gate", {"prompt", "max_tokens", "model", "timeout", "warmup_requests", "probe_period"}));
    MYRIAD_RETURN_IF_ERROR(Bounded(r, g, "probe_period", "gate", 0, 24 * kHour, &p.probe_period));
    MYRIAD_RETURN_IF_ERROR(r.Check(g, "probe_period", "gate", p.probe_period == 0 || p.probe_period >= kSecond,
                                   "must be 0 (off) or in [1s, 24h]",
                                   g["probe_period"] ? g["probe_period"].Scalar() : ""));
    MYRIAD_RETURN_IF_ERROR(r.Get(g, "prompt", "gate", &c.probe_prompt));
    MYRIAD_RETURN_IF_ERROR(r.Check(g, "prompt", "gate", !c.probe_prompt.empty(), "must not be empty", "''"));
    MYRIAD_RETURN_IF_ERROR(r.Get(g, "model", "gate", &c.probe_model));
    MYRIAD_RETURN_IF_ERROR(BoundedNumber(r, g, "max_tokens", "gate", 1, kMaxProbeTokens, &c.probe_max_tokens));
    MYRIAD_RETURN_IF_ERROR(Bounded(r, g, "timeout", "gate", kMillisecond, 10 * kMinute, &c.probe_timeout));
    MYRIAD_RETURN_IF_ERROR(BoundedNumber(r, g, "warmup_requests", "gate", 0, policy::kMaxWarmupRequests,
                                         &p.warmup_requests));
  }
  if (const YAML::Node g = root["gateway"]) {
    MYRIAD_RETURN_IF_ERROR(r.Map(g, "gateway", {"url", "admin_token"}));
    MYRIAD_RETURN_IF_ERROR(Url(r, g, "url", "gateway", &c.gateway_url));
    MYRIAD_RETURN_IF_ERROR(r.Get(g, "admin_token", "gateway", &c.gateway_admin_token));
  }
  if (const YAML::Node es = root["engines"]) {
    if (!es.IsSequence()) return r.Error(es, "engines", "expected a list");
    if (es.size() > kMaxEngines) return r.Error(es, "engines", fmt::format("at most {} engines", kMaxEngines));
    std::set<std::string> names;
    for (size_t i = 0; i < es.size(); ++i) {
      const std::string path = fmt::format("engines[{}]", i);
      MYRIAD_RETURN_IF_ERROR(r.Map(es[i], path, {"name", "url", "role"}));
      EngineConfig e;
      MYRIAD_RETURN_IF_ERROR(r.Get(es[i], "name", path, &e.name));
      if (e.name.empty()) return r.Error(es[i], path + ".name", "required");
      if (!es[i]["url"]) return r.Error(es[i], path + ".url", "required");
      MYRIAD_RETURN_IF_ERROR(Url(r, es[i], "url", path, &e.url));
      MYRIAD_RETURN_IF_ERROR(r.Get(es[i], "role", path, &e.role));
      MYRIAD_RETURN_IF_ERROR(r.Check(es[i], "role", path, e.role == "prefill" || e.role == "decode" ||
                                                              e.role == "colocated",
                                     "must be prefill, decode or colocated", e.role));
      if (!names.insert(e.name).second) {
        return r.Error(es[i]["name"], path + ".name", fmt::format("duplicate engine name '{}'", e.name));
      }
      c.engines.push_back(std::move(e));
    }
  }
  if (const YAML::Node a = root["actuators"]) {
    MYRIAD_RETURN_IF_ERROR(r.Map(a, "actuators", {"gateway", "exec", "exec_timeout"}));
    MYRIAD_RETURN_IF_ERROR(r.Get(a, "gateway", "actuators", &c.drain_in_gateway));
    MYRIAD_RETURN_IF_ERROR(Bounded(r, a, "exec_timeout", "actuators", kMillisecond, kMaxExecTimeout, &c.exec_timeout));
    if (const YAML::Node x = a["exec"]) {
      MYRIAD_RETURN_IF_ERROR(r.Map(x, "actuators.exec", {"drain", "restart", "readmit", "cordon", "change_role",
                                                         "scale_out", "stop"}));
      for (const auto& kv : x) {
        std::string cmd;
        MYRIAD_RETURN_IF_ERROR(r.Read(kv.second, "actuators.exec." + kv.first.Scalar(), &cmd));
        c.exec[kv.first.Scalar()] = std::move(cmd);
      }
    }
  }
  if (const YAML::Node h = root["ha"]) {
    MYRIAD_RETURN_IF_ERROR(r.Map(h, "ha", {"etcd", "prefix", "lease_ttl", "id"}));
    if (!h["etcd"]) return r.Error(h, "ha.etcd", "required: etcd's client URL");
    MYRIAD_RETURN_IF_ERROR(Url(r, h, "etcd", "ha", &c.ha.etcd));
    MYRIAD_RETURN_IF_ERROR(r.Get(h, "prefix", "ha", &c.ha.prefix));
    MYRIAD_RETURN_IF_ERROR(r.Check(h, "prefix", "ha", !c.ha.prefix.empty() && c.ha.prefix[0] == '/',
                                   "must start with '/'", "'" + c.ha.prefix + "'"));
    // etcd grants leases in whole seconds.
    MYRIAD_RETURN_IF_ERROR(Bounded(r, h, "lease_ttl", "ha", kSecond, kMaxLeaseTtl, &c.ha.lease_ttl));
    MYRIAD_RETURN_IF_ERROR(r.Check(h, "lease_ttl", "ha", c.ha.lease_ttl % kSecond == 0, "must be whole seconds",
                                   h["lease_ttl"] ? h["lease_ttl"].Scalar() : ""));
    MYRIAD_RETURN_IF_ERROR(r.Get(h, "id", "ha", &c.ha.id));
  }
  if (const YAML::Node ro = root["rollout"]) {
    MYRIAD_RETURN_IF_ERROR(
        r.Map(ro, "rollout", {"model", "ladder", "min_requests", "max_slo_drop", "max_error_increase", "probe"}));
    RolloutJudgeConfig& rc = c.rollout;
    MYRIAD_RETURN_IF_ERROR(r.Get(ro, "model", "rollout", &rc.model));
    MYRIAD_RETURN_IF_ERROR(r.Check(ro, "model", "rollout", !rc.model.empty(), "required: the gateway's rolled-out model",
                                   "''"));
    MYRIAD_RETURN_IF_ERROR(r.Get(ro, "probe", "rollout", &rc.probe));
    if (const YAML::Node l = ro["ladder"]) {
      if (!l.IsSequence()) return r.Error(l, "rollout.ladder", "expected a list of shares");
      rc.judge.ladder.clear();
      for (size_t i = 0; i < l.size(); ++i) {
        double s = 0;
        MYRIAD_RETURN_IF_ERROR(r.Read(l[i], fmt::format("rollout.ladder[{}]", i), &s));
        rc.judge.ladder.push_back(s);
      }
    }
    MYRIAD_RETURN_IF_ERROR(r.Get(ro, "min_requests", "rollout", &rc.judge.min_requests));
    MYRIAD_RETURN_IF_ERROR(r.Get(ro, "max_slo_drop", "rollout", &rc.judge.max_slo_drop));
    MYRIAD_RETURN_IF_ERROR(r.Get(ro, "max_error_increase", "rollout", &rc.judge.max_error_increase));
    if (absl::Status st = policy::ValidateJudgeOptions(rc.judge); !st.ok()) {
      // The policy's message starts with the key it refuses.
      const std::string msg(st.message());
      const std::string key = msg.substr(0, msg.find_first_of("[:"));
      return r.Error(ro[key] ? ro[key] : ro, "rollout." + msg.substr(0, msg.find(':')), msg.substr(msg.find(':') + 2));
    }
    if (!fleet_given && !root["gateway"]) {
      return r.Error(ro, "rollout", "needs gateway.url: the rollout is the gateway's");
    }
  }
  if (const YAML::Node n = root["signals"]) MYRIAD_RETURN_IF_ERROR(ParseSignals(r, n, &c.signals));
  if (const YAML::Node a = root["autoscale"]) MYRIAD_RETURN_IF_ERROR(ParseAutoscale(r, a, &c.autoscale));
  if (const YAML::Node d = root["pd_ratio"]) MYRIAD_RETURN_IF_ERROR(ParsePdRatio(r, d, c.autoscale, &c.pd_ratio));
  if (fleet_given) {
    for (const char* key : {"engines", "gateway"}) {
      if (root[key]) return r.Error(root[key], key, "the cluster's own: leave it out");
    }
    return c;
  }
  if (c.engines.empty() && c.gateway_url.empty()) {
    return r.Error(root, "engines", "required: list the engines, or give gateway.url to take its backends");
  }
  if (c.drain_in_gateway && c.gateway_url.empty() && root["actuators"] && root["actuators"]["gateway"]) {
    return r.Error(root["actuators"]["gateway"], "actuators.gateway", "needs gateway.url");
  }
  return c;
}

absl::StatusOr<ControlConfig> LoadControlConfig(const std::string& path, bool fleet_given) {
  auto text = ReadConfigFile(path);
  if (!text.ok()) return text.status();
  return ParseControlConfig(*text, path, fleet_given);
}

}  // namespace myriad::control
