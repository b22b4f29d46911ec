#include "sim/scenario.h"

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <optional>
#include <utility>
#include <sstream>

#include "core/strings.h"
#include "perf/hardware.h"
#include "perf/model.h"
#include "policy/router.h"
#include "policy/tenant_fill.h"
#include "sim/hardware_profile.h"
#include "sim/yaml_reader.h"

namespace myriad::sim {
namespace {

// The workload's own rules, checked where the scenario is read so that a broken one is reported
// at its line, and again after --scale or --load.
std::optional<FieldError> CheckWorkload(const Scenario& s) {
  return s.workload.type == "synthetic" ? CheckSyntheticOptions(s.workload.synthetic)
                                        : CheckTraceOptions(s.workload.replay);
}

// hardware.calibration names a profile written by `myriad calibrate`: its Calibration replaces
// the built-in one, and its GPU is the scenario's (hardware.gpu may repeat it, not contradict it).
absl::Status ReadCalibrationProfile(const Reader& rd, const YAML::Node& n, const std::string& source_dir,
                                    HardwareConfig* hw, perf::Calibration* cal) {
  const YAML::Node c = n["calibration"];
  if (!c) return absl::OkStatus();
  std::string path;
  MYRIAD_RETURN_IF_ERROR(rd.Read(c, "hardware.calibration", &path));
  if (std::filesystem::path(path).is_relative() && !source_dir.empty()) {
    path = (std::filesystem::path(source_dir) / path).string();
  }
  auto profile = LoadHardwareProfile(path);
  if (!profile.ok()) return rd.Error(c, "hardware.calibration", std::string(profile.status().message()));
  if (!n["gpu"]) {
    hw->gpu = profile->gpu;
  } else if (!EqualsIgnoreCase(profile->gpu, hw->gpu)) {
    return rd.Error(n["gpu"], "hardware.gpu",
                    fmt::format("is {} but the calibration profile {} was fitted on {}", hw->gpu, path, profile->gpu));
  }
  *cal = profile->calibration;
  return absl::OkStatus();
}

absl::Status ParseHardware(const Reader& rd, const YAML::Node& n, const std::string& source_dir, HardwareConfig* hw,
                           perf::Calibration* cal) {
  const std::string p = "hardware";
  MYRIAD_RETURN_IF_ERROR(rd.Map(n, p, {"gpu", "nodes", "gpus_per_node", "nodes_per_rack", "nic_gbps",
                                       "spine_oversubscription", "calibration"}));
  MYRIAD_RETURN_IF_ERROR(rd.Get(n, "gpu", p, &hw->gpu));
  MYRIAD_RETURN_IF_ERROR(rd.Get(n, "nodes", p, &hw->nodes));
  MYRIAD_RETURN_IF_ERROR(rd.Get(n, "gpus_per_node", p, &hw->gpus_per_node));
  MYRIAD_RETURN_IF_ERROR(rd.Get(n, "nodes_per_rack", p, &hw->nodes_per_rack));
  MYRIAD_RETURN_IF_ERROR(rd.Get(n, "nic_gbps", p, &hw->nic_gbps));
  MYRIAD_RETURN_IF_ERROR(rd.Get(n, "spine_oversubscription", p, &hw->spine_oversubscription));
  MYRIAD_RETURN_IF_ERROR(rd.Check(n, "nodes", p, hw->nodes >= 1, "must be at least 1", hw->nodes));
  MYRIAD_RETURN_IF_ERROR(rd.Check(n, "gpus_per_node", p, hw->gpus_per_node >= 1 && hw->gpus_per_node <= 72,
                                  "must be between 1 and 72", hw->gpus_per_node));
  MYRIAD_RETURN_IF_ERROR(rd.Check(n, "nodes", p, int64_t{hw->nodes} * hw->gpus_per_node <= kMaxGpus,
                                  fmt::format("{} nodes of {} GPUs are more than the simulator's maximum of {} GPUs",
                                              hw->nodes, hw->gpus_per_node, kMaxGpus),
                                  hw->nodes));
  MYRIAD_RETURN_IF_ERROR(rd.Check(n, "nodes_per_rack", p, hw->nodes_per_rack >= 1, "must be at least 1",
                                  hw->nodes_per_rack));
  MYRIAD_RETURN_IF_ERROR(rd.Check(n, "nic_gbps", p, hw->nic_gbps > 0, "must be positive", hw->nic_gbps));
  MYRIAD_RETURN_IF_ERROR(rd.Check(n, "spine_oversubscription", p, hw->spine_oversubscription >= 1,
                                  "must be at least 1", hw->spine_oversubscription));
  if (auto g = perf::FindGpu(hw->gpu); !g.ok()) return rd.Error(n["gpu"], "hardware.gpu", std::string(g.status().message()));
  return ReadCalibrationProfile(rd, n, source_dir, hw, cal);
}

}  // namespace

absl::Status ParseUnitLayout(const Reader& rd, const YAML::Node& l, const std::string& lp, const HardwareConfig& hw,
                             perf::UnitLayout* layout) {
  MYRIAD_RETURN_IF_ERROR(rd.Map(l, lp, {"tp", "dp", "ep", "nodes", "redundant_experts"}));
  perf::UnitLayout& lay = *layout;
  MYRIAD_RETURN_IF_ERROR(rd.Get(l, "tp", lp, &lay.tp));
  MYRIAD_RETURN_IF_ERROR(rd.Get(l, "dp", lp, &lay.dp));
  MYRIAD_RETURN_IF_ERROR(rd.Get(l, "ep", lp, &lay.ep));
  MYRIAD_RETURN_IF_ERROR(rd.Get(l, "redundant_experts", lp, &lay.redundant_experts));
  for (const auto& [k, v] : {std::pair{"tp", lay.tp}, std::pair{"dp", lay.dp}, std::pair{"ep", lay.ep}}) {
    MYRIAD_RETURN_IF_ERROR(rd.Check(l, k, lp, v >= 1 && v <= kMaxGpus, fmt::format("must be between 1 and {}", kMaxGpus), v));
  }
  // Checked in 64 bits before tp*dp is used as an int.
  MYRIAD_RETURN_IF_ERROR(rd.Check(l, "dp", lp, int64_t{lay.tp} * lay.dp <= kMaxGpus,
                                  fmt::format("tp*dp = {} GPUs are more than the simulator's maximum of {}",
                                              int64_t{lay.tp} * lay.dp, kMaxGpus),
                                  lay.dp));
  lay.nodes = std::max(1, (lay.tp * lay.dp + hw.gpus_per_node - 1) / hw.gpus_per_node);
  MYRIAD_RETURN_IF_ERROR(rd.Get(l, "nodes", lp, &lay.nodes));
  for (const char* k : {"tp", "dp", "ep", "nodes"}) {
    const int v = std::string(k) == "tp" ? lay.tp : std::string(k) == "dp" ? lay.dp
                : std::string(k) == "ep" ? lay.ep : lay.nodes;
    MYRIAD_RETURN_IF_ERROR(rd.Check(l, k, lp, v >= 1, "must be at least 1", v));
  }
  MYRIAD_RETURN_IF_ERROR(rd.Check(l, "redundant_experts", lp,
                                  lay.redundant_experts >= 0 && lay.redundant_experts <= kMaxRedundantExperts,
                                  fmt::format("must be between 0 and {}", kMaxRedundantExperts), lay.redundant_experts));
  MYRIAD_RETURN_IF_ERROR(rd.Check(l, "nodes", lp, lay.nodes <= hw.nodes,
                                  fmt::format("a unit cannot span more than the cluster's {} nodes", hw.nodes),
                                  lay.nodes));
  MYRIAD_RETURN_IF_ERROR(rd.Check(l, "dp", lp, lay.gpus() <= lay.nodes * hw.gpus_per_node,
                                  fmt::format("tp*dp = {} GPUs do not fit on {} node(s) of {}", lay.gpus(),
                                              lay.nodes, hw.gpus_per_node),
                                  lay.dp));
  return absl::OkStatus();
}

absl::Status ParseMoeConfig(const Reader& rd, const YAML::Node& m, const std::string& mp, MoeConfig* moe) {
  MYRIAD_RETURN_IF_ERROR(rd.Map(m, mp, {"expert_skew", "placement", "two_batch_overlap", "dp_padding",
                                        "drift_interval", "drift_fraction", "rebalance_interval",
                                        "rebalance_mode", "rebalance_tolerance"}));
  MYRIAD_RETURN_IF_ERROR(ParseReplaceSettings(rd, m, mp, &moe->rebalance_mode, &moe->rebalance_tolerance));
  MYRIAD_RETURN_IF_ERROR(rd.Duration(m, "drift_interval", mp, &moe->drift_interval));
  MYRIAD_RETURN_IF_ERROR(rd.Get(m, "drift_fraction", mp, &moe->drift_fraction));
  MYRIAD_RETURN_IF_ERROR(rd.Duration(m, "rebalance_interval", mp, &moe->rebalance_interval));
  MYRIAD_RETURN_IF_ERROR(rd.Check(m, "drift_fraction", mp, moe->drift_fraction >= 0 && moe->drift_fraction <= 1,
                                  "must be between 0 and 1", moe->drift_fraction));
  moe->enabled = true;
  MYRIAD_RETURN_IF_ERROR(rd.Get(m, "expert_skew", mp, &moe->expert_skew));
  MYRIAD_RETURN_IF_ERROR(rd.Get(m, "placement", mp, &moe->placement));
  MYRIAD_RETURN_IF_ERROR(rd.Get(m, "two_batch_overlap", mp, &moe->two_batch_overlap));
  MYRIAD_RETURN_IF_ERROR(rd.Get(m, "dp_padding", mp, &moe->dp_padding));
  MYRIAD_RETURN_IF_ERROR(rd.Check(m, "expert_skew", mp, moe->expert_skew >= 0, "must not be negative",
                                  moe->expert_skew));
  const std::string& pl = moe->placement;
  if (pl != "eplb" && pl != "contiguous" && pl != "balanced") {
    return rd.Error(m["placement"], mp + ".placement", fmt::format("'{}' is not eplb, contiguous or balanced", pl));
  }
  return absl::OkStatus();
}

namespace {

absl::Status ParsePool(const Reader& rd, const YAML::Node& n, const std::string& p,
                       const HardwareConfig& hw, PoolConfig* pool) {
  MYRIAD_RETURN_IF_ERROR(rd.Map(n, p, {"name", "role", "count", "layout", "max_batch_tokens", "max_seqs",
                                       "max_waiting", "moe", "gpu", "gpu_hour_price"}));
  if (const YAML::Node m = n["moe"]) MYRIAD_RETURN_IF_ERROR(ParseMoeConfig(rd, m, p + ".moe", &pool->moe));
  std::string role = "colocated";
  MYRIAD_RETURN_IF_ERROR(rd.Get(n, "name", p, &pool->name));
  MYRIAD_RETURN_IF_ERROR(rd.Get(n, "role", p, &role));
  if (role == "prefill") pool->role = Role::kPrefill;
  else if (role == "decode") pool->role = Role::kDecode;
  else if (role == "colocated") pool->role = Role::kColocated;
  else return rd.Error(n["role"], p + ".role", fmt::format("'{}' is not prefill, decode or colocated", role));
  if (pool->role == Role::kDecode) pool->max_batch_tokens = 2048;
  MYRIAD_RETURN_IF_ERROR(rd.Get(n, "count", p, &pool->count));
  MYRIAD_RETURN_IF_ERROR(rd.Get(n, "gpu", p, &pool->gpu));
  if (!pool->gpu.empty()) {
    if (auto g = perf::FindGpu(pool->gpu); !g.ok()) return rd.Error(n["gpu"], p + ".gpu", std::string(g.status().message()));
  }
  MYRIAD_RETURN_IF_ERROR(rd.Get(n, "gpu_hour_price", p, &pool->gpu_hour_price));
  if (n["gpu_hour_price"]) {
    MYRIAD_RETURN_IF_ERROR(rd.Check(n, "gpu_hour_price", p, pool->gpu_hour_price >= 0 && pool->gpu_hour_price <= 1e6,
                                    "must be between 0 and 1e6", pool->gpu_hour_price));
  }
  MYRIAD_RETURN_IF_ERROR(rd.Get(n, "max_batch_tokens", p, &pool->max_batch_tokens));
  MYRIAD_RETURN_IF_ERROR(rd.Get(n, "max_seqs", p, &pool->max_seqs));
  MYRIAD_RETURN_IF_ERROR(rd.Get(n, "max_waiting", p, &pool->max_waiting));
  MYRIAD_RETURN_IF_ERROR(rd.Check(n, "count", p, pool->count >= 0 && pool->count <= kMaxGpus,
                                  fmt::format("must be between 0 and {}", kMaxGpus), pool->count));
  MYRIAD_RETURN_IF_ERROR(rd.Check(n, "max_batch_tokens", p, pool->max_batch_tokens >= 1, "must be at least 1",
                                  pool->max_batch_tokens));
  MYRIAD_RETURN_IF_ERROR(rd.Check(n, "max_seqs", p, pool->max_seqs >= 1, "must be at least 1", pool->max_seqs));
  MYRIAD_RETURN_IF_ERROR(rd.Check(n, "max_waiting", p, pool->max_waiting >= 0, "must not be negative",
                                  pool->max_waiting));
  const YAML::Node l = n["layout"];
  if (!l) return rd.Error(n, p + ".layout", "missing (e.g. {tp: 1, dp: 32, ep: 32, nodes: 4})");
  return ParseUnitLayout(rd, l, p + ".layout", hw, &pool->layout);
}

absl::Status ParseLength(const Reader& rd, const YAML::Node& n, const std::string& p, LengthDist* d) {
  MYRIAD_RETURN_IF_ERROR(rd.Map(n, p, {"mean", "cv", "min", "max"}));
  MYRIAD_RETURN_IF_ERROR(rd.Get(n, "mean", p, &d->mean));
  MYRIAD_RETURN_IF_ERROR(rd.Get(n, "cv", p, &d->cv));
  MYRIAD_RETURN_IF_ERROR(rd.Get(n, "min", p, &d->min));
  MYRIAD_RETURN_IF_ERROR(rd.Get(n, "max", p, &d->max));
  return absl::OkStatus();
}

absl::Status ParseWorkload(const Reader& rd, const YAML::Node& n, const std::string& source_dir,
                           WorkloadConfig* w) {
  const std::string p = "workload";
  if (!n.IsMap()) return rd.Error(n, p, "expected a mapping");
  MYRIAD_RETURN_IF_ERROR(rd.Get(n, "type", p, &w->type));
  if (w->type == "synthetic") {
    MYRIAD_RETURN_IF_ERROR(rd.Map(n, p, {"type", "rate", "arrival", "burst_cv", "diurnal", "burst", "input", "output",
                                         "system_prompts", "sessions", "tenants"}));
    SyntheticOptions& o = w->synthetic;
    MYRIAD_RETURN_IF_ERROR(rd.Get(n, "rate", p, &o.rate));
    MYRIAD_RETURN_IF_ERROR(rd.Get(n, "arrival", p, &o.arrival));
    MYRIAD_RETURN_IF_ERROR(rd.Get(n, "burst_cv", p, &o.burst_cv));
    if (const YAML::Node d = n["diurnal"]) {
      const std::string dp = p + ".diurnal";
      MYRIAD_RETURN_IF_ERROR(rd.Map(d, dp, {"amplitude", "period", "phase"}));
      MYRIAD_RETURN_IF_ERROR(rd.Get(d, "amplitude", dp, &o.diurnal_amplitude));
      MYRIAD_RETURN_IF_ERROR(rd.Duration(d, "period", dp, &o.diurnal_period));
      MYRIAD_RETURN_IF_ERROR(rd.Get(d, "phase", dp, &o.diurnal_phase));
    }
    if (const YAML::Node d = n["burst"]) {
      const std::string dp = p + ".burst";
      MYRIAD_RETURN_IF_ERROR(rd.Map(d, dp, {"factor", "start", "duration", "ramp"}));
      MYRIAD_RETURN_IF_ERROR(rd.Get(d, "factor", dp, &o.burst_factor));
      MYRIAD_RETURN_IF_ERROR(rd.Duration(d, "start", dp, &o.burst_start));
      MYRIAD_RETURN_IF_ERROR(rd.Duration(d, "duration", dp, &o.burst_duration));
      MYRIAD_RETURN_IF_ERROR(rd.Duration(d, "ramp", dp, &o.burst_ramp));
    }
    if (const YAML::Node d = n["input"]) MYRIAD_RETURN_IF_ERROR(ParseLength(rd, d, p + ".input", &o.input));
    if (const YAML::Node d = n["output"]) MYRIAD_RETURN_IF_ERROR(ParseLength(rd, d, p + ".output", &o.output));
    if (const YAML::Node d = n["system_prompts"]) {
      const std::string dp = p + ".system_prompts";
      MYRIAD_RETURN_IF_ERROR(rd.Map(d, dp, {"count", "zipf", "tokens", "fraction"}));
      MYRIAD_RETURN_IF_ERROR(rd.Get(d, "count", dp, &o.system_prompts));
      MYRIAD_RETURN_IF_ERROR(rd.Get(d, "zipf", dp, &o.system_prompt_zipf));
      MYRIAD_RETURN_IF_ERROR(rd.Get(d, "tokens", dp, &o.system_prompt_tokens));
      MYRIAD_RETURN_IF_ERROR(rd.Get(d, "fraction", dp, &o.system_prompt_fraction));
    }
    if (const YAML::Node d = n["sessions"]) {
      const std::string dp = p + ".sessions";
      MYRIAD_RETURN_IF_ERROR(rd.Map(d, dp, {"fraction", "turns_mean", "think_time", "turn_tokens"}));
      MYRIAD_RETURN_IF_ERROR(rd.Get(d, "fraction", dp, &o.session_fraction));
      MYRIAD_RETURN_IF_ERROR(rd.Get(d, "turns_mean", dp, &o.turns_mean));
      MYRIAD_RETURN_IF_ERROR(rd.Duration(d, "think_time", dp, &o.think_time_mean));
      if (const YAML::Node t = d["turn_tokens"]) {
        MYRIAD_RETURN_IF_ERROR(ParseLength(rd, t, dp + ".turn_tokens", &o.turn_tokens));
      }
    }
    if (const YAML::Node d = n["tenants"]) {
      const std::string dp = p + ".tenants";
      MYRIAD_RETURN_IF_ERROR(rd.Map(d, dp, {"weights"}));
      const YAML::Node ws = d["weights"];
      if (!ws || !ws.IsSequence()) return rd.Error(d, dp + ".weights", "expected a list of shares");
      o.tenant_weights.clear();
      for (size_t i = 0; i < ws.size(); ++i) {
        double w = 0;
        MYRIAD_RETURN_IF_ERROR(rd.Read(ws[i], fmt::format("{}.weights[{}]", dp, i), &w));
        o.tenant_weights.push_back(w);
      }
      o.tenants = static_cast<int>(o.tenant_weights.size());
    }
    return absl::OkStatus();
  }
  if (w->type == "mooncake" || w->type == "azure") {
    MYRIAD_RETURN_IF_ERROR(rd.Map(n, p, {"type", "path", "rate_scale", "replicas", "loop", "keys"}));
    if (!n["path"]) return rd.Error(n, p + ".path", "missing: the trace file to replay");
    MYRIAD_RETURN_IF_ERROR(rd.Get(n, "path", p, &w->trace_path));
    std::filesystem::path path(w->trace_path);
    if (path.is_relative() && !source_dir.empty()) w->trace_path = (std::filesystem::path(source_dir) / path).string();
    MYRIAD_RETURN_IF_ERROR(rd.Get(n, "rate_scale", p, &w->replay.rate_scale));
    MYRIAD_RETURN_IF_ERROR(rd.Get(n, "replicas", p, &w->replay.replicas));
    MYRIAD_RETURN_IF_ERROR(rd.Get(n, "loop", p, &w->replay.loop));
    std::string keys = "content";
    MYRIAD_RETURN_IF_ERROR(rd.Get(n, "keys", p, &keys));
    MYRIAD_RETURN_IF_ERROR(rd.Check(n, "keys", p, keys == "content" || keys == "tokens",
                                    "must be content (from the trace's block ids) or tokens (hash the prompt "
                                    "`myriad loadgen --trace` sends)", keys));
    w->replay.token_keys = keys == "tokens";
    MYRIAD_RETURN_IF_ERROR(rd.Check(n, "rate_scale", p, w->replay.rate_scale > 0, "must be positive",
                                    w->replay.rate_scale));
    MYRIAD_RETURN_IF_ERROR(rd.Check(n, "replicas", p, w->replay.replicas >= 1, "must be at least 1",
                                    w->replay.replicas));
    return absl::OkStatus();
  }
  return rd.Error(n["type"] ? n["type"] : n, p + ".type",
                  fmt::format("'{}' is not synthetic, mooncake or azure", w->type));
}

absl::Status ParseRouter(const Reader& rd, const YAML::Node& n, RouterConfig* r) {
  const std::string p = "router";
  if (n.IsScalar()) {
    r->policy = n.Scalar();
  } else {
    MYRIAD_RETURN_IF_ERROR(rd.Map(n, p, {"policy", "event_delay", "event_loss", "event_replay", "reject_factor",
                                         "disagg_min_uncached", "hot_queue_seconds", "index_max_entries",
                                         "provisional_ttl", "contention", "learn_cost", "handoff_delay"}));
    MYRIAD_RETURN_IF_ERROR(rd.Get(n, "learn_cost", p, &r->learn_cost));
    MYRIAD_RETURN_IF_ERROR(rd.Get(n, "policy", p, &r->policy));
    MYRIAD_RETURN_IF_ERROR(rd.Duration(n, "event_delay", p, &r->event_delay));
    MYRIAD_RETURN_IF_ERROR(rd.Get(n, "event_loss", p, &r->event_loss));
    MYRIAD_RETURN_IF_ERROR(rd.Get(n, "event_replay", p, &r->event_replay));
    MYRIAD_RETURN_IF_ERROR(rd.Get(n, "reject_factor", p, &r->reject_factor));
    MYRIAD_RETURN_IF_ERROR(rd.Get(n, "disagg_min_uncached", p, &r->disagg_min_uncached));
    MYRIAD_RETURN_IF_ERROR(rd.Get(n, "hot_queue_seconds", p, &r->hot_queue_seconds));
    MYRIAD_RETURN_IF_ERROR(rd.Get(n, "index_max_entries", p, &r->index_max_entries));
    MYRIAD_RETURN_IF_ERROR(rd.Duration(n, "provisional_ttl", p, &r->provisional_ttl));
    MYRIAD_RETURN_IF_ERROR(rd.Get(n, "contention", p, &r->contention));
    MYRIAD_RETURN_IF_ERROR(rd.Duration(n, "handoff_delay", p, &r->handoff_delay));
    MYRIAD_RETURN_IF_ERROR(rd.Check(n, "handoff_delay", p, r->handoff_delay >= 0 && r->handoff_delay <= 10 * kSecond,
                                    "must be between 0 and 10s", FormatDuration(r->handoff_delay)));
    MYRIAD_RETURN_IF_ERROR(rd.Check(n, "event_loss", p, r->event_loss >= 0 && r->event_loss <= 1,
                                    "must be between 0 and 1", r->event_loss));
    MYRIAD_RETURN_IF_ERROR(rd.Check(n, "reject_factor", p, r->reject_factor >= 0, "must not be negative",
                                    r->reject_factor));
    MYRIAD_RETURN_IF_ERROR(rd.Check(n, "index_max_entries", p, r->index_max_entries >= 1, "must be at least 1",
                                    r->index_max_entries));
    MYRIAD_RETURN_IF_ERROR(rd.Check(n, "contention", p, r->contention > 0 && r->contention <= 100,
                                    "must be above 0 and at most 100 (times the TTFT SLO)", r->contention));
  }
  if (auto parsed = policy::ParsePolicyName(r->policy); !parsed.ok()) {
    return rd.Error(n.IsScalar() ? n : n["policy"], n.IsScalar() ? "router" : "router.policy",
                    std::string(parsed.status().message()));
  }
  return absl::OkStatus();
}

absl::Status ParseTenants(const Reader& rd, const YAML::Node& n, std::vector<policy::TenantConfig>* out) {
  if (!n.IsSequence() || n.size() == 0) return rd.Error(n, "tenants", "expected a non-empty list of tenants");
  for (size_t i = 0; i < n.size(); ++i) {
    const std::string p = fmt::format("tenants[{}]", i);
    const YAML::Node t = n[i];
    MYRIAD_RETURN_IF_ERROR(
        rd.Map(t, p, {"name", "weight", "priority", "quota_tokens_per_s", "burst_tokens", "fill"}));
    policy::TenantConfig c;
    c.name = fmt::format("tenant{}", i);
    MYRIAD_RETURN_IF_ERROR(rd.Get(t, "name", p, &c.name));
    MYRIAD_RETURN_IF_ERROR(rd.Get(t, "weight", p, &c.weight));
    MYRIAD_RETURN_IF_ERROR(rd.Get(t, "priority", p, &c.priority));
    MYRIAD_RETURN_IF_ERROR(rd.Get(t, "quota_tokens_per_s", p, &c.quota_tokens_per_s));
    MYRIAD_RETURN_IF_ERROR(rd.Get(t, "burst_tokens", p, &c.burst_tokens));
    MYRIAD_RETURN_IF_ERROR(rd.Check(t, "priority", p,
                                    c.priority >= policy::kMinTenantPriority && c.priority <= policy::kMaxTenantPriority,
                                    fmt::format("must be in [{}, {}]", policy::kMinTenantPriority, policy::kMaxTenantPriority),
                                    c.priority));
    bool fill = false;
    MYRIAD_RETURN_IF_ERROR(rd.Get(t, "fill", p, &fill));
    if (fill) {
      // Fill is a class of its own, below every priority: one or the other.
      if (t["priority"]) return rd.Error(t["priority"], p + ".priority", "a fill tenant has no priority");
      c.priority = policy::kFillPriority;
    }
    MYRIAD_RETURN_IF_ERROR(rd.Check(t, "weight", p, c.weight > 0, "must be positive", c.weight));
    MYRIAD_RETURN_IF_ERROR(rd.Check(t, "quota_tokens_per_s", p, c.quota_tokens_per_s >= 0, "must not be negative",
                                    c.quota_tokens_per_s));
    MYRIAD_RETURN_IF_ERROR(rd.Check(t, "burst_tokens", p, c.burst_tokens >= 0, "must not be negative", c.burst_tokens));
    out->push_back(std::move(c));
  }
  return absl::OkStatus();
}

absl::Status ParseRoot(const Reader& rd, const YAML::Node& root, const std::string& source_dir, Scenario* s) {
  MYRIAD_RETURN_IF_ERROR(rd.Map(root, "", {"name", "seed", "duration", "drain", "hardware", "model", "pools",
                                           "workload", "router", "tenants", "slo", "gpu_hour_price", "faults",
                                           "kv_block_tokens", "store", "elastic"}));
  MYRIAD_RETURN_IF_ERROR(rd.Get(root, "name", "", &s->name));
  MYRIAD_RETURN_IF_ERROR(rd.Get(root, "seed", "", &s->seed));
  MYRIAD_RETURN_IF_ERROR(rd.Duration(root, "duration", "", &s->duration));
  MYRIAD_RETURN_IF_ERROR(rd.Duration(root, "drain", "", &s->drain));
  MYRIAD_RETURN_IF_ERROR(rd.Check(root, "duration", "", s->duration > 0 && s->duration <= kMaxScenarioTime,
                                  fmt::format("must be positive and at most {}", FormatDuration(kMaxScenarioTime)),
                                  FormatDuration(s->duration)));
  MYRIAD_RETURN_IF_ERROR(rd.Check(root, "drain", "", s->drain <= kMaxScenarioTime,
                                  fmt::format("must be at most {}", FormatDuration(kMaxScenarioTime)),
                                  FormatDuration(s->drain)));
  if (!root["hardware"]) return rd.Error(root, "hardware", "missing");
  MYRIAD_RETURN_IF_ERROR(ParseHardware(rd, root["hardware"], source_dir, &s->hardware, &s->calibration));
  MYRIAD_RETURN_IF_ERROR(rd.Get(root, "model", "", &s->model));
  if (auto m = perf::FindModel(s->model); !m.ok()) {
    return rd.Error(root["model"] ? root["model"] : root, "model", std::string(m.status().message()));
  }
  const YAML::Node pools = root["pools"];
  if (!pools || !pools.IsSequence() || pools.size() == 0) {
    return rd.Error(pools ? pools : root, "pools", "expected a non-empty list of pools");
  }
  for (size_t i = 0; i < pools.size(); ++i) {
    PoolConfig pool;
    pool.name = fmt::format("pool{}", i);
    MYRIAD_RETURN_IF_ERROR(ParsePool(rd, pools[i], fmt::format("pools[{}]", i), s->hardware, &pool));
    s->pools.push_back(std::move(pool));
  }
  // 64-bit: each term is at most kMaxGpus^2 * 72, so no sum of a file's pools overflows.
  int64_t need = 0;
  for (const auto& pl : s->pools) {
    need += pl.layout.gpus() >= s->hardware.gpus_per_node || pl.layout.nodes > 1
                ? int64_t{pl.count} * pl.layout.nodes * s->hardware.gpus_per_node
                : int64_t{pl.count} * pl.layout.gpus();
  }
  if (need > s->hardware.gpus()) {
    return rd.Error(pools, "pools",
                    fmt::format("the units need {} GPUs but the cluster has {} ({} nodes of {})", need,
                                s->hardware.gpus(), s->hardware.nodes, s->hardware.gpus_per_node));
  }
  if (const YAML::Node w = root["workload"]) MYRIAD_RETURN_IF_ERROR(ParseWorkload(rd, w, source_dir, &s->workload));
  if (const YAML::Node r = root["router"]) MYRIAD_RETURN_IF_ERROR(ParseRouter(rd, r, &s->router));
  if (const YAML::Node t = root["tenants"]) MYRIAD_RETURN_IF_ERROR(ParseTenants(rd, t, &s->tenants));
  if (const YAML::Node f = root["faults"]) {
    MYRIAD_RETURN_IF_ERROR(ParseFaults(rd, f, &s->faults));
    // The timeline holds one bucket per timeline_bucket of the run, allocated at its start.
    constexpr Nanos kMaxTimelineBuckets = 1'000'000;
    const Nanos bucket = s->faults.timeline_bucket;
    MYRIAD_RETURN_IF_ERROR(rd.Check(f, "timeline_bucket", "faults",
                                    bucket == 0 || (s->duration + s->drain) / bucket < kMaxTimelineBuckets,
                                    fmt::format("must leave at most {} buckets in duration + drain", kMaxTimelineBuckets),
                                    FormatDuration(bucket)));
  }
  if (const YAML::Node st = root["store"]) {
    const int racks = (s->hardware.nodes + s->hardware.nodes_per_rack - 1) / s->hardware.nodes_per_rack;
    MYRIAD_RETURN_IF_ERROR(ParseStore(rd, st, racks, s->duration + s->drain, &s->store));
  }
  if (const YAML::Node el = root["elastic"]) {
    std::vector<std::string> names;
    std::vector<int> counts;
    for (const auto& pl : s->pools) {
      names.push_back(pl.name);
      counts.push_back(pl.count);
    }
    MYRIAD_RETURN_IF_ERROR(ParseElastic(rd, el, names, counts, &s->elastic));
    // Elastic units come and go through routability, which the failure model drives too.
    if (root["faults"]) return rd.Error(el, "elastic", "cannot be combined with a faults: section yet");
    const PdRatioConfig& pd = s->elastic.pd_ratio;
    if (pd.enabled) {
      const auto pi = static_cast<size_t>(pd.prefill_index), di = static_cast<size_t>(pd.decode_index);
      const PoolConfig &pp = s->pools[pi], &dp = s->pools[di];
      if (pp.role != Role::kPrefill || dp.role != Role::kDecode) {
        return rd.Error(el["pd_ratio"], "elastic.pd_ratio", "needs a prefill pool and a decode pool");
      }
      // A switched unit keeps its weights: the two pools must hold the same cards in the same shape.
      if (s->PoolGpu(pi) != s->PoolGpu(di) || pp.layout.gpus() != dp.layout.gpus() || pp.layout.nodes != dp.layout.nodes) {
        return rd.Error(el["pd_ratio"], "elastic.pd_ratio",
                        fmt::format("pools '{}' ({} x {} GPUs on {} nodes) and '{}' ({} x {} on {}) must have the same "
                                    "GPU type and unit shape for a unit to switch roles",
                                    pp.name, s->PoolGpu(pi), pp.layout.gpus(), pp.layout.nodes, dp.name, s->PoolGpu(di),
                                    dp.layout.gpus(), dp.layout.nodes));
      }
    }
  }
  if (const YAML::Node slo = root["slo"]) {
    MYRIAD_RETURN_IF_ERROR(rd.Map(slo, "slo", {"ttft", "tpot"}));
    MYRIAD_RETURN_IF_ERROR(rd.Duration(slo, "ttft", "slo", &s->slo.ttft));
    MYRIAD_RETURN_IF_ERROR(rd.Duration(slo, "tpot", "slo", &s->slo.tpot));
  }
  MYRIAD_RETURN_IF_ERROR(rd.Get(root, "gpu_hour_price", "", &s->gpu_hour_price));
  MYRIAD_RETURN_IF_ERROR(rd.Check(root, "gpu_hour_price", "", s->gpu_hour_price >= 0, "must not be negative",
                                  s->gpu_hour_price));
  MYRIAD_RETURN_IF_ERROR(rd.Get(root, "kv_block_tokens", "", &s->kv_block_tokens));
  MYRIAD_RETURN_IF_ERROR(rd.Check(root, "kv_block_tokens", "", s->kv_block_tokens >= 1 && 512 % s->kv_block_tokens == 0,
                                  "must divide 512 (the Mooncake trace's block)", s->kv_block_tokens));
  s->workload.synthetic.block_tokens = s->kv_block_tokens;
  s->workload.synthetic.duration = s->duration;
  s->workload.synthetic.seed = s->seed;
  s->workload.replay.block_tokens = s->kv_block_tokens;
  s->workload.replay.duration = s->duration;
  s->workload.replay.seed = s->seed;
  if (auto e = CheckWorkload(*s)) return rd.Error(Reader::Deepest(root, e->field), e->field, e->what);
  return absl::OkStatus();
}

absl::StatusOr<Scenario> Parse(std::string_view yaml, const std::string& source_name,
                               const std::string& source_dir) {
  YAML::Node root;
  try {
    root = YAML::Load(std::string(yaml));
  } catch (const YAML::ParserException& e) {
    return absl::InvalidArgumentError(fmt::format("{}:{}: YAML syntax: {}", source_name, e.mark.line + 1, e.msg));
  }
  return ParseScenarioTree(root, source_name, source_dir);
}

}  // namespace

absl::StatusOr<Scenario> ParseScenarioTree(const YAML::Node& root, const std::string& source_name,
                                           const std::string& source_dir) {
  Reader rd(source_name);
  if (!root || !root.IsMap()) return absl::InvalidArgumentError(fmt::format("{}: expected a YAML mapping at the top", source_name));
  Scenario s;
  try {
    MYRIAD_RETURN_IF_ERROR(rd.UniqueKeys(root));
    MYRIAD_RETURN_IF_ERROR(ParseRoot(rd, root, source_dir, &s));
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(fmt::format("{}:{}: {}", source_name, e.mark.line + 1, e.msg));
  }
  if (s.name.empty()) s.name = std::filesystem::path(source_name).stem().string();
  return s;
}

absl::StatusOr<Scenario> ParseScenario(std::string_view yaml, const std::string& source_name) {
  return Parse(yaml, source_name, "");
}

absl::StatusOr<Scenario> LoadScenario(const std::string& path) { return LoadScenario(path, {}); }

absl::StatusOr<Scenario> LoadScenario(const std::string& path, const std::vector<std::string>& overrides) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(fmt::format("{}: cannot open scenario file", path));
  std::stringstream ss;
  ss << in.rdbuf();
  std::string text = ss.str();
  if (!overrides.empty()) {
    YAML::Node root;
    try {
      root = YAML::Load(text);
    } catch (const YAML::ParserException& e) {
      return absl::InvalidArgumentError(fmt::format("{}:{}: YAML syntax: {}", path, e.mark.line + 1, e.msg));
    }
    // Before the overrides: the lines named are the file's, not those of the text re-emitted below.
    MYRIAD_RETURN_IF_ERROR(Reader(path).UniqueKeys(root));
    for (const std::string& o : overrides) {
      const size_t eq = o.find('=');
      if (eq == std::string::npos || eq == 0) {
        return absl::InvalidArgumentError(fmt::format("--set '{}': expected path=value", o));
      }
      std::vector<std::string> keys;
      for (size_t start = 0; start <= eq;) {
        const size_t dot = std::min(o.find('.', start), eq);
        keys.push_back(o.substr(start, dot - start));
        start = dot + 1;
      }
      try {
        // yaml-cpp nodes are handles: walk down by reassigning a copy of the handle.
        std::vector<YAML::Node> chain{root};
        for (size_t i = 0; i + 1 < keys.size(); ++i) {
          const std::string& k = keys[i];
          YAML::Node cur = chain.back();
          const bool index = !k.empty() && std::all_of(k.begin(), k.end(), ::isdigit);
          const std::string walked = fmt::format("{}", fmt::join(keys.begin(), keys.begin() + i + 1, "."));
          if (cur.IsSequence()) {
            if (!index) {
              return absl::InvalidArgumentError(
                  fmt::format("--set '{}': '{}' is a list: name an entry by its index, not '{}'", o,
                              fmt::join(keys.begin(), keys.begin() + i, "."), k));
            }
            const size_t at = std::stoul(k);
            if (at >= cur.size()) {
              return absl::InvalidArgumentError(fmt::format("--set '{}': {} has only {} entries", o, k, cur.size()));
            }
            chain.push_back(cur[at]);
          } else {
            chain.push_back(cur[k]);
          }
          if (chain.back().IsScalar()) {
            if (i == 0 && k == "router") {
              // The shorthand `router: NAME` is `router: {policy: NAME}`: expand it to set another key.
              YAML::Node expanded(YAML::NodeType::Map);
              expanded["policy"] = chain.back().Scalar();
              cur[k] = expanded;
              chain.back() = cur[k];
            } else {
              return absl::InvalidArgumentError(
                  fmt::format("--set '{}': '{}' is a value ('{}'), not a mapping or list to set a key in", o,
                              walked, chain.back().Scalar()));
            }
          }
        }
        chain.back()[keys.back()] = YAML::Load(o.substr(eq + 1));
      } catch (const YAML::Exception& e) {
        return absl::InvalidArgumentError(fmt::format("--set '{}': {}", o, e.msg));
      }
    }
    YAML::Emitter emitter;
    emitter << root;
    text = emitter.c_str();
  }
  return Parse(text, path, std::filesystem::path(path).parent_path().string());
}

namespace {

absl::Status CheckScaledWorkload(const Scenario& s) {
  if (auto e = CheckWorkload(s)) return absl::InvalidArgumentError(fmt::format("{}: {}", e->field, e->what));
  return absl::OkStatus();
}

}  // namespace

absl::Status ScaleScenario(Scenario& s, double factor) {
  if (!(factor > 0) || !std::isfinite(factor)) return absl::InvalidArgumentError("scale factor must be positive");
  // In doubles first: the scaled counts are cast to int only once they are known to fit.
  const double nodes = std::round(s.hardware.nodes * factor);
  if (nodes * s.hardware.gpus_per_node > kMaxGpus) {
    return absl::InvalidArgumentError(fmt::format("the cluster would have {:.0f} GPUs, more than the simulator's "
                                                  "maximum of {}",
                                                  nodes * s.hardware.gpus_per_node, kMaxGpus));
  }
  s.hardware.nodes = static_cast<int>(nodes);
  if (s.hardware.nodes < 1) return absl::InvalidArgumentError("scale leaves the cluster with no nodes");
  for (auto& p : s.pools) {
    // Rounded down so that the scaled pools still fit the scaled cluster.
    const int count = static_cast<int>(std::floor(p.count * factor + 1e-9));
    if (p.count > 0 && count < 1) {
      return absl::InvalidArgumentError(fmt::format("scale leaves pool '{}' with no units", p.name));
    }
    p.count = count;
  }
  // The elasticity bounds shrink with their pools, and stay inside them.
  auto scale_units = [&](int n, int count) { return std::clamp(static_cast<int>(std::floor(n * factor + 1e-9)), 1, std::max(count, 1)); };
  for (AutoscaleConfig& a : s.elastic.autoscale) {
    const int count = s.pools[static_cast<size_t>(a.pool_index)].count;
    a.min = scale_units(a.min, count);
    a.initial = std::max(a.min, scale_units(a.initial, count));
  }
  if (PdRatioConfig& pd = s.elastic.pd_ratio; pd.enabled) {
    const int pc = s.pools[static_cast<size_t>(pd.prefill_index)].count, dc = s.pools[static_cast<size_t>(pd.decode_index)].count;
    pd.options.min_units = std::min(pd.options.min_units, std::min(pc, dc));
    pd.prefill_initial = std::max(pd.options.min_units, scale_units(pd.prefill_initial, pc));
    pd.decode_initial = std::max(pd.options.min_units, scale_units(pd.decode_initial, dc));
  }
  for (CanaryUnits& cu : s.elastic.rollout.canary) {
    // The canary keeps a unit, leaves the stable version one, and stays below the pool's floor
    // (the floor rises to make room at small scales).
    const int count = s.pools[static_cast<size_t>(cu.pool_index)].count;
    if (count < 2) {
      return absl::InvalidArgumentError(fmt::format("scale leaves pool '{}' too few units for the rollout's canary "
                                                    "and the stable version",
                                                    s.pools[static_cast<size_t>(cu.pool_index)].name));
    }
    cu.units = std::clamp(static_cast<int>(std::floor(cu.units * factor + 1e-9)), 1, count - 1);
    for (AutoscaleConfig& a : s.elastic.autoscale) {
      if (a.pool_index != cu.pool_index) continue;
      a.min = std::max(a.min, cu.units + 1);
      a.initial = std::max(a.initial, a.min);
    }
    if (PdRatioConfig& pd = s.elastic.pd_ratio;
        pd.enabled && (pd.prefill_index == cu.pool_index || pd.decode_index == cu.pool_index)) {
      cu.units = std::min(cu.units, pd.options.min_units - 1);
      if (cu.units < 1) {
        return absl::InvalidArgumentError(fmt::format("scale leaves pool '{}' no unit for the rollout's canary below "
                                                      "pd_ratio's min_units",
                                                      s.pools[static_cast<size_t>(cu.pool_index)].name));
      }
    }
  }
  s.workload.synthetic.rate *= factor;
  // A trace keeps its own shape: more or fewer disjoint copies of it, and only when there is
  // a single copy, a faster or slower replay.
  const double replicas = s.workload.replay.replicas * factor;
  if (replicas > kMaxTraceReplicas) {
    return absl::InvalidArgumentError(fmt::format("workload.replicas: {:.0f} copies of the trace are more than the "
                                                  "maximum of {}",
                                                  replicas, kMaxTraceReplicas));
  }
  if (replicas >= 1) s.workload.replay.replicas = static_cast<int>(std::lround(replicas));
  else s.workload.replay.rate_scale *= replicas;
  return CheckScaledWorkload(s);
}

absl::Status ScaleLoad(Scenario& s, double factor) {
  if (!(factor > 0) || !std::isfinite(factor)) return absl::InvalidArgumentError("load factor must be positive");
  for (CanaryUnits& cu : s.elastic.rollout.canary) {
    // The canary keeps a unit, leaves the stable version one, and stays below the pool's floor
    // (the floor rises to make room at small scales).
    const int count = s.pools[static_cast<size_t>(cu.pool_index)].count;
    if (count < 2) {
      return absl::InvalidArgumentError(fmt::format("scale leaves pool '{}' too few units for the rollout's canary "
                                                    "and the stable version",
                                                    s.pools[static_cast<size_t>(cu.pool_index)].name));
    }
    cu.units = std::clamp(static_cast<int>(std::floor(cu.units * factor + 1e-9)), 1, count - 1);
    for (AutoscaleConfig& a : s.elastic.autoscale) {
      if (a.pool_index != cu.pool_index) continue;
      a.min = std::max(a.min, cu.units + 1);
      a.initial = std::max(a.initial, a.min);
    }
    if (PdRatioConfig& pd = s.elastic.pd_ratio;
        pd.enabled && (pd.prefill_index == cu.pool_index || pd.decode_index == cu.pool_index)) {
      cu.units = std::min(cu.units, pd.options.min_units - 1);
      if (cu.units < 1) {
        return absl::InvalidArgumentError(fmt::format("scale leaves pool '{}' no unit for the rollout's canary below "
                                                      "pd_ratio's min_units",
                                                      s.pools[static_cast<size_t>(cu.pool_index)].name));
      }
    }
  }
  s.workload.synthetic.rate *= factor;
  s.workload.replay.rate_scale *= factor;
  return CheckScaledWorkload(s);
}

bool Scenario::PerPoolAccounting() const {
  if (elastic.enabled) return true;
  for (const auto& p : pools) {
    if (!p.gpu.empty() || p.gpu_hour_price >= 0) return true;
  }
  return false;
}

std::string_view RoleName(Role r) {
  switch (r) {
    case Role::kPrefill: return "prefill";
    case Role::kDecode: return "decode";
    case Role::kColocated: return "colocated";
  }
  return "?";
}

}  // namespace myriad::sim
