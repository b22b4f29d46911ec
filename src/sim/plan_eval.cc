// The planner's figures that come from the models rather than from a candidate's run: the
// workload's offered load, the step model's decode bound, and a deployment's magnitudes.
#include <fmt/format.h>

#include <limits>
#include <numeric>

#include "perf/hardware.h"
#include "perf/model.h"
#include "policy/plan_search.h"
#include "sim/fault_config.h"
#include "sim/plan_spec.h"
#include "sim/runner.h"

namespace myriad::sim {

absl::StatusOr<double> OfferedOutputTokensPerSecond(const PlanSpec& spec) {
  Scenario s = spec.base;
  s.duration = spec.window;
  s.workload.synthetic.duration = s.duration;
  s.workload.replay.duration = s.duration;
  auto workload = MakeWorkload(s);
  if (!workload.ok()) return workload.status();
  double tokens = 0;
  while (auto r = (*workload)->Next()) tokens += r->output_tokens;
  return tokens / NanosToSeconds(s.duration);
}

namespace {

absl::StatusOr<perf::StepModel> PoolModel(const PlanSpec& spec, const PlanShape& shape, const PlanShape::Pool& p) {
  auto gpu = perf::FindGpu(PoolCard(spec, shape, p).type);
  if (!gpu.ok()) return gpu.status();
  auto model = perf::FindModel(spec.base.model);
  if (!model.ok()) return model.status();
  const perf::Fabric fabric{.gpus_per_node = spec.base.hardware.gpus_per_node, .nic_gbps = spec.base.hardware.nic_gbps};
  return perf::StepModel::Create(*gpu, *model, spec.Choices(p.role).layouts[p.layout], fabric, spec.base.calibration);
}

}  // namespace

absl::StatusOr<double> SliceDecodeBound(const PlanSpec& spec, const PlanShape& shape) {
  double bound = 0;
  for (const auto& p : shape.pools) {
    if (p.role == Role::kPrefill) continue;
    // Overlap hides communication behind compute, which the plain step model's shortest step
    // does not: no bound, rather than one that could reject a deployment that keeps up.
    if (spec.Choices(p.role).moes[p.moe].two_batch_overlap) return std::numeric_limits<double>::infinity();
    auto m = PoolModel(spec, shape, p);
    if (!m.ok()) return m.status();
    bound += p.units * policy::DecodeTokensPerSecondBound(*m, p.max_seqs);
  }
  return bound;
}

PlanMagnitudes EstimateMagnitudes(const PlanSpec& spec, const PlanShape& shape, int copies, const PlanFigures& slice) {
  PlanMagnitudes m;
  const Scenario& b = spec.base;
  auto whole = BuildPlanScenario(spec, shape, copies, true);
  if (!whole.ok()) return m;
  m.gpus = copies * SliceGpus(spec, shape);
  m.dollars_per_hour = copies * SliceDollarsPerHour(spec, shape);
  const double window_s = NanosToSeconds(spec.window);
  double kv_bytes_per_token = 0, decode_nic_bytes_per_s = 0, unit_gpus_weighted = 0, pool_gpus = 0;
  for (size_t i = 0; i < shape.pools.size(); ++i) {
    const PlanShape::Pool& p = shape.pools[i];
    const PoolConfig& pc = whole->pools[i];
    if (i < slice.kv_capacity_tokens_per_unit.size()) {
      m.hbm_kv_blocks += slice.kv_capacity_tokens_per_unit[i] * pc.count / b.kv_block_tokens;
    }
    if (auto model = PoolModel(spec, shape, p); model.ok()) kv_bytes_per_token = model->KvBytesPerToken();
    const double g = static_cast<double>(pc.count) * pc.layout.gpus();
    if (p.role == Role::kDecode) decode_nic_bytes_per_s += g * b.hardware.nic_gbps / 8 * 1e9;
    unit_gpus_weighted += g * pc.layout.gpus();
    pool_gpus += g;
  }
  const double computed_per_s = slice.prefill_computed_tokens * copies / window_s;
  m.store_objects_per_hour = computed_per_s * 3600 / b.kv_block_tokens;
  m.store_write_gb_per_s = computed_per_s * kv_bytes_per_token / 1e9;
  m.pd_transfer_gb_per_s = slice.kv_transfer_gigabytes * copies / window_s;
  m.pd_transfer_nic_share = decode_nic_bytes_per_s > 0 ? m.pd_transfer_gb_per_s * 1e9 / decode_nic_bytes_per_s : 0;
  // Per GPU-hour, except the leaf switch and the cache tier (per cluster-hour, 0 by default).
  const auto rates = DefaultFaultRates();
  double per_gpu_hour = 0;
  for (int k = 0; k < kFaultKinds; ++k) {
    const auto kind = static_cast<FaultKind>(k);
    if (kind == FaultKind::kSwitch || kind == FaultKind::kCacheLoss) continue;
    per_gpu_hour += rates[static_cast<size_t>(k)];
  }
  m.failures_per_day = per_gpu_hour * pool_gpus * 24;
  // A failed GPU stops its whole unit (docs/failures.md); a unit is hit in proportion to its GPUs.
  m.gpus_lost_per_failure = pool_gpus > 0 ? unit_gpus_weighted / pool_gpus : 0;
  return m;
}

}  // namespace myriad::sim
