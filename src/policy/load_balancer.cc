#include "policy/load_balancer.h"

#include <fmt/format.h>

#include <functional>

#include "core/strings.h"
#include "policy/load_peek.h"
#include "policy/load_ranking.h"

namespace myriad::policy {
namespace {

class RandomBalancer final : public LoadBalancer {
 public:
  std::string_view name() const override { return "random"; }
  int Pick(LoadView c, Phase, Rng& rng) override {
    int available = 0;
    for (size_t i = 0; i < c.size(); ++i) available += c[i].available;
    if (available == 0) return -1;
    uint64_t k = rng.Below(static_cast<uint64_t>(available));
    for (size_t i = 0; i < c.size(); ++i) {
      if (c[i].available && k-- == 0) return static_cast<int>(i);
    }
    return -1;
  }
};

class RoundRobinBalancer final : public LoadBalancer {
 public:
  std::string_view name() const override { return "round-robin"; }
  int Pick(LoadView c, Phase phase, Rng&) override {
    size_t& next = next_[phase == Phase::kPrefill ? 0 : 1];
    for (size_t tried = 0; tried < c.size(); ++tried) {
      size_t i = (next + tried) % c.size();
      if (c[i].available) {
        next = i + 1;
        return static_cast<int>(i);
      }
    }
    return -1;
  }

 private:
  size_t next_[2] = {0, 0};
};

// The smallest LeastLoadedKey (load_balancer.h). Equally loaded candidates take turns: the
// first of them at or after the one after the last pick, else the first of them. Lowest index
// alone sent every request of an idle or lightly loaded cluster (every load zero) to the first
// unit. Deterministic: the turn is the balancer's own state.
class LeastLoadedBalancer final : public LoadBalancer {
 public:
  std::string_view name() const override { return "least-loaded"; }
  int Pick(LoadView c, Phase phase, Rng&) override {
    const int pick = Peek(c, phase);
    if (pick >= 0) next_[Turn(phase)] = static_cast<size_t>(pick) + 1;
    return pick;
  }
  // What Pick would answer now, without taking its turn.
  int Peek(LoadView c, Phase phase) const {
    if (c.ranking() != nullptr && c.ranking()->phase() == phase && c.ranking()->size() == c.size()) {
      return PeekRanked(*c.ranking());
    }
    return Scan(c, phase, next_[Turn(phase)]);
  }
  // The same from a ranking of the candidates' loads alone.
  int PeekRanked(const LoadRanking& ranking) const {
    const size_t next = next_[Turn(ranking.phase())];
    const int pick = ranking.Best();
    if (pick >= 0 && static_cast<size_t>(pick) < next) {
      if (const int later = ranking.FirstBestFrom(next); later >= 0) return later;
    }
    return pick;
  }

 private:
  static size_t Turn(Phase phase) { return phase == Phase::kPrefill ? 0 : 1; }
  // The scan keeps the best so far in scalars and updates them with selects, not branches:
  // which candidate wins is data-dependent and the branches mispredicted on every few units.
  static int Scan(LoadView c, Phase phase, size_t from) {
    int best = -1;
    LoadKey b{0, 0};
    const int64_t first_turn = static_cast<int64_t>(from);
    for (size_t i = 0; i < c.size(); ++i) {
      const UnitLoad& u = c[i];
      const LoadKey k = LeastLoadedKey(u, phase);
      const bool tie = (k.first == b.first) & (k.second == b.second);
      const bool turn = (int64_t{best} < first_turn) & (static_cast<int64_t>(i) >= first_turn);
      const bool better = u.available & ((best < 0) | (k.first < b.first) |
                                         ((k.first == b.first) & (k.second < b.second)) | (tie & turn));
      b.first = better ? k.first : b.first;
      b.second = better ? k.second : b.second;
      best = better ? static_cast<int>(i) : best;
    }
    return best;
  }

  size_t next_[2] = {0, 0};  // per phase: where the next turn among ties starts
};

struct Entry {
  const char* name;
  std::function<std::unique_ptr<LoadBalancer>()> make;
};

const std::vector<Entry>& Registry() {
  static const std::vector<Entry> kEntries = {
      {"random", [] { return std::make_unique<RandomBalancer>(); }},
      {"round-robin", [] { return std::make_unique<RoundRobinBalancer>(); }},
      {"least-loaded", [] { return std::make_unique<LeastLoadedBalancer>(); }},
  };
  return kEntries;
}

}  // namespace

int PeekLeastLoaded(const LoadBalancer& balancer, const LoadRanking& ranking) {
  const auto* least = dynamic_cast<const LeastLoadedBalancer*>(&balancer);
  return least == nullptr ? -1 : least->PeekRanked(ranking);
}

absl::StatusOr<std::unique_ptr<LoadBalancer>> MakeLoadBalancer(std::string_view name) {
  for (const auto& e : Registry()) {
    if (EqualsIgnoreCase(e.name, name)) return e.make();
  }
  return absl::InvalidArgumentError(
      fmt::format("unknown routing policy '{}' (known: {})", name, Join(LoadBalancerNames(), ", ")));
}

std::vector<std::string> LoadBalancerNames() {
  std::vector<std::string> names;
  for (const auto& e : Registry()) names.push_back(e.name);
  return names;
}

}  // namespace myriad::policy
