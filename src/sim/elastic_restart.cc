// The elasticity driver's rolling restarts (elastic.restarts, docs/elasticity.md): each tick,
// policy::NextToRestart names the pool's old units to take out within the capacity buffer; a
// taken unit stops taking traffic, drains, reloads (ReloadTime: the scale-out pipeline without a
// node) and serves again, restarted. The controller drives the same decision for
// POST /admin/pools/ROLE/restart (control/controller_restart.cc).
#include <fmt/format.h>

#include <algorithm>

#include "sim/elastic_driver.h"

namespace myriad::sim {

void ElasticDriver::BeginRestart(size_t k) {
  RestartRec& r = restarts_[k];
  const auto p = static_cast<size_t>(s_.elastic.restarts[k].pool_index);
  for (int u : pools_[p].units) {
    if (rec_[static_cast<size_t>(u)].state != State::kServing) continue;
    if (pinned_ && (*pinned_)[static_cast<size_t>(u)]) continue;  // a rollout's canary: its own version
    r.units.push_back(u);
  }
  r.state.assign(r.units.size(), policy::UnitState::kOld);
  r.start = events_.now();
  RestartRound(k);
}

void ElasticDriver::RestartRound(size_t k) {
  RestartRec& r = restarts_[k];
  if (r.start < 0 || r.end >= 0) return;
  const RestartConfig& c = s_.elastic.restarts[k];
  // The units still in the pool as the policy sees them: an old unit scaled in since (or
  // draining for it) has left, and one restarted or out counts whatever its state.
  std::vector<policy::UnitState> view;
  std::vector<size_t> at;
  bool pending = false;
  for (size_t i = 0; i < r.units.size(); ++i) {
    const State st = rec_[static_cast<size_t>(r.units[i])].state;
    if (r.state[i] == policy::UnitState::kOld && st != State::kServing) continue;
    pending |= r.state[i] != policy::UnitState::kDone;
    view.push_back(r.state[i]);
    at.push_back(i);
  }
  if (!pending) {
    r.end = events_.now();
    Record(static_cast<size_t>(c.pool_index), "rolling restart done",
           fmt::format("{} units restarted", std::count(r.state.begin(), r.state.end(), policy::UnitState::kDone)));
    return;
  }
  const std::vector<size_t> take = policy::NextToRestart(c.options, view);
  for (size_t v : take) {
    const size_t i = at[v];
    const int u = r.units[i];
    UnitRec& rec = rec_[static_cast<size_t>(u)];
    rec.state = State::kDraining;
    rec.restart_after = true;
    units_[static_cast<size_t>(u)]->set_routable(false);
    r.state[i] = policy::UnitState::kOut;
    r.events.push_back({events_.now(), u, true});
  }
  if (!take.empty()) {
    Record(static_cast<size_t>(c.pool_index), fmt::format("restart {}", take.size()),
           fmt::format("rolling restart: at most {} out, {} of the pool serving", c.options.max_out,
                       c.options.min_serving_fraction));
  }
}

void ElasticDriver::Reload(int u) {
  // Drained: the unit keeps its GPUs (still allocated) and loads the weights again.
  UnitRec& rec = rec_[static_cast<size_t>(u)];
  rec.restart_after = false;
  rec.state = State::kStarting;
  events_.After(ReloadTime(u), [this, u] { RestartBack(u); });
}

void ElasticDriver::RestartBack(int u) {
  for (RestartRec& r : restarts_) {
    for (size_t i = 0; i < r.units.size(); ++i) {
      if (r.units[i] != u || r.state[i] != policy::UnitState::kOut) continue;
      r.state[i] = policy::UnitState::kDone;
      r.events.push_back({events_.now(), u, false});
    }
  }
  Serve(u);
}

nlohmann::ordered_json ElasticDriver::RestartReport() const {
  using nlohmann::ordered_json;
  ordered_json list = ordered_json::array();
  for (size_t k = 0; k < restarts_.size(); ++k) {
    const RestartRec& r = restarts_[k];
    const RestartConfig& c = s_.elastic.restarts[k];
    ordered_json events = ordered_json::array();
    for (const RestartRec::Event& e : r.events) {
      events.push_back({{"t_s", NanosToSeconds(e.at)}, {"unit", e.unit}, {"event", e.out ? "out" : "back"}});
    }
    list.push_back({{"pool", c.pool},
                    {"max_out", c.options.max_out},
                    {"min_serving_fraction", c.options.min_serving_fraction},
                    {"start_s", r.start < 0 ? -1.0 : NanosToSeconds(r.start)},
                    {"end_s", r.end < 0 ? -1.0 : NanosToSeconds(r.end)},
                    {"units", r.units.size()},
                    {"restarted", std::count(r.state.begin(), r.state.end(), policy::UnitState::kDone)},
                    {"events", std::move(events)}});
  }
  return list;
}

}  // namespace myriad::sim
