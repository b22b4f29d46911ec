#include "policy/elastic_ep.h"

#include <fmt/format.h>

namespace myriad::policy {

absl::StatusOr<ElasticVerdict> CheckElasticEp(const EplbPlacement& placement, std::span<const int> failed_gpus) {
  const int gpus = placement.num_gpus;
  const int per_gpu = placement.experts_per_gpu();
  if (gpus < 1 || per_gpu < 1 ||
      placement.phy2log.size() != static_cast<size_t>(placement.layers) * placement.physical_experts) {
    return absl::InvalidArgumentError("elastic EP: the placement is empty or inconsistent");
  }
  std::vector<bool> dead(static_cast<size_t>(gpus), false);
  for (int g : failed_gpus) {
    if (g < 0 || g >= gpus) {
      return absl::InvalidArgumentError(fmt::format("elastic EP: failed GPU {} is not in [0, {})", g, gpus));
    }
    dead[static_cast<size_t>(g)] = true;
  }
  ElasticVerdict v;
  v.phy2log = placement.phy2log;
  for (bool d : dead) v.live_gpus += d ? 0 : 1;
  std::vector<int> live_copies(static_cast<size_t>(placement.logical_experts));
  for (int l = 0; l < placement.layers; ++l) {
    std::fill(live_copies.begin(), live_copies.end(), 0);
    for (int p = 0; p < placement.physical_experts; ++p) {
      int32_t& e = v.phy2log[static_cast<size_t>(l) * placement.physical_experts + p];
      if (dead[static_cast<size_t>(p / per_gpu)]) {
        e = -1;
      } else if (e >= 0 && e < placement.logical_experts) {
        ++live_copies[static_cast<size_t>(e)];
      }
    }
    for (int e = 0; e < placement.logical_experts; ++e) {
      if (live_copies[static_cast<size_t>(e)] == 0) v.orphaned.push_back(int64_t{l} * placement.logical_experts + e);
    }
  }
  v.survives = v.orphaned.empty() && v.live_gpus > 0;
  return v;
}

}  // namespace myriad::policy
