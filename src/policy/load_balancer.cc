#include "policy/load_balancer.h"

#include <fmt/format.h>

#include <functional>

#include "core/strings.h"
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

// Prefill: fewest queued prompt tokens (they decide the wait). Decode: fewest sequences, then
// lowest KV usage. Ties go to the lowest index, so the choice is deterministic.
class LeastLoadedBalancer final : public LoadBalancer {
 public:
  std::string_view name() const override { return "least-loaded"; }
  int Pick(LoadView c, Phase phase, Rng&) override {
    if (c.ranking() != nullptr && c.ranking()->phase() == phase && c.ranking()->size() == c.size()) {
      return c.ranking()->Best();
    }
    return phase == Phase::kPrefill ? PickPrefill(c) : PickDecode(c);
  }

 private:
  // Both scans keep the best so far in scalars and update them with selects, not branches:
  // which candidate wins is data-dependent and the branches mispredicted on every few units
  // (the loop ran at full-cluster scale on every request).
  static int PickPrefill(LoadView c) {
    int best = -1;
    int64_t best_queued = 0, best_seqs = 0;
    for (size_t i = 0; i < c.size(); ++i) {
      const UnitLoad& u = c[i];
      const int64_t queued = u.queued_prefill_tokens;
      const int64_t seqs = int64_t{u.running} + u.waiting;
      const bool better = u.available & ((best < 0) | (queued < best_queued) |
                                         ((queued == best_queued) & (seqs < best_seqs)));
      best_queued = better ? queued : best_queued;
      best_seqs = better ? seqs : best_seqs;
      best = better ? static_cast<int>(i) : best;
    }
    return best;
  }
  static int PickDecode(LoadView c) {
    int best = -1;
    int64_t best_seqs = 0;
    double best_kv = 0;
    for (size_t i = 0; i < c.size(); ++i) {
      const UnitLoad& u = c[i];
      const int64_t seqs = int64_t{u.running} + u.waiting;
      const bool better = u.available & ((best < 0) | (seqs < best_seqs) |
                                         ((seqs == best_seqs) & (u.kv_usage < best_kv)));
      best_seqs = better ? seqs : best_seqs;
      best_kv = better ? u.kv_usage : best_kv;
      best = better ? static_cast<int>(i) : best;
    }
    return best;
  }
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
