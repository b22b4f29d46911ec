// Elastic EP on `moe:` units, stepped rank by rank: the verdict is taken on the placement the
// unit runs when the fault comes, and a unit that survives steps degraded with a model of its
// own: its dead ranks take no DP batch and its experts' routed load falls on the surviving
// copies only (or on a fresh placement over the live GPUs), so the hottest live GPU sets the
// step time.
#include <fmt/format.h>

#include <algorithm>

#include "policy/elastic_ep.h"
#include "sim/failures.h"
#include "sim/moe_placement.h"

namespace myriad::sim {

absl::Status FailureModel::BuildElasticMoe(size_t p, ElasticPool& e) {
  const MoePoolView v = host_.MoePool(static_cast<int>(p));
  if (v.model == nullptr || v.placement == nullptr || v.popularity == nullptr) return absl::OkStatus();
  e.applies = e.moe = true;
  e.swaps = v.swaps;
  const policy::EplbPlacement& placed = *v.placement;
  // For the report: what the initial placement survives, and the hottest live GPU then.
  RecordLosses(e, placed.num_gpus, [&](std::span<const int> dead, bool* survives) {
    auto c = policy::CheckElasticEp(placed, dead);
    *survives = c.ok() && c->survives;
    double imbalance = 1;
    if (*survives) {
      auto load = perf::ExpertLoad::FromPlacement(*v.popularity, c->phy2log, placed.physical_experts, placed.num_gpus);
      if (load.ok()) imbalance = load->mean_imbalance();
    }
    return imbalance;
  });
  return absl::OkStatus();
}

bool FailureModel::PrepareDegradedMoe(int u, std::span<const int> dead, FaultRecord& f) {
  const MoePoolView v = host_.MoePool(PoolOf(u));
  if (v.model == nullptr || v.placement == nullptr || v.popularity == nullptr) return false;
  auto verdict = policy::CheckElasticEp(*v.placement, dead);
  if (!verdict.ok() || !verdict->survives) return false;
  UnitState& st = state_[static_cast<size_t>(u)];
  st.moe_phy2log = std::move(verdict->phy2log);
  if (cfg_.elastic_ep.rebalance) {
    const perf::ModelSpec& m = units_[static_cast<size_t>(u)]->model().model();
    auto re = policy::ReplaceOnLiveGpus(EplbWeights(*v.popularity), *v.placement, dead, m.expert_groups,
                                        m.ExpertParams() * m.weight_bytes, NicFetchBytesPerS(s_),
                                        *policy::ParseReplaceMode(cfg_.elastic_ep.rebalance_mode),
                                        cfg_.elastic_ep.rebalance_tolerance);
    if (re.ok()) {
      st.moe_phy2log = std::move(re->placement.phy2log);
      f.replaced_bytes = re->bytes;
      f.replace_pause = re->pause;
      ++replacements_;
      replaced_bytes_ += re->bytes;
      replace_pause_ += re->pause;
    }
  }
  std::vector<uint8_t> mask(static_cast<size_t>(v.placement->num_gpus), 0);
  for (int g : dead) mask[static_cast<size_t>(g)] = 1;
  st.moe = std::make_unique<perf::MoeStepModel>(*v.model);
  st.moe->set_dead_ranks(std::move(mask));
  RefreshDegradedLoad(u, *v.popularity);
  f.degraded_imbalance = st.moe->load().mean_imbalance();
  return true;
}

void FailureModel::RefreshDegradedLoad(int u, const perf::ExpertPopularity& pop) {
  UnitState& st = state_[static_cast<size_t>(u)];
  if (!st.moe) return;
  const int gpus = st.moe->load().gpus();
  auto load = perf::ExpertLoad::FromPlacement(pop, st.moe_phy2log, static_cast<int>(st.moe_phy2log.size()) / pop.layers,
                                              gpus);
  if (load.ok()) st.moe->set_load(std::move(*load));
}

void FailureModel::MoeLoadChanged(int pool) {
  if (elastic_.empty()) return;
  const MoePoolView v = host_.MoePool(pool);
  if (v.popularity == nullptr) return;
  for (size_t u = 0; u < units_.size(); ++u) {
    if (PoolOf(static_cast<int>(u)) == pool && state_[u].moe) RefreshDegradedLoad(static_cast<int>(u), *v.popularity);
  }
}

}  // namespace myriad::sim
