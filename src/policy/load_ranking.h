#pragma once
// The least-loaded candidate kept current as loads change: a tournament tree over the
// candidates, so that the choice costs O(1) and a change O(log n), instead of a scan of every
// candidate on every request (the simulator picks among a whole cluster's units millions of
// times an hour, while each unit's load changes a few times per request it serves).
//
// It answers exactly as least-loaded's scan over the same loads: Best() is the first
// (lowest-index) available candidate with the smallest LeastLoadedKey, FirstBestFrom the first
// such at or after an index. The caller must Update a candidate
// whenever its load changes; the balancer uses the ranking instead of scanning only when the
// LoadView it is given carries one for the phase asked.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "policy/load_balancer.h"

namespace myriad::policy {

class LoadRanking {
 public:
  LoadRanking(Phase phase, size_t candidates);

  Phase phase() const { return phase_; }
  size_t size() const { return size_; }
  void Update(size_t candidate, const UnitLoad& load);
  // The least-loaded available candidate, or -1 when none is available.
  int Best() const { return win_.size() > 1 && win_[1] != kNone ? win_[1] : -1; }
  // The first candidate at index `from` or later that ties with Best(), or -1: least-loaded
  // takes turns among equally loaded candidates from there (load_balancer.cc). O(log n).
  int FirstBestFrom(size_t from) const;

 private:
  static constexpr int32_t kNone = -1;
  // Lexicographic on (a, b, index); no candidate (kNone) loses to any.
  bool Beats(int32_t x, int32_t y) const;

  Phase phase_;
  size_t size_;
  size_t leaves_;             // a power of two >= size_
  std::vector<LoadKey> keys_;  // per candidate
  // The winner of each subtree (kNone when none of it is available): [1] is the root, the
  // leaves are [leaves_, leaves_ + size_). Nodes hold indices only, so a level of an update
  // reads two four-byte winners and their keys, and copies four bytes.
  std::vector<int32_t> win_;
};

}  // namespace myriad::policy
