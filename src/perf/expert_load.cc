#include "perf/expert_load.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "core/rng.h"

namespace myriad::perf {

ExpertPopularity ExpertPopularity::Zipf(int layers, int experts, double s, uint64_t seed) {
  ExpertPopularity pop{layers, experts, std::vector<double>(static_cast<size_t>(layers) * experts)};
  Rng rng(seed);
  std::vector<double> weights(static_cast<size_t>(experts));
  double total = 0;
  for (int i = 0; i < experts; ++i) total += weights[static_cast<size_t>(i)] = std::pow(i + 1.0, -s);
  std::vector<int> order(static_cast<size_t>(experts));
  for (int l = 0; l < layers; ++l) {
    std::iota(order.begin(), order.end(), 0);
    for (int i = experts - 1; i > 0; --i) std::swap(order[static_cast<size_t>(i)], order[rng.Below(static_cast<uint64_t>(i) + 1)]);
    for (int i = 0; i < experts; ++i) {
      pop.p[static_cast<size_t>(l) * experts + order[static_cast<size_t>(i)]] = weights[static_cast<size_t>(i)] / total;
    }
  }
  return pop;
}

absl::StatusOr<ExpertPopularity> ExpertPopularity::FromLoads(std::span<const double> loads, int layers, int experts) {
  if (layers < 1 || experts < 1 || loads.size() != static_cast<size_t>(layers) * experts) {
    return absl::InvalidArgumentError(fmt::format("expert loads: expected {} x {} values, got {}", layers, experts, loads.size()));
  }
  ExpertPopularity pop{layers, experts, std::vector<double>(loads.begin(), loads.end())};
  for (int l = 0; l < layers; ++l) {
    double sum = 0;
    for (int e = 0; e < experts; ++e) {
      const double v = pop.p[static_cast<size_t>(l) * experts + e];
      if (!(v >= 0) || !std::isfinite(v)) {
        return absl::InvalidArgumentError(fmt::format("expert loads: layer {} expert {}: {} is not a load", l, e, v));
      }
      sum += v;
    }
    if (sum <= 0) return absl::InvalidArgumentError(fmt::format("expert loads: layer {} has no load", l));
    for (int e = 0; e < experts; ++e) pop.p[static_cast<size_t>(l) * experts + e] /= sum;
  }
  return pop;
}

ExpertLoad ExpertLoad::Balanced(int layers, int gpus) {
  ExpertLoad l;
  l.layers_ = layers;
  l.gpus_ = gpus;
  l.share_.assign(static_cast<size_t>(layers) * gpus, 1.0 / gpus);
  l.Finish();
  return l;
}

ExpertLoad ExpertLoad::Contiguous(const ExpertPopularity& pop, int gpus) {
  ExpertLoad l;
  l.layers_ = pop.layers;
  l.gpus_ = gpus;
  l.share_.assign(static_cast<size_t>(pop.layers) * gpus, 0.0);
  for (int layer = 0; layer < pop.layers; ++layer) {
    for (int e = 0; e < pop.experts; ++e) {
      const int g = static_cast<int>(static_cast<int64_t>(e) * gpus / pop.experts);
      l.share_[static_cast<size_t>(layer) * gpus + g] += pop.p[static_cast<size_t>(layer) * pop.experts + e];
    }
  }
  l.Finish();
  return l;
}

absl::StatusOr<ExpertLoad> ExpertLoad::FromPlacement(const ExpertPopularity& pop, std::span<const int32_t> phy2log,
                                                     int physical, int gpus) {
  if (gpus < 1 || physical % gpus != 0 || phy2log.size() != static_cast<size_t>(pop.layers) * physical) {
    return absl::InvalidArgumentError(fmt::format(
        "placement: {} entries for {} layers x {} physical experts on {} GPUs", phy2log.size(), pop.layers, physical, gpus));
  }
  ExpertLoad l;
  l.layers_ = pop.layers;
  l.gpus_ = gpus;
  l.share_.assign(static_cast<size_t>(pop.layers) * gpus, 0.0);
  std::vector<int> copies(static_cast<size_t>(pop.experts));
  const int per_gpu = physical / gpus;
  for (int layer = 0; layer < pop.layers; ++layer) {
    std::fill(copies.begin(), copies.end(), 0);
    const int32_t* row = phy2log.data() + static_cast<size_t>(layer) * physical;
    for (int i = 0; i < physical; ++i) {
      if (row[i] == -1) continue;  // a dead GPU's slot (elastic EP)
      if (row[i] < 0 || row[i] >= pop.experts) {
        return absl::InvalidArgumentError(fmt::format("placement: layer {} slot {} names expert {}", layer, i, row[i]));
      }
      ++copies[static_cast<size_t>(row[i])];
    }
    for (int e = 0; e < pop.experts; ++e) {
      if (copies[static_cast<size_t>(e)] == 0) {
        return absl::InvalidArgumentError(fmt::format("placement: layer {} has no copy of expert {}", layer, e));
      }
    }
    for (int i = 0; i < physical; ++i) {
      const int e = row[i];
      if (e < 0) continue;
      l.share_[static_cast<size_t>(layer) * gpus + i / per_gpu] +=
          pop.p[static_cast<size_t>(layer) * pop.experts + e] / copies[static_cast<size_t>(e)];
    }
  }
  l.Finish();
  return l;
}

void ExpertLoad::Finish() {
  max_share_.assign(static_cast<size_t>(layers_), 0.0);
  for (int layer = 0; layer < layers_; ++layer) {
    for (int g = 0; g < gpus_; ++g) max_share_[static_cast<size_t>(layer)] = std::max(max_share_[static_cast<size_t>(layer)], share(layer, g));
  }
}

double ExpertLoad::mean_imbalance() const {
  if (layers_ == 0) return 1.0;
  double sum = 0;
  for (double m : max_share_) sum += m * gpus_;
  return sum / layers_;
}

}  // namespace myriad::perf
