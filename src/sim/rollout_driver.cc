#include "sim/rollout_driver.h"

#include <fmt/format.h>

#include <algorithm>

namespace myriad::sim {

RolloutDriver::RolloutDriver(const Scenario& s, EventQueue& events, const std::vector<std::unique_ptr<Unit>>& units,
                             std::function<void()> regroup, std::function<Nanos(int)> reload_time)
    : s_(s),
      c_(s.elastic.rollout),
      events_(events),
      units_(units),
      regroup_(std::move(regroup)),
      reload_time_(std::move(reload_time)),
      rng_(Rng(s.seed).Fork(0x726f6c6c6f7574)),  // "rollout": its own stream, the others' unchanged
      version_(units.size(), 0),
      pinned_(units.size(), 0) {
  for (const CanaryUnits& cu : c_.canary) {
    int left = cu.units;
    for (size_t u = 0; u < units.size() && left > 0; ++u) {
      if (units[u]->config().pool != cu.pool_index) continue;
      version_[u] = pinned_[u] = 1;
      --left;
    }
  }
}

void RolloutDriver::Start(Nanos horizon) {
  horizon_ = horizon;
  // The canary's units carry the new version from the start; the split begins at `start`.
  split_ = true;
  regroup_();
  events_.After(c_.start, [this] { Begin(); });
}

bool RolloutDriver::PicksCanary(uint64_t request_id) const {
  if (phase_ != Phase::kCanary || share_ <= 0) return false;
  const fmt::format_int key(request_id);
  return policy::PickArm(std::string_view(key.data(), key.size()), share_) == policy::RolloutArm::kCanary;
}

void RolloutDriver::OnComplete(int u, bool slo_met) {
  policy::VersionWindow& t = totals_[version_[static_cast<size_t>(u)]];
  ++t.requests;
  t.slo_met += slo_met;
}

void RolloutDriver::OnError(int u) { ++totals_[version_[static_cast<size_t>(u)]].errors; }

void RolloutDriver::Begin() {
  phase_ = Phase::kCanary;
  started_ = events_.now();
  share_ = c_.judge.ladder.front();
  for (size_t u = 0; u < units_.size(); ++u) {
    if (version_[u]) units_[u]->set_slowdown(c_.slowdown);
  }
  ObserveWindow();
  Event("start", fmt::format("canary at share {}", share_));
  const Nanos every = c_.interval > 0 ? c_.interval : s_.elastic.interval;
  events_.After(every, [this] { Round(); });
}

void RolloutDriver::Round() {
  if (phase_ != Phase::kCanary) return;
  ObserveWindow();
  policy::VersionWindow canary = window_.canary();
  for (size_t u = 0; u < units_.size(); ++u) {
    if (!version_[u] || !units_[u]->routable()) continue;
    ++canary.probes;
    ++probes_;
    const bool wrong = rng_.Bernoulli(c_.wrong_answers);
    canary.probe_mismatches += wrong;
    mismatches_ += wrong;
  }
  const policy::Judgement j = policy::Judge(c_.judge, share_, window_.stable(), canary);
  const Nanos every = c_.interval > 0 ? c_.interval : s_.elastic.interval;
  switch (j.verdict) {
    case policy::Verdict::kHold:
      break;
    case policy::Verdict::kStep:
      share_ = j.share;
      Event("step", j.reason);
      break;
    case policy::Verdict::kPromote:
      share_ = 1;
      phase_ = Phase::kPromoted;
      promoted_ = events_.now();
      Event("promote", j.reason);
      // Every unit serves the new version from here (the rolling restart of the old units is not
      // modelled): one group again.
      split_ = false;
      std::fill(pinned_.begin(), pinned_.end(), 0);
      regroup_();
      return;
    case policy::Verdict::kRollback:
      share_ = 0;
      phase_ = Phase::kRolledBack;
      rolled_back_ = events_.now();
      Event("rollback", j.reason);
      ReloadWhenDrained();
      return;
  }
  ObserveWindow();  // a step starts the next window now
  if (events_.now() + every <= horizon_) events_.After(every, [this] { Round(); });
}

void RolloutDriver::ReloadWhenDrained() {
  // New requests no longer reach the canary; the ones it holds finish on it first.
  bool drained = true;
  for (size_t u = 0; u < units_.size() && drained; ++u) {
    if (version_[u]) drained = units_[u]->idle() && units_[u]->kv_used() == 0;
  }
  if (!drained) {
    if (events_.now() + kSecond <= horizon_) events_.After(kSecond, [this] { ReloadWhenDrained(); });
    return;
  }
  Nanos longest = 0;
  for (size_t u = 0; u < units_.size(); ++u) {
    if (!version_[u]) continue;
    units_[u]->set_routable(false);
    longest = std::max(longest, reload_time_(static_cast<int>(u)));
  }
  Event("reload", fmt::format("the canary's units load the stable weights ({})", FormatDuration(longest)));
  events_.After(longest, [this] {
    for (size_t u = 0; u < units_.size(); ++u) {
      if (!version_[u]) continue;
      version_[u] = pinned_[u] = 0;
      units_[u]->set_slowdown(1);
      units_[u]->set_routable(true);
    }
    split_ = false;
    reloaded_ = events_.now();
    regroup_();
    Event("stable", "the canary's units serve the stable version");
  });
}

void RolloutDriver::Event(std::string what, std::string reason) {
  events_log_.push_back({events_.now(), std::move(what), std::move(reason), share_});
}

double RolloutDriver::RollbackAfterS() const {
  return rolled_back_ < 0 ? -1 : NanosToSeconds(rolled_back_ - started_);
}

nlohmann::ordered_json RolloutDriver::Report() const {
  using nlohmann::ordered_json;
  auto phase = [&] {
    switch (phase_) {
      case Phase::kPending: return "pending";
      case Phase::kCanary: return "canary";
      case Phase::kRolledBack: return "rolled_back";
      case Phase::kPromoted: return "promoted";
    }
    return "?";
  };
  ordered_json events = ordered_json::array();
  for (const EventRec& e : events_log_) {
    events.push_back({{"t_s", NanosToSeconds(e.at)}, {"event", e.what}, {"share", e.share}, {"reason", e.reason}});
  }
  auto attainment = [&](int v) {
    return totals_[v].requests > 0 ? static_cast<double>(totals_[v].slo_met) / static_cast<double>(totals_[v].requests) : 0.0;
  };
  ordered_json j = {{"outcome", phase()},
                    {"start_s", started_ < 0 ? -1.0 : NanosToSeconds(started_)},
                    {"rollback_after_s", RollbackAfterS()},
                    {"promote_after_s", promoted_ < 0 ? -1.0 : NanosToSeconds(promoted_ - started_)},
                    {"reloaded_at_s", reloaded_ < 0 ? -1.0 : NanosToSeconds(reloaded_)},
                    {"served_by_canary", totals_[1].requests},
                    {"canary_slo_attainment", attainment(1)},
                    {"stable_slo_attainment", attainment(0)},
                    {"probes", probes_},
                    {"probe_mismatches", mismatches_},
                    {"events", std::move(events)}};
  return j;
}

}  // namespace myriad::sim
