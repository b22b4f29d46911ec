#include "sim/fault_config.h"

#include <fmt/format.h>

#include "policy/eplb_incremental.h"
#include "policy/fleet_controller.h"
#include "sim/yaml_reader.h"

namespace myriad::sim {

namespace {

constexpr std::array<std::string_view, kFaultKinds> kNames = {
    "crash", "software_crash", "hang", "nic", "network", "switch", "sdc", "straggler", "maintenance", "cache_loss"};

}  // namespace

std::string_view FaultKindName(FaultKind k) { return kNames[static_cast<size_t>(k)]; }

absl::StatusOr<FaultKind> ParseFaultKind(std::string_view name) {
  for (size_t i = 0; i < kNames.size(); ++i) {
    if (kNames[i] == name) return static_cast<FaultKind>(i);
  }
  std::vector<std::string> all(kNames.begin(), kNames.end());
  return absl::InvalidArgumentError(
      fmt::format("unknown fault kind '{}' (known: {})", std::string(name), myriad::Join(all, ", ")));
}

std::array<double, kFaultKinds> DefaultFaultRates() {
  // Llama 3, Table 5: 54 days x 24 h x 16,384 GPUs of interruptions.
  constexpr double kGpuHours = 54.0 * 24 * 16384;
  std::array<double, kFaultKinds> r{};
  auto set = [&](FaultKind k, double count) { r[static_cast<size_t>(k)] = count / kGpuHours; };
  // Hardware that takes the node out: faulty GPU 148, HBM3 72, SRAM 19, GPU system processor
  // 17, SSD 3, power supply 3, chassis 2, IO expansion board 2, CPU 2, system memory 2.
  set(FaultKind::kCrash, 148 + 72 + 19 + 17 + 3 + 3 + 2 + 2 + 2 + 2);
  set(FaultKind::kSoftwareCrash, 54 + 2);  // software bug, dependency
  set(FaultKind::kHang, 7);                // NCCL watchdog timeouts
  set(FaultKind::kNic, 7);
  set(FaultKind::kNetwork, 35);            // network switch/cable
  set(FaultKind::kSdc, 6);
  set(FaultKind::kStraggler, 6);           // GPU thermal interface + sensor
  set(FaultKind::kMaintenance, 32);        // host maintenance
  return r;
}

namespace {

absl::Status ParseScripted(const Reader& rd, const YAML::Node& list, std::vector<ScriptedFault>* out) {
  if (!list.IsSequence()) return rd.Error(list, "faults.scripted", "expected a list of faults");
  for (size_t i = 0; i < list.size(); ++i) {
    const YAML::Node n = list[i];
    const std::string p = fmt::format("faults.scripted[{}]", i);
    MYRIAD_RETURN_IF_ERROR(rd.Map(n, p, {"at", "kind", "unit", "rack", "rank", "factor", "duration", "fraction"}));
    ScriptedFault f;
    if (!n["at"]) return rd.Error(n, p, "missing 'at'");
    if (!n["kind"]) return rd.Error(n, p, "missing 'kind'");
    MYRIAD_RETURN_IF_ERROR(rd.Duration(n, "at", p, &f.at));
    std::string kind;
    MYRIAD_RETURN_IF_ERROR(rd.Get(n, "kind", p, &kind));
    auto k = ParseFaultKind(kind);
    if (!k.ok()) return rd.Error(n["kind"], p + ".kind", std::string(k.status().message()));
    f.kind = *k;
    MYRIAD_RETURN_IF_ERROR(rd.Get(n, "unit", p, &f.unit));
    MYRIAD_RETURN_IF_ERROR(rd.Get(n, "rack", p, &f.rack));
    MYRIAD_RETURN_IF_ERROR(rd.Get(n, "rank", p, &f.rank));
    MYRIAD_RETURN_IF_ERROR(rd.Get(n, "factor", p, &f.factor));
    MYRIAD_RETURN_IF_ERROR(rd.Duration(n, "duration", p, &f.duration));
    MYRIAD_RETURN_IF_ERROR(rd.Get(n, "fraction", p, &f.fraction));
    const bool needs_unit = f.kind != FaultKind::kSwitch && f.kind != FaultKind::kCacheLoss;
    if (needs_unit && f.unit < 0) return rd.Error(n, p, fmt::format("a {} fault needs 'unit'", kind));
    if (f.kind == FaultKind::kSwitch && f.rack < 0) return rd.Error(n, p, "a switch fault needs 'rack'");
    MYRIAD_RETURN_IF_ERROR(rd.Check(n, "factor", p, f.factor >= 1, "must be at least 1", f.factor));
    MYRIAD_RETURN_IF_ERROR(rd.Check(n, "rank", p, f.rank >= 0, "must be at least 0", f.rank));
    MYRIAD_RETURN_IF_ERROR(
        rd.Check(n, "fraction", p, f.fraction > 0 && f.fraction <= 1, "must be in (0, 1]", f.fraction));
    out->push_back(f);
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ParseRecovery(const Reader& rd, const YAML::Node& n, const std::string& p, policy::RecoveryOptions* out,
                           int* spare_nodes) {
  policy::RecoveryOptions& r = *out;
  if (spare_nodes != nullptr) {
    MYRIAD_RETURN_IF_ERROR(rd.Map(n, p, {"eject", "stop", "spare_acquire", "comm_init", "warmup", "readiness",
                                         "weights", "peer_gb_per_s", "storage_gb_per_s", "storage_node_gb_per_s",
                                         "node_repair", "spare_nodes"}));
  } else {
    // Scale-out has no failed unit to eject or stop, and no node to repair.
    MYRIAD_RETURN_IF_ERROR(rd.Map(n, p, {"spare_acquire", "comm_init", "warmup", "readiness", "weights",
                                         "peer_gb_per_s", "storage_gb_per_s", "storage_node_gb_per_s"}));
  }
  MYRIAD_RETURN_IF_ERROR(rd.Duration(n, "eject", p, &r.eject));
  MYRIAD_RETURN_IF_ERROR(rd.Duration(n, "stop", p, &r.stop));
  MYRIAD_RETURN_IF_ERROR(rd.Duration(n, "spare_acquire", p, &r.spare_acquire));
  MYRIAD_RETURN_IF_ERROR(rd.Duration(n, "comm_init", p, &r.comm_init));
  MYRIAD_RETURN_IF_ERROR(rd.Duration(n, "warmup", p, &r.warmup));
  MYRIAD_RETURN_IF_ERROR(rd.Duration(n, "readiness", p, &r.readiness));
  MYRIAD_RETURN_IF_ERROR(rd.Duration(n, "node_repair", p, &r.node_repair));
  std::string weights = r.weights_from_peers ? "peers" : "storage";
  MYRIAD_RETURN_IF_ERROR(rd.Get(n, "weights", p, &weights));
  MYRIAD_RETURN_IF_ERROR(rd.Check(n, "weights", p, weights == "peers" || weights == "storage",
                                  "must be 'peers' or 'storage'", weights));
  r.weights_from_peers = weights == "peers";
  double peer = r.peer_bytes_per_s / 1e9, storage = r.storage_bytes_per_s / 1e9,
         node = r.storage_per_node_bytes_per_s / 1e9;
  MYRIAD_RETURN_IF_ERROR(rd.Get(n, "peer_gb_per_s", p, &peer));
  MYRIAD_RETURN_IF_ERROR(rd.Get(n, "storage_gb_per_s", p, &storage));
  MYRIAD_RETURN_IF_ERROR(rd.Get(n, "storage_node_gb_per_s", p, &node));
  MYRIAD_RETURN_IF_ERROR(rd.Check(n, "peer_gb_per_s", p, peer > 0, "must be positive", peer));
  MYRIAD_RETURN_IF_ERROR(rd.Check(n, "storage_gb_per_s", p, storage > 0, "must be positive", storage));
  MYRIAD_RETURN_IF_ERROR(rd.Check(n, "storage_node_gb_per_s", p, node > 0, "must be positive", node));
  r.peer_bytes_per_s = peer * 1e9;
  r.storage_bytes_per_s = storage * 1e9;
  r.storage_per_node_bytes_per_s = node * 1e9;
  if (spare_nodes == nullptr) return absl::OkStatus();
  MYRIAD_RETURN_IF_ERROR(rd.Get(n, "spare_nodes", p, spare_nodes));
  return rd.Check(n, "spare_nodes", p, *spare_nodes >= -1, "must be at least 0", *spare_nodes);
}

absl::Status ParseReplaceSettings(const Reader& rd, const YAML::Node& n, const std::string& where, std::string* mode,
                                  double* tolerance) {
  MYRIAD_RETURN_IF_ERROR(rd.Get(n, "rebalance_tolerance", where, tolerance));
  MYRIAD_RETURN_IF_ERROR(rd.Check(n, "rebalance_tolerance", where, *tolerance >= 0, "must not be negative", *tolerance));
  MYRIAD_RETURN_IF_ERROR(rd.Get(n, "rebalance_mode", where, mode));
  return rd.Check(n, "rebalance_mode", where, policy::ParseReplaceMode(*mode).ok(), "must be incremental or full", *mode);
}

absl::Status ParseFaults(const Reader& rd, const YAML::Node& n, FaultConfig* c) {
  const std::string p = "faults";
  MYRIAD_RETURN_IF_ERROR(rd.Map(n, p, {"rates", "rate_scale", "scripted", "straggler", "maintenance", "detection",
                                       "straggler_detection", "recovery", "retries", "recompute_limit",
                                       "timeline_bucket", "elastic_ep"}));
  c->enabled = true;
  c->rates = DefaultFaultRates();
  if (const YAML::Node r = n["rates"]) {
    if (r.IsScalar() && r.Scalar() == "default") {
      // the defaults above
    } else if (r.IsScalar() && r.Scalar() == "none") {
      c->rates.fill(0);
    } else {
      if (!r.IsMap()) return rd.Error(r, "faults.rates", "expected 'default', 'none' or a mapping kind: per GPU-hour");
      for (const auto& kv : r) {
        const std::string kind = kv.first.as<std::string>();
        auto k = ParseFaultKind(kind);
        if (!k.ok()) return rd.Error(kv.first, "faults.rates." + kind, std::string(k.status().message()));
        double v = 0;
        MYRIAD_RETURN_IF_ERROR(rd.Get(r, kind.c_str(), "faults.rates", &v));
        MYRIAD_RETURN_IF_ERROR(rd.Check(r, kind.c_str(), "faults.rates", v >= 0, "must not be negative", v));
        c->rates[static_cast<size_t>(*k)] = v;
      }
    }
  }
  MYRIAD_RETURN_IF_ERROR(rd.Get(n, "rate_scale", p, &c->rate_scale));
  MYRIAD_RETURN_IF_ERROR(rd.Check(n, "rate_scale", p, c->rate_scale >= 0, "must not be negative", c->rate_scale));
  if (const YAML::Node s = n["scripted"]) MYRIAD_RETURN_IF_ERROR(ParseScripted(rd, s, &c->scripted));
  if (const YAML::Node s = n["straggler"]) {
    const std::string q = "faults.straggler";
    MYRIAD_RETURN_IF_ERROR(rd.Map(s, q, {"factor_min", "factor_max", "duration"}));
    MYRIAD_RETURN_IF_ERROR(rd.Get(s, "factor_min", q, &c->straggler_factor_min));
    MYRIAD_RETURN_IF_ERROR(rd.Get(s, "factor_max", q, &c->straggler_factor_max));
    MYRIAD_RETURN_IF_ERROR(rd.Duration(s, "duration", q, &c->straggler_duration));
    MYRIAD_RETURN_IF_ERROR(rd.Check(s, "factor_min", q, c->straggler_factor_min >= 1, "must be at least 1",
                                    c->straggler_factor_min));
    MYRIAD_RETURN_IF_ERROR(rd.Check(s, "factor_max", q, c->straggler_factor_max >= c->straggler_factor_min,
                                    "must be at least factor_min", c->straggler_factor_max));
  }
  if (const YAML::Node s = n["maintenance"]) {
    MYRIAD_RETURN_IF_ERROR(rd.Map(s, "faults.maintenance", {"duration", "drain_timeout"}));
    MYRIAD_RETURN_IF_ERROR(rd.Duration(s, "duration", "faults.maintenance", &c->maintenance_duration));
    MYRIAD_RETURN_IF_ERROR(rd.Duration(s, "drain_timeout", "faults.maintenance", &c->drain_timeout));
  }
  if (const YAML::Node d = n["detection"]) {
    const std::string q = "faults.detection";
    policy::DetectionOptions& o = c->detection;
    MYRIAD_RETURN_IF_ERROR(rd.Map(d, q, {"heartbeat_interval", "heartbeat_timeout", "watchdog_timeout", "probe_interval",
                                         "eject_after_errors"}));
    int& eject = c->backend_health.eject_after_errors;
    MYRIAD_RETURN_IF_ERROR(rd.Get(d, "eject_after_errors", q, &eject));
    MYRIAD_RETURN_IF_ERROR(rd.Check(d, "eject_after_errors", q, eject >= 0 && eject <= policy::kMaxHealthCount,
                                    "must be in [0, 1000]", eject));
    MYRIAD_RETURN_IF_ERROR(rd.Duration(d, "heartbeat_interval", q, &o.heartbeat_interval));
    MYRIAD_RETURN_IF_ERROR(rd.Duration(d, "heartbeat_timeout", q, &o.heartbeat_timeout));
    MYRIAD_RETURN_IF_ERROR(rd.Duration(d, "watchdog_timeout", q, &o.watchdog_timeout));
    MYRIAD_RETURN_IF_ERROR(rd.Duration(d, "probe_interval", q, &o.probe_interval));
    // The controller scrapes every unit each heartbeat interval: its bounds are those of
    // `myriad control`'s scrape.interval, hang_after and probe_period (docs/failures.md).
    MYRIAD_RETURN_IF_ERROR(rd.Check(d, "heartbeat_interval", q,
                                    o.heartbeat_interval >= 10 * kMillisecond && o.heartbeat_interval <= 10 * kMinute,
                                    "must be in [10ms, 10m]", FormatDuration(o.heartbeat_interval)));
    MYRIAD_RETURN_IF_ERROR(rd.Check(d, "heartbeat_timeout", q,
                                    o.heartbeat_timeout >= 0 && o.heartbeat_timeout <= kHour,
                                    "must be in [0s, 1h]", FormatDuration(o.heartbeat_timeout)));
    MYRIAD_RETURN_IF_ERROR(rd.Check(d, "watchdog_timeout", q,
                                    o.watchdog_timeout > 0 && o.watchdog_timeout <= policy::kMaxHangAfter,
                                    "must be positive and at most 1h", FormatDuration(o.watchdog_timeout)));
    MYRIAD_RETURN_IF_ERROR(rd.Check(d, "probe_interval", q,
                                    o.probe_interval == 0 || (o.probe_interval >= kSecond && o.probe_interval <= 24 * kHour),
                                    "must be 0 (off) or in [1s, 24h]", FormatDuration(o.probe_interval)));
  }
  if (const YAML::Node d = n["straggler_detection"]) {
    const std::string q = "faults.straggler_detection";
    StragglerDetection& s = c->stragglers;
    MYRIAD_RETURN_IF_ERROR(rd.Map(d, q, {"enabled", "interval", "noise", "min_excess", "robust_z", "windows"}));
    MYRIAD_RETURN_IF_ERROR(rd.Get(d, "enabled", q, &s.enabled));
    MYRIAD_RETURN_IF_ERROR(rd.Duration(d, "interval", q, &s.interval));
    MYRIAD_RETURN_IF_ERROR(rd.Get(d, "noise", q, &s.noise));
    MYRIAD_RETURN_IF_ERROR(rd.Get(d, "min_excess", q, &s.options.min_excess));
    MYRIAD_RETURN_IF_ERROR(rd.Get(d, "robust_z", q, &s.options.robust_z));
    MYRIAD_RETURN_IF_ERROR(rd.Get(d, "windows", q, &s.options.windows));
    MYRIAD_RETURN_IF_ERROR(rd.Check(d, "interval", q, s.interval > 0, "must be positive", FormatDuration(s.interval)));
    MYRIAD_RETURN_IF_ERROR(rd.Check(d, "windows", q, s.options.windows >= 1, "must be at least 1", s.options.windows));
    MYRIAD_RETURN_IF_ERROR(rd.Check(d, "noise", q, s.noise >= 0 && s.noise < 1, "must be in [0, 1)", s.noise));
  }
  if (const YAML::Node r = n["recovery"]) {
    MYRIAD_RETURN_IF_ERROR(ParseRecovery(rd, r, "faults.recovery", &c->recovery, &c->spare_nodes));
  }
  MYRIAD_RETURN_IF_ERROR(rd.Get(n, "retries", p, &c->max_retries));
  MYRIAD_RETURN_IF_ERROR(rd.Check(n, "retries", p, c->max_retries >= 0, "must not be negative", c->max_retries));
  MYRIAD_RETURN_IF_ERROR(rd.Get(n, "recompute_limit", p, &c->recompute_limit));
  MYRIAD_RETURN_IF_ERROR(
      rd.Check(n, "recompute_limit", p, c->recompute_limit >= 0 && c->recompute_limit <= 100,
               "must be in [0, 100] (x the entry pools' nominal prefill throughput)", c->recompute_limit));
  MYRIAD_RETURN_IF_ERROR(rd.Duration(n, "timeline_bucket", p, &c->timeline_bucket));
  if (const YAML::Node e = n["elastic_ep"]) {
    const std::string q = "faults.elastic_ep";
    ElasticEpConfig& o = c->elastic_ep;
    MYRIAD_RETURN_IF_ERROR(rd.Map(e, q, {"enabled", "min_copies", "spread", "reconfigure", "rebalance", "rebalance_mode",
                                         "rebalance_tolerance"}));
    MYRIAD_RETURN_IF_ERROR(ParseReplaceSettings(rd, e, q, &o.rebalance_mode, &o.rebalance_tolerance));
    MYRIAD_RETURN_IF_ERROR(rd.Get(e, "rebalance", q, &o.rebalance));
    MYRIAD_RETURN_IF_ERROR(rd.Get(e, "enabled", q, &o.enabled));
    MYRIAD_RETURN_IF_ERROR(rd.Get(e, "min_copies", q, &o.min_copies));
    MYRIAD_RETURN_IF_ERROR(rd.Check(e, "min_copies", q, o.min_copies >= 1, "must be at least 1", o.min_copies));
    MYRIAD_RETURN_IF_ERROR(rd.Get(e, "spread", q, &o.spread));
    MYRIAD_RETURN_IF_ERROR(rd.Duration(e, "reconfigure", q, &o.reconfigure));
    MYRIAD_RETURN_IF_ERROR(rd.Check(e, "reconfigure", q, o.reconfigure >= 0 || !e["reconfigure"], "must not be negative",
                                    FormatDuration(o.reconfigure)));
  }
  if (c->elastic_ep.reconfigure < 0) c->elastic_ep.reconfigure = c->recovery.comm_init;
  return absl::OkStatus();
}

}  // namespace myriad::sim
