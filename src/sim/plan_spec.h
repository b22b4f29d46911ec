#pragma once
// A deployment search's input (`myriad plan SPEC.yaml`, docs/plan.md): the model, the workload,
// the SLOs and the common settings as a scenario takes them, the GPU types with their prices,
// and the declared sets of layouts, unit counts, batch caps and routers to combine; and the
// scenarios built from it, one per candidate, that `myriad sim` runs.
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <yaml-cpp/yaml.h>

#include "absl/status/statusor.h"
#include "sim/scenario.h"

namespace myriad::sim {

// Bounds on a spec's lists and values (docs/plan.md, "Limits").
inline constexpr int kMaxPlanListEntries = 16;
inline constexpr int kMaxPlanSliceUnits = 64;
inline constexpr int kMaxPlanShapes = 4096;
inline constexpr int kMaxPlanSeqs = 65'536;

struct PlanGpu {
  std::string type;     // a card perf knows (H100, H200, ...)
  double price = 2.0;   // dollars per GPU-hour
};

// The choices for one pool role: every combination of these is tried.
struct PlanPoolChoices {
  bool enabled = false;
  // The role's own cards (indices into PlanSpec::gpus); empty: the shape's card, one for all pools.
  std::vector<size_t> gpus;
  std::vector<perf::UnitLayout> layouts;
  std::vector<int> max_batch_tokens;
  std::vector<int> max_seqs;
  std::vector<int> units;  // units of this role in one slice
  // Rank-by-rank MoE stepping (a scenario pool's `moe`): the first entry's `enabled` false is
  // the scenario's default, no such stepping. `moe_yaml` keeps each entry's text for --out.
  std::vector<MoeConfig> moes{MoeConfig{}};
  std::vector<YAML::Node> moe_yaml{YAML::Node()};
};

// One deployment shape: everything but how many copies of its slice the cluster holds.
struct PlanShape {
  size_t gpu = 0;  // the card of every pool without its own
  size_t router = 0;
  // One pool (colocated) or two (prefill, then decode).
  struct Pool {
    Role role = Role::kColocated;
    int gpu = -1;       // its own card (into PlanSpec::gpus), or -1: the shape's
    size_t layout = 0;  // into that role's choices
    int max_batch_tokens = 0;
    int max_seqs = 0;
    int units = 0;
    size_t moe = 0;  // into that role's choices
  };
  std::vector<Pool> pools;
};

struct PlanSpec {
  std::string source;          // the spec file, for messages
  Scenario base;               // model, workload, SLOs, seed, duration, topology; no pools
  YAML::Node workload;         // the spec's own workload mapping, re-emitted into --out
  YAML::Node tenants;          // likewise (may be null)
  double attainment = 0.99;    // SLO attainment target
  int max_gpus = 10'240;       // the cluster: no candidate holds more GPUs
  Nanos window = 0;            // virtual time a candidate's slice runs (default: duration)
  std::vector<PlanGpu> gpus;
  std::vector<std::string> routers;
  PlanPoolChoices prefill, decode, colocated;
  std::vector<PlanShape> shapes;  // every combination, in a fixed order

  const PlanPoolChoices& Choices(Role r) const {
    return r == Role::kPrefill ? prefill : r == Role::kDecode ? decode : colocated;
  }
};

// Reads a spec; errors name the file, the line and the key ("plan.yaml:14: search.gpus[1].price: ...").
absl::StatusOr<PlanSpec> LoadPlanSpec(const std::string& path);
absl::StatusOr<PlanSpec> ParsePlanSpec(std::string_view yaml, const std::string& source_name,
                                       const std::string& source_dir);

// The GPUs in one copy of a shape's slice's units: what a deployment pays for and what
// `search.max_gpus` bounds (candidates' scenarios price each pool, so spare GPUs of a shared
// node are not counted).
int SliceGpus(const PlanSpec& spec, const PlanShape& shape);

// The card a pool of the shape runs on, with its price.
const PlanGpu& PoolCard(const PlanSpec& spec, const PlanShape& shape, const PlanShape::Pool& pool);

// What one copy of the shape's slice costs an hour: its units' GPUs at their cards' prices.
double SliceDollarsPerHour(const PlanSpec& spec, const PlanShape& shape);

// The scenario of `copies` copies of the shape's slice serving the whole workload (`whole`), or
// of one copy serving 1/copies of it for `spec.window` (the slice a candidate is scored by).
absl::StatusOr<Scenario> BuildPlanScenario(const PlanSpec& spec, const PlanShape& shape, int copies, bool whole);

// One line naming a shape: "H200 kv-aware P 3x(tp1 dp32 ep32, mbt 16384) D 1x(tp1 dp144 ep144, seqs 128)".
std::string DescribeShape(const PlanSpec& spec, const PlanShape& shape);

// The whole-cluster scenario as YAML that `myriad sim` runs.
std::string FormatPlanScenarioYaml(const PlanSpec& spec, const PlanShape& shape, int copies);

// Whether a scenario (`myriad plan --baseline`) serves what the spec plans for, so that their
// costs compare: the same model, SLO, duration, and workload type with its rate (synthetic) or
// trace. Not compared: seeds, layouts, routers, the workload's finer shape.
absl::Status CheckPlanBaseline(const PlanSpec& spec, const Scenario& baseline);

// What the planner reads out of a simulation report; the one place that knows its keys.
struct PlanFigures {
  double cost_per_million_tokens = 0;  // within the SLO; +inf when nothing met it
  double attainment = 0;
  double ttft_p99_s = 0;
  double tpot_p99_s = 0;
  double gpus = 0;
  double span_s = 0;             // the run's end, arrivals plus drain
  double arrived_output_tokens = 0;
  double prefill_computed_tokens = 0;
  double kv_transfer_gigabytes = 0;
  double prefix_hit_rate = 0;
  std::vector<double> kv_capacity_tokens_per_unit;  // per pool, in the scenario's order
};
PlanFigures ReadPlanFigures(const nlohmann::ordered_json& report);

}  // namespace myriad::sim

namespace myriad::sim {

// The output tokens per second the whole workload offers over `spec.window`, counted from the
// workload's own generator (sessions' turns come from it too, so no run is needed).
absl::StatusOr<double> OfferedOutputTokensPerSecond(const PlanSpec& spec);

// The step model's bound on the output tokens per second one copy of the shape's slice decodes
// (its decode or colocated units; policy::DecodeTokensPerSecondBound).
absl::StatusOr<double> SliceDecodeBound(const PlanSpec& spec, const PlanShape& shape);

// Order-of-magnitude figures of a whole deployment (`copies` of the shape's slice), from its
// slice's run scaled by `copies` and from the failure model's default rates.
struct PlanMagnitudes {
  int gpus = 0;
  double dollars_per_hour = 0;
  double hbm_kv_blocks = 0;               // KV blocks the units' HBM holds (capacity)
  double store_objects_per_hour = 0;      // blocks computed per hour: what a store tier would receive
  double store_write_gb_per_s = 0;        // those blocks' bytes
  double pd_transfer_gb_per_s = 0;        // prefill-to-decode KV hand-offs
  double pd_transfer_nic_share = 0;       // that over the decode units' NIC line rate
  double failures_per_day = 0;            // DefaultFaultRates() x GPUs x 24 h
  double gpus_lost_per_failure = 0;       // mean GPUs of the unit a failed GPU stops
};
PlanMagnitudes EstimateMagnitudes(const PlanSpec& spec, const PlanShape& shape, int copies,
                                  const PlanFigures& slice);

}  // namespace myriad::sim
