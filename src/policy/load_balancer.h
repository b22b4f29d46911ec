#pragma once
// Load-based choice of a serving unit among candidates: the routing policies that need no
// prefix index. Pure: the caller passes the loads it knows and the generator to draw from.
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "core/rng.h"

namespace myriad::policy {

// A candidate unit as the router sees it.
struct UnitLoad {
  int64_t queued_prefill_tokens = 0;  // prompt tokens accepted but not yet computed
  int32_t running = 0;                // sequences in the running batch
  int32_t waiting = 0;                // sequences queued for admission
  double kv_usage = 0;                // fraction of KV capacity in use, 0..1
  bool available = true;              // false: ejected, draining or failed
};

enum class Phase { kPrefill, kDecode };

class LoadRanking;

// What least-loaded minimises, lexicographically (ties go to the lowest index): for prefill the
// queued prompt tokens (they decide the wait), then sequences; for decode the sequences, then
// the KV usage. One definition for the scan and for LoadRanking.
struct LoadKey {
  int64_t first;
  double second;  // sequences for prefill: exact, far below 2^53
};
inline LoadKey LeastLoadedKey(const UnitLoad& u, Phase phase) {
  const int64_t seqs = int64_t{u.running} + u.waiting;
  return phase == Phase::kPrefill ? LoadKey{u.queued_prefill_tokens, static_cast<double>(seqs)}
                                  : LoadKey{seqs, u.kv_usage};
}

// The loads of the candidates, read in place: a span of UnitLoad, or the UnitLoad member of
// each of a span of larger records (the router's candidates), so that picking over a whole
// cluster on every request does not first copy every unit's load.
class LoadView {
 public:
  LoadView(std::span<const UnitLoad> loads)  // NOLINT: implicit, a span is a view too
      : base_(reinterpret_cast<const char*>(loads.data())), stride_(sizeof(UnitLoad)), size_(loads.size()) {}
  LoadView(const std::vector<UnitLoad>& loads) : LoadView(std::span<const UnitLoad>(loads)) {}  // NOLINT
  template <typename Record>
  LoadView(std::span<const Record> records, UnitLoad Record::*member)
      : base_(records.empty() ? nullptr : reinterpret_cast<const char*>(&(records.front().*member))),
        stride_(sizeof(Record)),
        size_(records.size()) {}

  // A ranking the caller keeps current with these loads (load_ranking.h): least-loaded then
  // answers from it instead of scanning.
  LoadView& with_ranking(const LoadRanking* ranking) {
    ranking_ = ranking;
    return *this;
  }
  const LoadRanking* ranking() const { return ranking_; }

  size_t size() const { return size_; }
  const UnitLoad& operator[](size_t i) const {
    return *reinterpret_cast<const UnitLoad*>(base_ + i * stride_);
  }

 private:
  const char* base_;
  size_t stride_;
  size_t size_;
  const LoadRanking* ranking_ = nullptr;
};

class LoadBalancer {
 public:
  virtual ~LoadBalancer() = default;
  virtual std::string_view name() const = 0;
  // Index into `candidates` of the chosen unit, or -1 when none is available.
  virtual int Pick(LoadView candidates, Phase phase, Rng& rng) = 0;
};

// "random", "round-robin" or "least-loaded".
absl::StatusOr<std::unique_ptr<LoadBalancer>> MakeLoadBalancer(std::string_view name);
std::vector<std::string> LoadBalancerNames();

}  // namespace myriad::policy
