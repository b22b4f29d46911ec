#pragma once
// The simulator's driver of a model rollout (config `elastic.rollout`, docs/elasticity.md): the
// canary version runs on the first units of every pool; from `start`, the cluster sends each new
// request to the canary when policy::PickArm puts its key within the canary's share, and every
// `interval` this driver gives policy::Judge each version's window (requests within the SLO since
// the share last changed, and the canary units' known-answer probes) and applies the verdict, as
// the controller's control::RolloutDriver does through the gateway. It decides nothing itself.
// A rollback sets the share to 0, lets the canary's units finish their work, then reloads them
// with the stable weights; a promotion ends the split (every unit serves the new version).
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/rng.h"
#include "policy/rollout.h"
#include "sim/event_queue.h"
#include "sim/scenario.h"
#include "sim/unit.h"

namespace myriad::sim {

class RolloutDriver {
 public:
  // `regroup`: the units on the canary changed (the cluster rebuilds its per-version candidate
  // lists). `reload_time`: how long unit u takes to load other weights and come back.
  RolloutDriver(const Scenario& s, EventQueue& events, const std::vector<std::unique_ptr<Unit>>& units,
                std::function<void()> regroup, std::function<Nanos(int)> reload_time);

  void Start(Nanos horizon);
  // Whether unit u is in the canary's group (the split is on and u runs the new version).
  bool canary(int u) const { return split_ && version_[static_cast<size_t>(u)] != 0; }
  bool split() const { return split_; }
  // Units the elasticity driver must not drain: the canary's, and those reloading.
  const std::vector<uint8_t>& pinned() const { return pinned_; }
  // The version a new request goes to (true: the canary), from its id as the split's key.
  bool PicksCanary(uint64_t request_id) const;
  // A request finished on unit u (the one that decoded it), within the SLO or not.
  void OnComplete(int u, bool slo_met);
  // A request the canary or stable version failed after admission.
  void OnError(int u);

  // Canary start to rollback, in seconds (-1: no rollback).
  double RollbackAfterS() const;
  nlohmann::ordered_json Report() const;

 private:
  enum class Phase { kPending, kCanary, kRolledBack, kPromoted };
  void Begin();
  void Round();
  void Event(std::string what, std::string reason);
  void ReloadWhenDrained();
  // The window restarts whenever the share changes.
  void ObserveWindow() { window_.Observe(fmt::format("{}", share_), totals_[0], totals_[1]); }

  const Scenario& s_;
  const RolloutSimConfig& c_;
  EventQueue& events_;
  const std::vector<std::unique_ptr<Unit>>& units_;
  std::function<void()> regroup_;
  std::function<Nanos(int)> reload_time_;
  Rng rng_;
  std::vector<uint8_t> version_;  // per unit: 1 on the new version
  std::vector<uint8_t> pinned_;
  bool split_ = false;
  Phase phase_ = Phase::kPending;
  double share_ = 0;
  Nanos horizon_ = 0, started_ = -1, rolled_back_ = -1, promoted_ = -1, reloaded_ = -1;
  // Each version's outcomes over the whole run (0: stable, 1: canary), and the window judged:
  // those since the share last changed.
  policy::VersionWindow totals_[2];
  policy::RolloutWindow window_;
  int64_t probes_ = 0, mismatches_ = 0;
  struct EventRec {
    Nanos at;
    std::string what, reason;
    double share;
  };
  std::vector<EventRec> events_log_;
};

}  // namespace myriad::sim
