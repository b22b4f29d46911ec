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
                                          "actuators", "dry_run", "ha", "rollout"}));
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
      MYRIAD_RETURN_IF_ERROR(r.Map(es[i], path, {"name", "url"}));
      EngineConfig e;
      MYRIAD_RETURN_IF_ERROR(r.Get(es[i], "name", path, &e.name));
      if (e.name.empty()) return r.Error(es[i], path + ".name", "required");
      if (!es[i]["url"]) return r.Error(es[i], path + ".url", "required");
      MYRIAD_RETURN_IF_ERROR(Url(r, es[i], "url", path, &e.url));
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
      MYRIAD_RETURN_IF_ERROR(r.Map(x, "actuators.exec", {"drain", "restart", "readmit", "cordon", "change_role"}));
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
