#include "sim/fleet_incident.h"

#include <fmt/format.h>

#include "sim/cluster.h"
#include "sim/runner.h"
#include "sim/scenario.h"

namespace myriad::sim {

absl::StatusOr<FleetIncidentResult> RunFleetIncident(const FleetIncident& inc) {
  // The engines `myriad up` runs: the emulator's default timing (Llama-3.1-8B on H100), one
  // GPU per DP rank. Prompts and answers of fixed length, as loadgen sends them.
  const std::string yaml = fmt::format(
      "name: incident\nseed: {}\nduration: {}s\ndrain: {}s\n"
      "hardware: {{gpu: H100, nodes: {}, gpus_per_node: {}}}\nmodel: Llama-3.1-8B\n"
      "pools:\n  - {{name: engine, role: colocated, count: {}, layout: {{tp: 1, dp: {}, ep: 1}}}}\n"
      "workload:\n  type: synthetic\n  rate: {}\n  arrival: poisson\n"
      "  input: {{mean: {}, cv: 0, min: 1, max: {}}}\n  output: {{mean: {}, cv: 0, min: 1, max: {}}}\n"
      "  system_prompts: {{count: 1, fraction: 0.0}}\n  sessions: {{fraction: 0.0}}\n"
      "router: least-loaded\n",
      inc.seed, NanosToSeconds(inc.duration), NanosToSeconds(inc.drain), inc.engines, inc.ranks, inc.engines,
      inc.ranks, inc.rate, inc.prompt_tokens, inc.prompt_tokens, inc.max_tokens, inc.max_tokens);
  auto scenario = ParseScenario(yaml, "incident");
  if (!scenario.ok()) return scenario.status();
  auto workload = MakeWorkload(*scenario);
  if (!workload.ok()) return workload.status();
  auto cluster = Cluster::Create(*scenario, std::move(*workload));
  if (!cluster.ok()) return cluster.status();
  FleetDriverOptions o = inc.driver;
  o.ranks = inc.ranks;
  FleetDriver driver(o, (*cluster)->events(), (*cluster)->units(), **cluster);
  driver.Start(inc.duration + inc.drain, inc.faults);
  (*cluster)->Run();
  FleetIncidentResult r;
  r.timeline = driver.timeline();
  const nlohmann::ordered_json report = (*cluster)->Report();
  const auto& req = report["requests"];
  r.completed = req.value("completed", int64_t{0});
  r.rejected = req.value("rejected", int64_t{0});
  r.arrived = req.value("arrived", int64_t{0});
  return r;
}

}  // namespace myriad::sim
