#include "cli/twin.h"

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/config_file.h"
#include "core/rng.h"
#include "core/stats.h"
#include "core/yaml_reader.h"

namespace myriad::cli {

namespace {

using json = nlohmann::ordered_json;

absl::Status ParseTenants(const YamlReader& rd, const YAML::Node& n, TwinDescription* d) {
  if (!n) return absl::OkStatus();
  if (!n.IsSequence()) return rd.Error(n, "tenants", "expected a list of {name, share, ...}");
  for (size_t i = 0; i < n.size(); ++i) {
    const YAML::Node t = n[i];
    const std::string p = fmt::format("tenants[{}]", i);
    MYRIAD_RETURN_IF_ERROR(rd.Map(t, p, {"name", "share", "weight", "priority", "quota_tokens_per_s", "burst_tokens"}));
    TwinTenant x;
    MYRIAD_RETURN_IF_ERROR(rd.Get(t, "name", p, &x.name));
    MYRIAD_RETURN_IF_ERROR(rd.Get(t, "share", p, &x.share));
    MYRIAD_RETURN_IF_ERROR(rd.Get(t, "weight", p, &x.weight));
    MYRIAD_RETURN_IF_ERROR(rd.Get(t, "priority", p, &x.priority));
    MYRIAD_RETURN_IF_ERROR(rd.Get(t, "quota_tokens_per_s", p, &x.quota_tokens_per_s));
    MYRIAD_RETURN_IF_ERROR(rd.Get(t, "burst_tokens", p, &x.burst_tokens));
    MYRIAD_RETURN_IF_ERROR(rd.Check(t, "name", p, !x.name.empty(), "must not be empty", "''"));
    MYRIAD_RETURN_IF_ERROR(rd.Check(t, "share", p, x.share > 0 && x.share <= 1, "must be in (0, 1]", x.share));
    MYRIAD_RETURN_IF_ERROR(rd.Check(t, "weight", p, x.weight > 0, "must be positive", x.weight));
    MYRIAD_RETURN_IF_ERROR(rd.Check(t, "quota_tokens_per_s", p, x.quota_tokens_per_s >= 0, "must be >= 0",
                                    x.quota_tokens_per_s));
    MYRIAD_RETURN_IF_ERROR(rd.Check(t, "burst_tokens", p, x.burst_tokens >= 0, "must be >= 0", x.burst_tokens));
    d->tenants.push_back(std::move(x));
  }
  if (d->tenants.size() > 16) return rd.Error(n, "tenants", fmt::format("at most 16, got {}", d->tenants.size()));
  return absl::OkStatus();
}

absl::Status ParseWorkload(const YamlReader& rd, const YAML::Node& n, const std::string& dir, TwinWorkload* w) {
  if (!n) return absl::OkStatus();
  const std::string p = "workload";
  MYRIAD_RETURN_IF_ERROR(rd.Map(n, p, {"trace", "requests", "rate", "prefixes", "zipf", "prefix_blocks",
                                       "own_blocks", "output_tokens"}));
  MYRIAD_RETURN_IF_ERROR(rd.Get(n, "trace", p, &w->trace));
  if (!w->trace.empty() && std::filesystem::path(w->trace).is_relative() && !dir.empty()) {
    w->trace = (std::filesystem::path(dir) / w->trace).string();
  }
  MYRIAD_RETURN_IF_ERROR(rd.Get(n, "requests", p, &w->requests));
  MYRIAD_RETURN_IF_ERROR(rd.Get(n, "rate", p, &w->rate));
  MYRIAD_RETURN_IF_ERROR(rd.Get(n, "prefixes", p, &w->prefixes));
  MYRIAD_RETURN_IF_ERROR(rd.Get(n, "zipf", p, &w->zipf));
  MYRIAD_RETURN_IF_ERROR(rd.Get(n, "prefix_blocks", p, &w->prefix_blocks));
  for (const char* range : {"own_blocks", "output_tokens"}) {
    const YAML::Node r = n[range];
    if (!r) continue;
    const std::string rp = p + "." + range;
    MYRIAD_RETURN_IF_ERROR(rd.Map(r, rp, {"min", "max"}));
    int* lo = std::string_view(range) == "own_blocks" ? &w->own_blocks_min : &w->output_min;
    int* hi = std::string_view(range) == "own_blocks" ? &w->own_blocks_max : &w->output_max;
    MYRIAD_RETURN_IF_ERROR(rd.Get(r, "min", rp, lo));
    MYRIAD_RETURN_IF_ERROR(rd.Get(r, "max", rp, hi));
    const bool blocks = std::string_view(range) == "own_blocks";
    const int bound = blocks ? 64 : 4096;
    MYRIAD_RETURN_IF_ERROR(rd.Check(r, "min", rp, *lo >= (blocks ? 0 : 1), blocks ? "must be >= 0" : "must be >= 1", *lo));
    MYRIAD_RETURN_IF_ERROR(rd.Check(r, "max", rp, *hi >= *lo && *hi <= bound,
                                    fmt::format("must be in [min, {}]", bound), *hi));
  }
  MYRIAD_RETURN_IF_ERROR(rd.Check(n, "requests", p, w->requests >= 1 && w->requests <= kMaxTwinRequests,
                                  fmt::format("must be in [1, {}]", kMaxTwinRequests), w->requests));
  MYRIAD_RETURN_IF_ERROR(rd.Check(n, "rate", p, w->rate > 0 && w->rate <= 1e4, "must be in (0, 10000]", w->rate));
  MYRIAD_RETURN_IF_ERROR(rd.Check(n, "prefixes", p, w->prefixes >= 1 && w->prefixes <= 100'000,
                                  "must be in [1, 100000]", w->prefixes));
  MYRIAD_RETURN_IF_ERROR(rd.Check(n, "zipf", p, w->zipf >= 0 && w->zipf <= 4, "must be in [0, 4]", w->zipf));
  MYRIAD_RETURN_IF_ERROR(rd.Check(n, "prefix_blocks", p, w->prefix_blocks >= 0 && w->prefix_blocks <= 64,
                                  "must be in [0, 64]", w->prefix_blocks));
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<TwinDescription> ParseTwinDescription(const std::string& yaml, const std::string& source_name) {
  YAML::Node root;
  try {
    root = YAML::Load(yaml);
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(fmt::format("{}:{}: {}", source_name, e.mark.line + 1, e.msg));
  }
  const YamlReader rd(source_name);
  if (!root.IsMap()) return rd.Error(root, "", "expected a mapping (docs/twin.md)");
  MYRIAD_RETURN_IF_ERROR(rd.UniqueKeys(root));
  MYRIAD_RETURN_IF_ERROR(rd.Map(root, "", {"name", "seed", "speed", "model", "gpu", "engines", "policy", "learn_cost",
                                           "kv_block_tokens", "slo_ttft", "handoff_delay", "tenants",
                                           "workload", "failure"}));
  TwinDescription d;
  MYRIAD_RETURN_IF_ERROR(rd.Get(root, "name", "", &d.name));
  MYRIAD_RETURN_IF_ERROR(rd.Get(root, "seed", "", &d.seed));
  MYRIAD_RETURN_IF_ERROR(rd.Get(root, "speed", "", &d.speed));
  MYRIAD_RETURN_IF_ERROR(rd.Get(root, "model", "", &d.model));
  MYRIAD_RETURN_IF_ERROR(rd.Get(root, "gpu", "", &d.gpu));
  MYRIAD_RETURN_IF_ERROR(rd.Get(root, "policy", "", &d.policy));
  MYRIAD_RETURN_IF_ERROR(rd.Get(root, "learn_cost", "", &d.learn_cost));
  MYRIAD_RETURN_IF_ERROR(rd.Get(root, "kv_block_tokens", "", &d.kv_block_tokens));
  MYRIAD_RETURN_IF_ERROR(rd.Duration(root, "slo_ttft", "", &d.ttft_slo));
  MYRIAD_RETURN_IF_ERROR(rd.Duration(root, "handoff_delay", "", &d.handoff_delay));
  MYRIAD_RETURN_IF_ERROR(rd.Check(root, "handoff_delay", "",
                                  d.handoff_delay >= 0 && d.handoff_delay <= kMaxTwinHandoffDelay,
                                  fmt::format("must be between 0 and {}", FormatDuration(kMaxTwinHandoffDelay)),
                                  FormatDuration(d.handoff_delay)));
  MYRIAD_RETURN_IF_ERROR(rd.Check(root, "speed", "", d.speed > 0 && d.speed <= kMaxTwinSpeed,
                                  fmt::format("must be in (0, {}]", kMaxTwinSpeed), d.speed));
  MYRIAD_RETURN_IF_ERROR(rd.Check(root, "kv_block_tokens", "", d.kv_block_tokens >= 8 && 512 % d.kv_block_tokens == 0,
                                  "must divide 512 and be at least 8", d.kv_block_tokens));
  MYRIAD_RETURN_IF_ERROR(rd.Check(root, "slo_ttft", "", d.ttft_slo > 0, "must be positive", FormatDuration(d.ttft_slo)));
  if (const YAML::Node e = root["engines"]) {
    MYRIAD_RETURN_IF_ERROR(rd.Map(e, "engines", {"colocated", "prefill", "decode"}));
    MYRIAD_RETURN_IF_ERROR(rd.Get(e, "colocated", "engines", &d.colocated));
    MYRIAD_RETURN_IF_ERROR(rd.Get(e, "prefill", "engines", &d.prefill));
    MYRIAD_RETURN_IF_ERROR(rd.Get(e, "decode", "engines", &d.decode));
    if (d.prefill > 0 || d.decode > 0) {
      MYRIAD_RETURN_IF_ERROR(rd.Check(e, "decode", "engines", d.prefill > 0 && d.decode > 0,
                                      "prefill and decode go together", d.decode));
      if (e["colocated"]) return rd.Error(e, "engines", "either colocated or prefill + decode, not both");
      d.colocated = 0;
    }
    MYRIAD_RETURN_IF_ERROR(rd.Check(e, "colocated", "engines",
                                    d.prefill + d.decode + d.colocated >= 1 &&
                                        d.prefill + d.decode + d.colocated <= kMaxTwinEngines && d.colocated >= 0,
                                    fmt::format("between 1 and {} engines", kMaxTwinEngines), d.engines()));
  }
  MYRIAD_RETURN_IF_ERROR(ParseTenants(rd, root["tenants"], &d));
  const std::string dir = std::filesystem::path(source_name).parent_path().string();
  MYRIAD_RETURN_IF_ERROR(ParseWorkload(rd, root["workload"], dir, &d.workload));
  if (const YAML::Node f = root["failure"]) {
    MYRIAD_RETURN_IF_ERROR(rd.Map(f, "failure", {"engine", "at"}));
    MYRIAD_RETURN_IF_ERROR(rd.Get(f, "engine", "failure", &d.fail_engine));
    MYRIAD_RETURN_IF_ERROR(rd.Duration(f, "at", "failure", &d.fail_at));
    MYRIAD_RETURN_IF_ERROR(rd.Check(f, "engine", "failure", d.fail_engine >= 0 && d.fail_engine < d.engines(),
                                    fmt::format("must name an engine in [0, {})", d.engines()), d.fail_engine));
    MYRIAD_RETURN_IF_ERROR(rd.Check(f, "at", "failure", d.fail_at > 0, "must be positive", FormatDuration(d.fail_at)));
  }
  return d;
}

absl::StatusOr<TwinDescription> LoadTwinDescription(const std::string& path) {
  auto text = ReadConfigFile(path);
  if (!text.ok()) return text.status();
  return ParseTwinDescription(*text, path);
}

absl::StatusOr<std::vector<sim::TraceRecord>> TwinRecords(const TwinDescription& d) {
  const TwinWorkload& w = d.workload;
  if (!w.trace.empty()) {
    auto records = sim::LoadTraceFile(w.trace, "mooncake");
    if (!records.ok()) return records.status();
    if (records->size() > static_cast<size_t>(kMaxTwinRequests)) {
      return absl::InvalidArgumentError(fmt::format("{}: {} records, more than a twin replays ({})", w.trace,
                                                    records->size(), kMaxTwinRequests));
    }
    for (sim::TraceRecord& r : *records) {
      if (r.tenant >= std::max<size_t>(d.tenants.size(), 1)) {
        return absl::InvalidArgumentError(fmt::format("{}: a record names tenant {}, the description has {}",
                                                      w.trace, r.tenant, d.tenants.size()));
      }
    }
    return records;
  }
  Rng rng(d.seed);
  Rng arrivals = rng.Fork(1), shapes = rng.Fork(2), who = rng.Fork(3);
  double total_share = 0;
  for (const TwinTenant& t : d.tenants) total_share += t.share;
  std::vector<sim::TraceRecord> out;
  out.reserve(static_cast<size_t>(w.requests));
  double t_s = 0;
  uint64_t own_id = uint64_t{1} << 40;  // ids of blocks no other request shares
  for (int i = 0; i < w.requests; ++i) {
    sim::TraceRecord r;
    if (i > 0) t_s += arrivals.Exponential(w.rate);
    // Whole microseconds (a fractional millisecond in the file): two arrivals in one
    // millisecond would reach the live gateway in either order.
    r.offset = static_cast<Nanos>(std::llround(t_s * 1e6)) * kMicrosecond;
    const uint64_t prefix = w.zipf > 0 ? shapes.Zipf(static_cast<uint64_t>(w.prefixes), w.zipf)
                                       : shapes.Below(static_cast<uint64_t>(w.prefixes));
    for (int b = 0; b < w.prefix_blocks; ++b) r.content_ids.push_back(prefix * 64 + static_cast<uint64_t>(b));
    const int own = w.own_blocks_min + static_cast<int>(shapes.Below(static_cast<uint64_t>(w.own_blocks_max - w.own_blocks_min + 1)));
    for (int b = 0; b < own; ++b) r.content_ids.push_back(own_id++);
    // The last block is partial: between a quarter and all of it.
    const int64_t full = static_cast<int64_t>(r.content_ids.size()) * sim::kTraceBlockTokens;
    const int64_t cut = r.content_ids.empty() ? 0 : static_cast<int64_t>(shapes.Below(3 * sim::kTraceBlockTokens / 4));
    r.input_tokens = static_cast<int32_t>(std::max<int64_t>(full - cut, 16));
    r.output_tokens = w.output_min + static_cast<int32_t>(shapes.Below(static_cast<uint64_t>(w.output_max - w.output_min + 1)));
    r.output_tokens = std::max<int32_t>(r.output_tokens, 1);
    if (!d.tenants.empty()) {
      double u = who.Uniform() * total_share;
      r.tenant = static_cast<uint32_t>(d.tenants.size() - 1);
      for (size_t k = 0; k < d.tenants.size(); ++k) {
        if (u < d.tenants[k].share) { r.tenant = static_cast<uint32_t>(k); break; }
        u -= d.tenants[k].share;
      }
    }
    out.push_back(std::move(r));
  }
  return out;
}

std::string TwinTraceJsonl(const std::vector<sim::TraceRecord>& records) {
  std::string out;
  for (const sim::TraceRecord& r : records) {
    json j;
    if (r.offset % kMillisecond == 0) {
      j["timestamp"] = r.offset / kMillisecond;
    } else {
      j["timestamp"] = static_cast<double>(r.offset / kMicrosecond) / 1e3;
    }
    j["input_length"] = r.input_tokens;
    j["output_length"] = r.output_tokens;
    j["hash_ids"] = r.content_ids;
    j["tenant"] = r.tenant;
    out += j.dump();
    out += '\n';
  }
  return out;
}

namespace {
// A duration as the scenario reader takes it, in whole milliseconds (rounded up).
std::string Ms(Nanos n) { return fmt::format("{}ms", (n + kMillisecond - 1) / kMillisecond); }
}  // namespace

std::string TwinScenarioYaml(const TwinDescription& d, const std::string& trace_path, Nanos span) {
  const int n = d.engines();
  std::string pools;
  // One GPU per engine, TP 1, the emulator's batch limits; engine i is unit i. Each on a node of
  // its own: the emulated engines hand KV over a NIC, not NVLink.
  auto pool = [&](const char* name, const char* role, int count) {
    if (count > 0) {
      pools += fmt::format("  - {{name: {}, role: {}, count: {}, layout: {{tp: 1}}, max_batch_tokens: 8192, "
                           "max_seqs: 256}}\n", name, role, count);
    }
  };
  if (d.prefill > 0) {
    pool("prefill", "prefill", d.prefill);
    pool("decode", "decode", d.decode);
  } else {
    pool("serve", "colocated", d.colocated);
  }
  std::string tenants;
  if (!d.tenants.empty()) {
    tenants = "tenants:\n";
    for (const TwinTenant& t : d.tenants) {
      tenants += fmt::format("  - {{name: {}, weight: {}, priority: {}, quota_tokens_per_s: {}, burst_tokens: {}}}\n",
                             json(t.name).dump(), t.weight, t.priority, t.quota_tokens_per_s, t.burst_tokens);
    }
  }
  // The live engine stays dead: no spare, no repair within the run. The simulator's other
  // detectors (heartbeats) stand in for the gateway's health checks.
  // The live hand-off's real time counts `speed` times over in emulated time.
  const int64_t handoff_us =
      d.prefill > 0 ? std::llround(static_cast<double>(d.handoff_delay) * d.speed / kMicrosecond) : 0;
  std::string faults;
  if (d.fail_engine >= 0) {
    faults = fmt::format("faults:\n  rates: none\n  scripted: [{{at: {}, kind: crash, unit: {}}}]\n"
                         "  recovery: {{spare_nodes: 0, node_repair: 1000h}}\n  recompute_limit: 0\n",
                         Ms(d.fail_at), d.fail_engine);
  }
  return fmt::format(
      "# Generated by myriad twin from the description '{}': the live cluster as a scenario.\n"
      "name: twin-{}\nseed: {}\nduration: {}\ndrain: 2h\n"
      "hardware: {{gpu: {}, nodes: {}, gpus_per_node: 1, nodes_per_rack: 16}}\n"
      "model: {}\npools:\n{}"
      "workload: {{type: mooncake, path: {}, keys: tokens}}\n"
      "router: {{policy: {}, learn_cost: {}, handoff_delay: {}us}}\n{}"
      "slo: {{ttft: {}, tpot: 100ms}}\nkv_block_tokens: {}\n{}",
      d.name, d.name, d.seed, Ms(span + kSecond), d.gpu, n, d.model, pools,
      json(trace_path).dump(), d.policy, d.learn_cost, handoff_us, tenants, Ms(d.ttft_slo), d.kv_block_tokens,
      faults);
}

namespace {

double Quantile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t i = std::min(v.size() - 1, static_cast<size_t>(std::ceil(q * static_cast<double>(v.size()))) - (q > 0 ? 1 : 0));
  return v[i];
}

struct SideFigures {
  double hit = 0, p50 = 0, p99 = 0;
  std::map<std::string, int64_t> rejected;
};

SideFigures Figures(const TwinSide& s) {
  SideFigures f;
  std::vector<double> ttft;
  int64_t prompt = 0, cached = 0;
  for (const TwinRequest& r : s.requests) {
    if (!r.served) {
      ++f.rejected[r.reason.empty() ? "unknown" : r.reason];
      continue;
    }
    if (r.ttft_s >= 0) ttft.push_back(r.ttft_s);
    prompt += r.prompt_tokens;
    cached += std::max<int64_t>(r.cached_tokens, 0);
  }
  f.hit = prompt > 0 ? static_cast<double>(cached) / static_cast<double>(prompt) : 0;
  f.p50 = Quantile(ttft, 0.5);
  f.p99 = Quantile(ttft, 0.99);
  return f;
}

bool Within(double live, double sim, double rel) { return sim > 0 ? std::abs(live - sim) <= rel * sim : live == 0; }

}  // namespace

TwinComparison CompareTwins(const TwinDescription& d, const std::vector<sim::TraceRecord>& records,
                            const TwinSide& sim, const TwinSide& live, const TwinTargets& targets) {
  TwinComparison c;
  c.eject_sim = sim.eject_s;
  c.eject_live = live.eject_s;
  // The failure window: from the failure until both sides have ejected the engine (requests
  // sent meanwhile meet a dead engine on one side and maybe not on the other).
  const double window_start = NanosToSeconds(d.fail_at);
  const double window_end = window_start + std::max({sim.eject_s, live.eject_s, 0.0}) + 1.0;
  const size_t n = std::min({records.size(), sim.requests.size(), live.requests.size()});
  for (size_t i = 0; i < n; ++i) {
    const TwinRequest& a = sim.requests[i];
    const TwinRequest& b = live.requests[i];
    const double at = NanosToSeconds(records[i].offset);
    if (d.fail_engine >= 0 && at >= window_start && at < window_end) {
      ++c.excluded;
      continue;
    }
    if (!a.served || !b.served || a.entry < 0 || b.entry < 0) continue;
    ++c.compared;
    c.agreed += a.entry == b.entry ? 1 : 0;
    if (a.decode >= 0 && b.decode >= 0) {
      ++c.decode_compared;
      c.decode_agreed += a.decode == b.decode ? 1 : 0;
    }
  }
  const SideFigures fs = Figures(sim), fl = Figures(live);
  c.hit_sim = fs.hit;
  c.hit_live = fl.hit;
  c.p50_sim = fs.p50;
  c.p50_live = fl.p50;
  c.p99_sim = fs.p99;
  c.p99_live = fl.p99;
  c.rejected_sim = fs.rejected;
  c.rejected_live = fl.rejected;
  c.agreement_ok = c.compared > 0 && static_cast<double>(c.agreed) >= targets.agreement * static_cast<double>(c.compared);
  c.hit_ok = std::abs(c.hit_sim - c.hit_live) * 100 <= targets.hit_points;
  c.p50_ok = Within(c.p50_live, c.p50_sim, targets.ttft_p50);
  c.p99_ok = Within(c.p99_live, c.p99_sim, targets.ttft_p99);
  return c;
}

std::string TwinComparison::Table(const TwinTargets& t) const {
  auto pct = [](double x) { return fmt::format("{:.1f}%", 100 * x); };
  auto rel = [](double live, double sim) { return sim > 0 ? fmt::format("{:+.1f}%", 100 * (live - sim) / sim) : "-"; };
  auto verdict = [](bool ok) { return ok ? "ok" : "MISSED"; };
  std::string s = fmt::format("{:<34} {:>12} {:>12} {:>10}  {}\n", "", "simulated", "live", "diff", "target");
  const double agree = compared > 0 ? static_cast<double>(agreed) / static_cast<double>(compared) : 0;
  s += fmt::format("{:<34} {:>12} {:>12} {:>10}  >= {:.0f}% {}\n", "same entry engine (outside failure)",
                   fmt::format("{}/{}", agreed, compared), "", pct(agree), 100 * t.agreement, verdict(agreement_ok));
  if (decode_compared > 0) {
    s += fmt::format("{:<34} {:>12} {:>12} {:>10}\n", "same decode engine", fmt::format("{}/{}", decode_agreed, decode_compared),
                     "", pct(static_cast<double>(decode_agreed) / static_cast<double>(decode_compared)));
  }
  if (excluded > 0) s += fmt::format("{:<34} {:>12}\n", "in the failure window (not compared)", excluded);
  s += fmt::format("{:<34} {:>12} {:>12} {:>10}  within {:.0f} pts {}\n", "prefix hit rate", pct(hit_sim), pct(hit_live),
                   fmt::format("{:+.1f} pts", 100 * (hit_live - hit_sim)), t.hit_points, verdict(hit_ok));
  s += fmt::format("{:<34} {:>12} {:>12} {:>10}  within {:.0f}% {}\n", "TTFT p50 (emulated s)", fmt::format("{:.3f}", p50_sim),
                   fmt::format("{:.3f}", p50_live), rel(p50_live, p50_sim), 100 * t.ttft_p50, verdict(p50_ok));
  s += fmt::format("{:<34} {:>12} {:>12} {:>10}  within {:.0f}% {}\n", "TTFT p99 (emulated s)", fmt::format("{:.3f}", p99_sim),
                   fmt::format("{:.3f}", p99_live), rel(p99_live, p99_sim), 100 * t.ttft_p99, verdict(p99_ok));
  std::map<std::string, std::pair<int64_t, int64_t>> reasons;
  for (const auto& [k, v] : rejected_sim) reasons[k].first = v;
  for (const auto& [k, v] : rejected_live) reasons[k].second = v;
  for (const auto& [k, v] : reasons) {
    s += fmt::format("{:<34} {:>12} {:>12}\n", "not served: " + k, v.first, v.second);
  }
  auto secs = [](double x) { return x >= 0 ? fmt::format("{:.2f} s", x) : std::string("-"); };
  if (eject_sim >= 0 || eject_live >= 0) {
    s += fmt::format("{:<34} {:>12} {:>12}\n", "failure to ejection (emulated)", secs(eject_sim), secs(eject_live));
  }
  s += fmt::format("twin check: {}\n", ok() ? "every target met" : "a target MISSED");
  return s;
}

std::string TwinComparison::Json() const {
  json j;
  j["compared"] = compared;
  j["agreed"] = agreed;
  j["excluded_failure_window"] = excluded;
  j["decode_compared"] = decode_compared;
  j["decode_agreed"] = decode_agreed;
  j["hit_rate"] = {{"sim", hit_sim}, {"live", hit_live}};
  j["ttft_p50_s"] = {{"sim", p50_sim}, {"live", p50_live}};
  j["ttft_p99_s"] = {{"sim", p99_sim}, {"live", p99_live}};
  j["not_served"] = {{"sim", rejected_sim}, {"live", rejected_live}};
  j["eject_s"] = {{"sim", eject_sim}, {"live", eject_live}};
  j["targets_met"] = {{"agreement", agreement_ok}, {"hit_rate", hit_ok}, {"ttft_p50", p50_ok}, {"ttft_p99", p99_ok}};
  j["ok"] = ok();
  return j.dump(2);
}

}  // namespace myriad::cli
