#include "policy/diagnose.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <set>
#include <tuple>

#include "policy/straggler.h"

namespace myriad::policy {
namespace {

double Median(std::vector<double> v) {
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(v.size() / 2), v.end());
  return v[v.size() / 2];
}

double MaxOverMean(const std::vector<double>& v) {
  if (v.empty()) return 0;
  const double mean = std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size());
  return mean > 0 ? *std::max_element(v.begin(), v.end()) / mean : 0;
}

Finding Straggler(const std::string& unit, int rank, double excess, std::string evidence) {
  // A synchronous step waits for its slowest rank: the unit runs at that rank's pace.
  return Finding{.suspicion = "straggler",
                 .impact = excess / (1 + excess),
                 .unit = unit,
                 .rank = rank,
                 .symptom = fmt::format("{}: rank {} is {:.0f}% slower per step than the unit's median", unit, rank,
                                        100 * excess),
                 .evidence = std::move(evidence),
                 .check = "per-rank step timing sorted (the slow-node radar); the GPU's clocks, ECC "
                          "errors and thermal throttling (nvidia-smi -q)",
                 .action = "cordon the node and rebuild the unit without it (the controller drains and "
                           "restarts a straggler's engine)"};
}

// Per-rank step times of one unit: its stragglers, by the detector the controller and the
// simulator use, with one window standing for the whole scrape. More slow ranks than a few is
// spread, not a straggler: the imbalance rule's.
std::vector<int> StragglerRanks(const DiagnoseUnit& u, const DiagnoseOptions& o) {
  if (u.rank_step_s.size() < 3) return {};
  StragglerDetector d(static_cast<int>(u.rank_step_s.size()),
                      StragglerOptions{.min_excess = o.straggler_excess, .windows = 1});
  const auto flagged = d.Observe(u.rank_step_s);
  const double most = std::max(2.0, o.straggler_max_share * static_cast<double>(u.rank_step_s.size()));
  if (static_cast<double>(flagged.size()) > most) return {};
  return std::vector<int>(flagged.begin(), flagged.end());
}

bool PrefixBlind(const std::string& router) {
  return router.find("kv-aware") == std::string::npos && router.find("prefix") == std::string::npos;
}

}  // namespace

std::vector<Finding> Diagnose(const DiagnoseInput& in, const DiagnoseOptions& o) {
  std::vector<Finding> out;
  std::set<std::pair<std::string, int>> named;  // (unit, rank) already reported as stragglers
  for (const DiagnoseUnit& u : in.units) {
    const std::vector<int> slow = StragglerRanks(u, o);
    if (!slow.empty()) {
      const double median = Median(u.rank_step_s);
      for (const int r : slow) {
        const double t = u.rank_step_s[static_cast<size_t>(r)];
        out.push_back(Straggler(u.name, r, t / median - 1,
                                fmt::format("mean step {:.2f} ms against a median of {:.2f} ms over {} ranks",
                                            1e3 * t, 1e3 * median, u.rank_step_s.size())));
        named.insert({u.name, r});
      }
    }
    // DP imbalance: the ranks' load spread, or, without loads, their step-time spread when no
    // single rank explains it.
    double ratio = MaxOverMean(u.rank_load);
    std::string what = "requests running per rank";
    if (ratio == 0 && u.rank_busy_max_over_mean > 0) {
      ratio = u.rank_busy_max_over_mean;
      what = "busy time per rank";
    }
    if (ratio == 0 && slow.empty()) {
      ratio = MaxOverMean(u.rank_step_s);
      what = "step time per rank";
    }
    if (ratio >= o.dp_imbalance) {
      out.push_back(Finding{
          .suspicion = "dp_imbalance",
          .impact = 1 - 1 / ratio,
          .unit = u.name,
          .symptom = fmt::format("{}: DP ranks unevenly loaded, the fast ones wait at every collective", u.name),
          .evidence = fmt::format("max/mean of the {} is {:.2f}", what, ratio),
          .check = "per-rank token counts and step-time histograms (many ranks spread, not one or two slow)",
          .action = "DP padding to align the ranks' tokens; route by load score across ranks; micro-batch "
                    "overlap to hide the wait"});
    }
    if (u.expert_imbalance >= o.expert_imbalance) {
      out.push_back(Finding{
          .suspicion = "expert_imbalance",
          .impact = 1 - 1 / u.expert_imbalance,
          .unit = u.name,
          .symptom = fmt::format("{}: hot experts, the MoE layers wait for the most loaded GPU", u.name),
          .evidence = fmt::format("max/mean GPU expert load {:.2f} under {} placement", u.expert_imbalance,
                                  u.expert_placement.empty() ? "its" : u.expert_placement),
          .check = "the expert hit distribution per layer against the placement",
          .action = u.expert_placement == "eplb"
                        ? "re-run EPLB on the current loads; more redundant experts"
                        : "EPLB placement with redundant experts (myriad eplb; moe.placement: eplb)"});
    }
  }
  for (const DiagnoseRadarEntry& e : in.radar) {
    if (e.excess < o.straggler_excess || named.count({e.unit, e.rank}) > 0) continue;
    named.insert({e.unit, e.rank});
    out.push_back(Straggler(e.unit, e.rank, e.excess,
                            fmt::format("the slow-node radar: smoothed step-time excess {:+.0f}%", 100 * e.excess)));
  }
  if (in.kv_transfer_p99_s > 0 && in.ttft_p99_s > 0) {
    const double share = std::min(1.0, in.kv_transfer_p99_s / in.ttft_p99_s);
    if (share >= o.network_share) {
      out.push_back(Finding{
          .suspicion = "network",
          .impact = share,
          .symptom = "slow first tokens while KV moves between pools: the network is the wall",
          .evidence = fmt::format("KV transfer p99 {:.1f} ms is {:.0f}% of TTFT p99 {:.1f} ms", 1e3 * in.kv_transfer_p99_s,
                                  100 * share, 1e3 * in.ttft_p99_s),
          .check = "all-to-all and KV-transfer time measured against theory; NIC and switch queues, ECMP hot spots",
          .action = "topology-aware placement of prefill and decode; hierarchical all-to-all; congestion control "
                    "(ECN/PFC); cap transfers in flight"});
    }
  }
  if (!in.router.empty() && in.prefix_hit_rate >= 0 && in.prefix_hit_rate < o.low_hit_rate && PrefixBlind(in.router)) {
    out.push_back(Finding{
        .suspicion = "routing",
        .impact = o.low_hit_rate - in.prefix_hit_rate,
        .symptom = "low prefix-cache hit rate: prompts are recomputed on replicas that do not hold them",
        .evidence = fmt::format("hit rate {:.1f}% under the prefix-blind router {}", 100 * in.prefix_hit_rate,
                                in.router),
        .check = "vllm:prefix_cache_hits_total over _queries_total per engine; the gateway's routing decisions",
        .action = "prefix-aware routing (routing.policy: kv-aware) or session-sticky routing"});
  }
  if (in.requests > 0 && in.preempted > 0) {
    out.push_back(Finding{
        .suspicion = "kv_pressure",
        .impact = std::min(1.0, in.preempted / in.requests),
        .symptom = "requests preempted: the KV cache is full and running requests are evicted and recomputed",
        .evidence = fmt::format("{:.0f} preemptions for {:.0f} requests", in.preempted, in.requests),
        .check = "vllm:num_preemptions_total and vllm:kv_cache_usage_perc per engine",
        .action = "more KV capacity (a store tier, more replicas), a lower max_num_seqs, or route by KV usage"});
  }
  double rejected = 0;
  std::string reasons;
  std::vector<std::pair<std::string, double>> by_reason = in.rejections;
  std::sort(by_reason.begin(), by_reason.end(), [](const auto& a, const auto& b) {
    return std::tie(b.second, a.first) < std::tie(a.second, b.first);
  });
  for (const auto& [reason, n] : by_reason) {
    if (n <= 0) continue;
    rejected += n;
    reasons += fmt::format("{}{} {:.0f}", reasons.empty() ? "" : ", ", reason, n);
  }
  if (in.requests > 0 && rejected > 0) {
    out.push_back(Finding{
        .suspicion = "admission",
        .impact = std::min(1.0, rejected / in.requests),
        .symptom = "requests refused or left unserved: the offered load exceeds what the fleet admits",
        .evidence = fmt::format("{:.0f} of {:.0f} requests ({})", rejected, in.requests, reasons),
        .check = "rejections by reason; per-replica running requests and KV usage (overload or P/D ratio)",
        .action = "scale the pool the reasons point at; tune tenant quotas; rebalance the P/D ratio"});
  }
  std::erase_if(out, [&](const Finding& f) { return !(f.impact >= o.min_impact); });
  std::stable_sort(out.begin(), out.end(), [](const Finding& a, const Finding& b) {
    return std::tie(b.impact, a.suspicion, a.unit, a.rank) < std::tie(a.impact, b.suspicion, b.unit, b.rank);
  });
  return out;
}

}  // namespace myriad::policy
