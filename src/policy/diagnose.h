#pragma once
// The scale runbook (symptom -> first suspicion -> check -> action) as rules over what a fleet
// exposes: findings ranked by their estimated impact, so the first line names what to fix
// first (the straggler rank, expert or DP imbalance, the network, routing that ignores
// prefixes, KV pressure, refused load). Pure: the drivers (cli/diagnose_command) read a
// simulation's JSON or scrape live /metrics into a DiagnoseInput; every figure the source does
// not have stays at its "unknown" value and the rules that need it stay silent.
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace myriad::policy {

// One synchronous unit: an engine and its DP ranks behind one API, or a simulated unit.
struct DiagnoseUnit {
  std::string name{};               // how the finding names it: "engine http://...", "unit 4 (decode)"
  std::vector<double> rank_step_s{};  // mean step time per DP rank; empty: unknown
  std::vector<double> rank_load{};    // requests running per rank; empty: unknown
  // Max over mean of the ranks' busy time, where only the ratio is known (the simulator's MoE
  // units); 0: unknown.
  double rank_busy_max_over_mean = 0;
  double expert_imbalance = 0;      // max over mean GPU load of the expert placement; 0: unknown
  std::string expert_placement{};   // as configured ("eplb", "contiguous"); "" unknown
};

// A rank on a slow-node radar someone else computed (the controller's, the simulator's).
struct DiagnoseRadarEntry {
  std::string unit;
  int rank = 0;
  double excess = 0;  // smoothed step time over the unit's median, minus 1
};

struct DiagnoseInput {
  std::vector<DiagnoseUnit> units;
  std::vector<DiagnoseRadarEntry> radar;
  std::string router;           // the routing policy's name; "" unknown
  double prefix_hit_rate = -1;  // prompt tokens served from cache; -1 unknown
  double requests = -1;         // arrived (or answered); -1 unknown
  double preempted = -1;        // requests (or preemptions) evicted under KV pressure; -1 unknown
  std::vector<std::pair<std::string, double>> rejections;  // by reason
  double ttft_p99_s = -1;
  double kv_transfer_p99_s = -1;  // P/D hand-off of the KV cache
};

struct DiagnoseOptions {
  double straggler_excess = 0.2;   // a rank this much slower than its unit's median
  double straggler_max_share = 0.05;  // more slow ranks than this share (and 2) is imbalance
  double dp_imbalance = 1.15;      // max/mean of the ranks' load or busy time
  double expert_imbalance = 1.3;   // max/mean GPU load of the experts
  double low_hit_rate = 0.3;       // a prefix-blind router below this hit rate
  double network_share = 0.25;     // KV transfer p99 over TTFT p99
  double min_impact = 0.01;        // findings below this are left out
};

struct Finding {
  std::string suspicion{};  // straggler, expert_imbalance, dp_imbalance, network, routing,
                          // kv_pressure, admission
  // Estimated share of the unit's (or the fleet's) throughput or latency the suspect costs, in
  // [0, 1]: what the ranking sorts by. Coarse by design: a guide to the order of the checks.
  double impact = 0;
  std::string unit{};  // "" for the whole fleet
  int rank = -1;     // the rank a straggler finding names
  std::string symptom{}, evidence{}, check{}, action{};
};

// Findings with impact >= min_impact, largest impact first (ties: suspicion, unit, rank).
std::vector<Finding> Diagnose(const DiagnoseInput& in, const DiagnoseOptions& options = {});

}  // namespace myriad::policy
