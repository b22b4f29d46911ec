#include "sim/runner.h"

#include <fmt/format.h>

namespace myriad::sim {

absl::StatusOr<std::unique_ptr<Workload>> MakeWorkload(const Scenario& s) {
  const WorkloadConfig& w = s.workload;
  if (w.type == "synthetic") return MakeSyntheticWorkload(w.synthetic);
  auto records = LoadTraceFile(w.trace_path, w.type);
  if (!records.ok()) return records.status();
  return MakeTraceWorkload(std::move(*records), w.replay);
}

absl::StatusOr<nlohmann::ordered_json> RunScenario(const Scenario& s, const ProgressFn& progress,
                                                   OutcomeSink outcomes, TimeSeries* series,
                                                   Nanos sample_interval) {
  auto workload = MakeWorkload(s);
  if (!workload.ok()) return workload.status();
  auto cluster = Cluster::Create(s, std::move(*workload));
  if (!cluster.ok()) return cluster.status();
  if (outcomes) (*cluster)->set_outcome_sink(std::move(outcomes));
  if (series) (*cluster)->EnableSampling(sample_interval);
  (*cluster)->Run(progress);
  if (series) *series = (*cluster)->Series();
  return (*cluster)->Report();
}

namespace {

std::string Secs(double s) {
  if (s < 1e-3) return fmt::format("{:.0f}us", s * 1e6);
  if (s < 1) return fmt::format("{:.1f}ms", s * 1e3);
  return fmt::format("{:.2f}s", s);
}

std::string Count(double v) {
  if (v >= 1e9) return fmt::format("{:.2f}G", v / 1e9);
  if (v >= 1e6) return fmt::format("{:.2f}M", v / 1e6);
  if (v >= 1e4) return fmt::format("{:.1f}k", v / 1e3);
  return fmt::format("{:.0f}", v);
}

}  // namespace

namespace {

std::string FormatFailures(const nlohmann::ordered_json& f, const nlohmann::ordered_json& rq) {
  std::string kinds;
  int64_t total = 0;
  for (const auto& [k, n] : f["faults"].items()) {
    kinds += fmt::format("{}{} {}", kinds.empty() ? "" : ", ", k, n.get<int64_t>());
    total += n.get<int64_t>();
  }
  std::string out = fmt::format("\nfailures   {} faults ({}), {} unrecovered at the end\n", total, kinds.empty() ? "none" : kinds,
                                f["unrecovered_at_end"].get<int64_t>());
  out += fmt::format("           {} requests retried, {} KV tokens lost, {} answers corrupted, limiter shed {}\n",
                     Count(f["retried_requests"].get<double>()), Count(f["kv_tokens_lost"].get<double>()),
                     Count(rq.value("corrupted", 0.0)), Count(f["recompute_limiter"]["shed"].get<double>()));
  std::string avail;
  for (const auto& [pool, a] : f["availability"].items()) avail += fmt::format("  {} {:.3f}%", pool, 100 * a.get<double>());
  const auto& sp = f["spares"];
  out += fmt::format("           availability{}   spare nodes {} (min {}, {} waits)\n", avail, sp["initial"].get<int>(),
                     sp["min"].get<int>(), sp["waits"].get<int64_t>());
  out += fmt::format("{:<16} {:>6} {:>10} {:>10} {:>11} {:>11}\n", "kind", "count", "detect p50", "p99", "recover p50",
                     "p99");
  for (const auto& [k, d] : f["detection_and_recovery"].items()) {
    out += fmt::format("{:<16} {:>6} {:>10} {:>10} {:>11} {:>11}\n", k, d["time_to_detect_s"]["count"].get<int64_t>(),
                       Secs(d["time_to_detect_s"]["p50"].get<double>()), Secs(d["time_to_detect_s"]["p99"].get<double>()),
                       Secs(d["time_to_recover_s"]["p50"].get<double>()),
                       Secs(d["time_to_recover_s"]["p99"].get<double>()));
  }
  std::string radar;
  for (size_t i = 0; i < f["slow_node_radar"].size() && i < 3; ++i) {
    const auto& e = f["slow_node_radar"][i];
    radar += fmt::format("  unit {} rank {} (node {}) {:+.0f}%", e["unit"].get<int>(), e["rank"].get<int>(),
                         e["node"].get<int>(), 100 * e["step_time_excess"].get<double>());
  }
  out += fmt::format("slow-node radar{}\n", radar);
  // The timeline, only where something happened.
  for (const auto& b : f["timeline"]) {
    double worst = 1;
    for (const auto& [pool, a] : b["availability"].items()) worst = std::min(worst, a.get<double>());
    if (b["slo_attainment"].is_null()) continue;  // nothing arrived (the drain)
    if (b["faults"].get<int>() == 0 && worst > 0.9999 && b["slo_attainment"].get<double>() > 0.99) continue;
    out += fmt::format("  t={:>7}  faults {:>2}  SLO {:>5.1f}%  goodput {:>7} tok/s  lowest pool availability {:.2f}%\n",
                       Secs(b["t_s"].get<double>()), b["faults"].get<int>(), 100 * b["slo_attainment"].get<double>(),
                       Count(b["goodput_tokens_per_s"].get<double>()), 100 * worst);
  }
  return out;
}

}  // namespace

std::string FormatSummary(const nlohmann::ordered_json& r) {
  std::string out;
  const auto& sc = r["scenario"];
  const auto& rq = r["requests"];
  out += fmt::format("scenario {}  seed {}  {} x {} GPUs ({} in units)  {}  router {}\n",
                     sc["name"].get<std::string>(), sc["seed"].get<uint64_t>(), sc["gpus"].get<int>(),
                     sc["gpu"].get<std::string>(), sc["gpus_in_units"].get<int>(), sc["model"].get<std::string>(),
                     sc["router"].get<std::string>());
  out += fmt::format("simulated {:.0f}s of arrivals, ended at {:.0f}s; rates over the measured span, {:.1f}s\n\n",
                     sc["duration_s"].get<double>(), sc["end_s"].get<double>(), sc["measured_span_s"].get<double>());
  out += fmt::format("requests   arrived {}  completed {}  rejected {}  within SLO {} ({:.1f}%)\n",
                     Count(rq["arrived"].get<double>()), Count(rq["completed"].get<double>()),
                     Count(rq["rejected"].get<double>()), Count(rq["within_slo"].get<double>()),
                     100 * rq["slo_attainment"].get<double>());
  for (const auto& [reason, n] : rq["rejected_by_reason"].items()) {
    out += fmt::format("           rejected: {} {}\n", reason, Count(n.get<double>()));
  }
  out += fmt::format("\n{:<10} {:>9} {:>9} {:>9} {:>9} {:>9}\n", "latency", "mean", "p50", "p90", "p99", "max");
  for (const char* k : {"ttft", "tpot", "e2e"}) {
    const auto& d = r["latency_s"][k];
    out += fmt::format("{:<10} {:>9} {:>9} {:>9} {:>9} {:>9}\n", k, Secs(d["mean"].get<double>()),
                       Secs(d["p50"].get<double>()), Secs(d["p90"].get<double>()), Secs(d["p99"].get<double>()),
                       Secs(d["max"].get<double>()));
  }
  const auto& t = r["tokens"];
  const auto& th = r["throughput"];
  out += fmt::format("\ntokens     input {}  output {}  prefix hit rate {:.1f}%  preemptions {}\n",
                     Count(t["completed_input"].get<double>()), Count(t["completed_output"].get<double>()),
                     100 * t["prefix_hit_rate"].get<double>(), Count(t["preemptions"].get<double>()));
  out += fmt::format("throughput {} input tok/s  {} output tok/s  goodput {} tok/s ({} output tok/s)\n",
                     Count(th["input_tokens_per_s"].get<double>()), Count(th["output_tokens_per_s"].get<double>()),
                     Count(th["goodput_tokens_per_s"].get<double>()),
                     Count(th["goodput_output_tokens_per_s"].get<double>()));
  const auto& c = r["cost"];
  out += fmt::format("cost       ${:.0f} for {:.0f} GPU-hours: ${:.3f} per M tokens within SLO, ${:.2f} per M output tokens within SLO\n",
                     c["dollars"].get<double>(), c["gpu_hours"].get<double>(),
                     c["per_million_tokens_within_slo"].get<double>(),
                     c["per_million_output_tokens_within_slo"].get<double>());
  // Stepping is time with a step in flight, not capacity used: the next four columns are that.
  out += fmt::format("\n{:<12} {:<10} {:>6} {:>10} {:>9} {:>10} {:>8} {:>6} {:>7} {:>10}\n", "pool", "role", "units",
                     "GPUs/unit", "stepping", "batch occ", "KV used", "MFU", "HBM BW", "batch/GPU");
  for (const auto& p : r["pools"]) {
    out += fmt::format("{:<12} {:<10} {:>6} {:>10} {:>8.1f}% {:>9.1f}% {:>7.1f}% {:>5.1f}% {:>6.1f}% {:>10.1f}\n",
                       p["name"].get<std::string>(), p["role"].get<std::string>(), p["units"].get<int>(),
                       p["gpus_per_unit"].get<int>(), 100 * p["stepping_fraction"]["mean"].get<double>(),
                       100 * p["batch_occupancy"].get<double>(), 100 * p["kv_in_use_fraction"].get<double>(),
                       100 * p["model_flops_utilisation"].get<double>(), 100 * p["hbm_bandwidth_utilisation"].get<double>(),
                       p["mean_decode_batch_per_gpu"].get<double>());
  }
  const auto& ro = r["router"];
  out += fmt::format("\nrouter {}: {} hot-spot spreads, {} KV copies ({:.1f} GB), {} prefilled on decode units\n",
                     ro["policy"].get<std::string>(), Count(ro["hot_spots_spread"].get<double>()),
                     Count(ro["kv_fetches"].get<double>()), ro["kv_fetch_gigabytes"].get<double>(),
                     Count(ro["prefill_on_decode_unit"].get<double>()));
  if (ro.contains("index")) {
    const auto& ix = ro["index"];
    const auto& ev = ro["events"];
    out += fmt::format("       index {} entries, {:.0f} MiB; events {} batches, {} lost, {} gaps seen\n",
                       Count(ix["entries"].get<double>()), ix["memory_mib"].get<double>(),
                       Count(ev["batches"].get<double>()), Count(ev["lost"].get<double>()),
                       Count(ev["gaps_seen"].get<double>()));
  }
  if (r["tenants"].size() > 1) {
    out += fmt::format("\n{:<14} {:>9} {:>9} {:>9} {:>9} {:>9}\n", "tenant", "arrived", "rejected", "SLO", "TTFT p50",
                       "TTFT p99");
    for (const auto& t : r["tenants"]) {
      out += fmt::format("{:<14} {:>9} {:>9} {:>8.1f}% {:>9} {:>9}\n", t["tenant"].get<std::string>(),
                         Count(t["arrived"].get<double>()), Count(t["rejected"].get<double>()),
                         100 * t["slo_attainment"].get<double>(), Secs(t["ttft_p50_s"].get<double>()),
                         Secs(t["ttft_p99_s"].get<double>()));
    }
  }
  const auto& kv = r["kv_transfer"];
  out += fmt::format("\nkv transfer {} transfers, {:.1f} GB, p50 {} p99 {}\n", Count(kv["count"].get<double>()),
                     kv["gigabytes"].get<double>(), Secs(kv["time_s"]["p50"].get<double>()),
                     Secs(kv["time_s"]["p99"].get<double>()));
  if (r.contains("store")) {
    const auto& st = r["store"];
    const auto& lb = st["load_back"];
    const auto& rep = st["repair"];
    const auto& lim = st["recompute_limiter"];
    out += fmt::format("\nstore      {} nodes, {} replicas: hit rate {:.1f}% ({} blocks, {:.1f} GB loaded back), {} blocks "
                       "offloaded\n",
                       st["nodes"].get<int>(), st["replicas"].get<int>(), 100 * lb["hit_rate"].get<double>(),
                       Count(lb["blocks_loaded"].get<double>()), lb["gigabytes"].get<double>(),
                       Count(st["offload"]["blocks_stored"].get<double>()));
    out += fmt::format("           {} node losses, {} objects lost, {:.1f} GB repaired in {}, limiter shed {} after the "
                       "first loss\n",
                       st["node_losses"].size(), Count(st["objects"]["lost"].get<double>()),
                       rep["gigabytes"].get<double>(), rep["time_s"].is_null() ? "-" : Secs(rep["time_s"].get<double>()),
                       lim["shed_after_first_loss"].is_null() ? "-" : Count(lim["shed_after_first_loss"].get<double>()));
  }
  if (r.contains("failures")) out += FormatFailures(r["failures"], r["requests"]);
  return out;
}

}  // namespace myriad::sim
