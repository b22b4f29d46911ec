#include "sim/failures.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>


namespace myriad::sim {

namespace {

bool NeedsNode(FaultKind k) {
  switch (k) {
    case FaultKind::kCrash:
    case FaultKind::kNic:
    case FaultKind::kNetwork:
    case FaultKind::kSwitch:
    case FaultKind::kSdc:
    case FaultKind::kStraggler:
    case FaultKind::kMaintenance:
      return true;
    default:
      return false;
  }
}

// Rated per hour for the whole cluster rather than per GPU-hour.
bool ClusterWide(FaultKind k) { return k == FaultKind::kSwitch || k == FaultKind::kCacheLoss; }

// Faults that stop the unit dead until detected.
bool Stops(FaultKind k) {
  return k == FaultKind::kCrash || k == FaultKind::kSoftwareCrash || k == FaultKind::kHang ||
         k == FaultKind::kNic || k == FaultKind::kNetwork || k == FaultKind::kSwitch;
}

// The controller as the scenario's `detection` and `straggler_detection` configure it.
policy::FleetControllerOptions ControllerOptions(const FaultConfig& c) {
  policy::FleetControllerOptions o = policy::ControllerOptionsFor(c.detection);
  o.straggler = c.stragglers.options;
  o.evict_stragglers = c.stragglers.enabled;
  return o;
}

}  // namespace

FailureModel::FailureModel(const Scenario& s, EventQueue& events, const std::vector<std::unique_ptr<Unit>>& units,
                           const std::vector<Placement>& placements, FailureHost& host)
    : FleetLoop(ControllerOptions(s.faults), events, units.size(), s.faults.detection.heartbeat_interval),
      s_(s),
      cfg_(s.faults),
      events_(events),
      units_(units),
      placements_(placements),
      host_(host),
      rng_(Rng(s.seed).Fork(0x6661756c7473)),  // "faults"
      storage_(events, s.faults.recovery.storage_bytes_per_s) {}

absl::StatusOr<std::unique_ptr<FailureModel>> FailureModel::Create(const Scenario& s, EventQueue& events,
                                                                   const std::vector<std::unique_ptr<Unit>>& units,
                                                                   const std::vector<Placement>& placements,
                                                                   FailureHost& host) {
  std::unique_ptr<FailureModel> m(new FailureModel(s, events, units, placements, host));
  const FaultConfig& c = s.faults;
  const int racks = (s.hardware.nodes + s.hardware.nodes_per_rack - 1) / s.hardware.nodes_per_rack;
  for (size_t i = 0; i < c.scripted.size(); ++i) {
    const ScriptedFault& f = c.scripted[i];
    if (f.kind == FaultKind::kSwitch && f.rack >= racks) {
      return absl::InvalidArgumentError(
          fmt::format("faults.scripted[{}].rack: {} is out of range (the cluster has {} racks)", i, f.rack, racks));
    }
    if (f.unit >= static_cast<int>(units.size())) {
      return absl::InvalidArgumentError(fmt::format(
          "faults.scripted[{}].unit: {} is out of range (the scenario has {} units)", i, f.unit, units.size()));
    }
    if (f.kind == FaultKind::kStraggler && f.rank >= units[static_cast<size_t>(f.unit)]->model().layout().gpus()) {
      return absl::InvalidArgumentError(fmt::format("faults.scripted[{}].rank: {} is out of range (unit {} has {} ranks)",
                                                    i, f.rank, f.unit, units[static_cast<size_t>(f.unit)]->model().layout().gpus()));
    }
  }
  int used_nodes = 0;
  for (const Placement& p : placements) used_nodes = std::max(used_nodes, p.first_node + p.nodes);
  const int unused = s.hardware.nodes - used_nodes;
  if (c.spare_nodes > unused) {
    return absl::InvalidArgumentError(fmt::format(
        "faults.recovery.spare_nodes: {} exceeds the {} nodes no unit uses", c.spare_nodes, unused));
  }
  m->spares_ = m->spares_min_ = m->spares_initial_ = c.spare_nodes >= 0 ? c.spare_nodes : unused;
  m->state_.resize(units.size());
  for (UnitState& st : m->state_) st.passive = policy::BackendHealth(c.backend_health);
  if (absl::Status st = m->BuildElastic(); !st.ok()) return st;
  return m;
}

int FailureModel::UnitOfGpu(int gpu) const {
  auto it = std::upper_bound(placements_.begin(), placements_.end(), gpu,
                             [](int g, const Placement& p) { return g < p.first_gpu; });
  if (it == placements_.begin()) return -1;
  --it;
  return gpu < it->first_gpu + it->gpus ? static_cast<int>(it - placements_.begin()) : -1;
}

void FailureModel::Start(Nanos horizon) {
  horizon_ = horizon;
  struct Pending {
    ScriptedFault f;
    size_t order;
  };
  std::vector<Pending> all;
  for (const ScriptedFault& f : cfg_.scripted) all.push_back({f, all.size()});
  const double gpus = s_.hardware.gpus();
  const int racks = (s_.hardware.nodes + s_.hardware.nodes_per_rack - 1) / s_.hardware.nodes_per_rack;
  for (int k = 0; k < kFaultKinds; ++k) {
    const double per_hour = cfg_.rates[static_cast<size_t>(k)] * cfg_.rate_scale *
                            (ClusterWide(static_cast<FaultKind>(k)) ? 1.0 : gpus);
    if (per_hour <= 0) continue;
    const double per_ns = per_hour / static_cast<double>(kHour);
    Rng r = rng_.Fork(static_cast<uint64_t>(k) + 1);
    for (double t = r.Exponential(per_ns); t < static_cast<double>(horizon); t += r.Exponential(per_ns)) {
      ScriptedFault f;
      f.at = static_cast<Nanos>(t);
      f.kind = static_cast<FaultKind>(k);
      const int gpu = static_cast<int>(r.Below(static_cast<uint64_t>(gpus)));
      f.unit = UnitOfGpu(gpu);
      if (f.unit >= 0) f.rank = gpu - placements_[static_cast<size_t>(f.unit)].first_gpu;
      if (f.kind == FaultKind::kSwitch) f.rack = static_cast<int>(r.Below(static_cast<uint64_t>(racks)));
      if (f.kind == FaultKind::kStraggler) {
        f.factor = r.Uniform(cfg_.straggler_factor_min, cfg_.straggler_factor_max);
        f.duration = static_cast<Nanos>(r.Exponential(1.0 / static_cast<double>(cfg_.straggler_duration)));
      }
      if (ClusterWide(f.kind)) f.unit = -1;  // not tied to the GPU drawn
      if (f.kind == FaultKind::kCacheLoss) f.fraction = 1.0;
      all.push_back({f, all.size()});
    }
  }
  std::stable_sort(all.begin(), all.end(), [](const Pending& a, const Pending& b) { return a.f.at < b.f.at; });
  for (const Pending& p : all) {
    FaultRecord rec;
    rec.kind = p.f.kind;
    rec.at = p.f.at;
    rec.unit = p.f.unit;
    rec.factor = p.f.factor;
    rec.rank = p.f.rank;
    faults_.push_back(rec);
    const int fi = static_cast<int>(faults_.size()) - 1;
    const ScriptedFault f = p.f;
    events_.At(f.at, [this, fi, f] {
      if (f.kind == FaultKind::kSwitch) {
        // Every unit with a node under the leaf loses it; one record per unit.
        const int first = f.rack * s_.hardware.nodes_per_rack, last = first + s_.hardware.nodes_per_rack;
        bool any = false;
        for (size_t u = 0; u < placements_.size(); ++u) {
          const Placement& pl = placements_[u];
          const int lo = std::max(first, pl.first_node), hi = std::min(last, pl.first_node + pl.nodes);
          if (lo >= hi) continue;
          int rec = fi;
          if (any) {
            faults_.push_back(faults_[static_cast<size_t>(fi)]);
            rec = static_cast<int>(faults_.size()) - 1;
          }
          faults_[static_cast<size_t>(rec)].unit = static_cast<int>(u);
          any = true;
          HitUnit(static_cast<int>(u), rec, false);
          state_[u].nodes_needed += hi - lo;
        }
        if (!any) faults_[static_cast<size_t>(fi)].detected_by = "no_unit_under_switch";
        return;
      }
      if (f.kind == FaultKind::kCacheLoss) {
        std::vector<int> entry;
        for (size_t u = 0; u < units_.size(); ++u) {
          if (units_[u]->config().role != Role::kDecode) entry.push_back(static_cast<int>(u));
        }
        const auto take = static_cast<size_t>(std::ceil(f.fraction * static_cast<double>(entry.size())));
        for (size_t i = 0; i < take && i < entry.size(); ++i) {
          const size_t j = i + rng_.Below(entry.size() - i);
          std::swap(entry[i], entry[j]);
          units_[static_cast<size_t>(entry[i])]->DropCache();
        }
        FaultRecord& r = faults_[static_cast<size_t>(fi)];
        r.detected = r.recovered = events_.now();
        r.detected_by = "immediate";
        return;
      }
      if (f.kind == FaultKind::kStraggler && f.duration > 0) {
        events_.After(f.duration, [this, fi] {
          FaultRecord& rec = faults_[static_cast<size_t>(fi)];
          if (rec.unit < 0 || rec.recovered >= 0) return;
          const UnitState& st = state_[static_cast<size_t>(rec.unit)];
          if (st.slow_fault != fi || st.fault == fi) return;  // gone, or being replaced
          ClearSlow(rec.unit);
          rec.recovered = events_.now();
          rec.detected_by = "went_away";
        });
      }
      Inject(fi);
    });
  }
  next_window_ = events_.now() + cfg_.stragglers.interval;
  StartScrapes(horizon);
}

void FailureModel::MarkDown(int unit) {
  auto& down = state_[static_cast<size_t>(unit)].down;
  if (down.empty() || down.back().second >= 0) down.emplace_back(events_.now(), -1);
}

void FailureModel::Inject(int fi) {
  FaultRecord& f = faults_[static_cast<size_t>(fi)];
  if (f.unit < 0) {
    // It hit a node no unit uses: a spare, if any is left, goes to repair.
    f.detected = f.recovered = events_.now();
    f.detected_by = "idle_node";
    if (NeedsNode(f.kind) && spares_ > 0) {
      --spares_;
      spares_min_ = std::min(spares_min_, spares_);
      ReturnNodes(1, f.kind == FaultKind::kMaintenance ? cfg_.maintenance_duration : cfg_.recovery.node_repair);
    }
    return;
  }
  const int u = f.unit;
  UnitState& st = state_[static_cast<size_t>(u)];
  const FaultKind k = f.kind;
  if (Stops(k)) {
    HitUnit(u, fi, NeedsNode(k));
    return;
  }
  if (k == FaultKind::kSdc) {
    if (st.stopped || st.rebuilding || st.draining || st.corrupt) {
      f.absorbed = true;
      if (!st.rebuilding) ++st.nodes_needed;
      return;
    }
    st.corrupt = true;
    st.fault = fi;
    st.nodes_needed = 1;
    MarkDown(u);
    return;
  }
  if (k == FaultKind::kStraggler) {
    if (st.slow_fault >= 0 && st.slow >= f.factor) {
      f.absorbed = true;
      return;
    }
    st.slow_fault = fi;
    st.slow_rank = f.rank;
    st.slow = f.factor;
    st.slow_since = events_.now();
    ApplySlowdown(u);
    return;
  }
  if (k == FaultKind::kMaintenance) {
    if (st.stopped || st.corrupt || controller().state(u) != policy::EngineState::kServing) {
      f.absorbed = true;
      return;
    }
    st.fault = fi;
    st.nodes_needed = 1;
    st.node_to_maintenance = true;
    st.planned = true;
    f.detected = events_.now();
    f.detected_by = "planned";
    // The operator asks the controller, which drains it and restarts it.
    Carry(u, controller().Maintain(u, events_.now()));
  }
}

void FailureModel::HitUnit(int u, int fi, bool needs_node) {
  UnitState& st = state_[static_cast<size_t>(u)];
  FaultRecord& f = faults_[static_cast<size_t>(fi)];
  if (st.elastic) {
    // A second fault while the unit is (or is about to be) serving degraded: it stops as a
    // whole after all, and the rebuild under way brings it back.
    Unit& unit = *units_[static_cast<size_t>(u)];
    const bool serving = st.degraded;
    EndDegraded(u);
    f.absorbed = true;
    if (needs_node) ++st.nodes_needed;
    if (serving) {
      MarkDown(u);
      unit.Halt();
      unit.set_routable(false);
      host_.EvacuateUnit(u);
    }
    return;
  }
  if (st.stopped || st.rebuilding) {
    // Already down: this fault is repaired with the rebuild under way.
    f.absorbed = true;
    if (needs_node) ++st.nodes_needed;
    if (st.draining) {
      // A planned drain's unit dies: nothing left to wait for.
      units_[static_cast<size_t>(u)]->Halt();
      Eject(u);
    }
    return;
  }
  // An undetected corruption is overtaken by this fault.
  if (st.fault >= 0) faults_[static_cast<size_t>(st.fault)].absorbed = true;
  st.stopped = true;
  // A hung collective leaves the process up (it answers scrapes and accepts requests).
  st.crashed = f.kind == FaultKind::kCrash || f.kind == FaultKind::kSoftwareCrash;
  st.corrupt = false;
  st.passive.Reset();
  st.fault = fi;
  st.nodes_needed += needs_node ? 1 : 0;
  MarkDown(u);
  units_[static_cast<size_t>(u)]->Halt();
}

bool FailureModel::RefusesWork(int u) {
  UnitState& st = state_[static_cast<size_t>(u)];
  // A hung server still accepts; a unit being rebuilt is not routed to, or serves degraded
  // (elastic EP) on its surviving ranks.
  if (!st.crashed || st.rebuilding) return false;
  // The router's own decision, the gateway's state machine: after errors in a row it stops
  // sending at once, and the controller hears of it at its next scrape.
  if (!st.ejected && st.passive.RecordRequest(false) == policy::HealthChange::kEjected) {
    st.ejected = true;
    units_[static_cast<size_t>(u)]->set_routable(false);
    if (st.fault >= 0) Detected(st.fault, "passive_errors");
  }
  return true;
}

void FailureModel::Detected(int fi, const char* by) {
  FaultRecord& f = faults_[static_cast<size_t>(fi)];
  if (f.detected >= 0) return;  // already caught another way
  f.detected = events_.now();
  f.detected_by = by;
}

int FailureModel::Blame(int u, const policy::FleetAction& a) {
  UnitState& st = state_[static_cast<size_t>(u)];
  if (a.rank >= 0) {
    // A straggler verdict: the slow rank's own fault, or a false positive.
    int fi = st.slow_fault;
    if (fi < 0 || a.rank != st.slow_rank) {
      FaultRecord rec;
      rec.kind = FaultKind::kStraggler;
      rec.at = events_.now();
      rec.unit = u;
      rec.rank = a.rank;
      rec.detected_by = "false_positive";
      faults_.push_back(rec);
      fi = static_cast<int>(faults_.size()) - 1;
    }
    // The suspect node is replaced; an undetected corruption goes with the rebuild.
    if (st.fault >= 0 && st.fault != fi) faults_[static_cast<size_t>(st.fault)].absorbed = true;
    st.fault = fi;
    st.nodes_needed = std::max(st.nodes_needed, 1);
    return fi;
  }
  if (st.fault < 0) {
    // A verdict with no fault behind it (say, a unit busy without progress for other reasons).
    FaultRecord rec;
    rec.kind = a.reason == "crash" ? FaultKind::kCrash : FaultKind::kHang;
    rec.at = events_.now();
    rec.unit = u;
    rec.detected_by = "false_positive";
    faults_.push_back(rec);
    st.fault = static_cast<int>(faults_.size()) - 1;
  }
  return st.fault;
}

void FailureModel::BeginRound() {
  window_ = events_.now() >= next_window_;
  if (window_) next_window_ += cfg_.stragglers.interval;
}

policy::EngineObservation FailureModel::Observe(int u) {
  UnitState& st = state_[static_cast<size_t>(u)];
  const Unit& unit = *units_[static_cast<size_t>(u)];
  policy::EngineObservation obs;
  bool active = false;
  if (window_) {
    const uint64_t steps = unit.stats().steps;
    active = steps > st.steps_seen;
    st.steps_seen = steps;
  }
  if (st.crashed || st.rebuilding) {
    obs.gateway_ejected = st.ejected;
    return obs;  // connection refused
  }
  obs.reachable = true;
  const policy::UnitLoad load = unit.Load();
  obs.running = load.running;
  obs.waiting = load.waiting;
  obs.progress = static_cast<double>(unit.stats().steps);
  if (active && !st.stopped && controller().state(u) == policy::EngineState::kServing) {
    StepTimes(u, obs.rank_step_times);
  }
  return obs;
}

void FailureModel::StepTimes(int u, std::vector<double>& out) {
  const UnitState& st = state_[static_cast<size_t>(u)];
  const double sigma = cfg_.stragglers.noise;
  const Nanos now = events_.now(), every = cfg_.stragglers.interval;
  // The slow rank's mean over the window counts only the part of it that it was slow.
  const double slow_part = std::clamp(
      static_cast<double>(now - std::max(st.slow_since, now - every)) / static_cast<double>(every), 0.0, 1.0);
  const double slow = 1 + (st.slow - 1) * slow_part;
  // Every GPU of the unit is a rank to the detector (TP ranks included).
  out.resize(static_cast<size_t>(units_[static_cast<size_t>(u)]->model().layout().gpus()));
  for (size_t r = 0; r < out.size(); ++r) {
    out[r] = rng_.LogNormal(0, sigma) * (static_cast<int>(r) == st.slow_rank ? slow : 1.0);
  }
}

policy::ProbeOutcome FailureModel::Probe(int u) {
  const UnitState& st = state_[static_cast<size_t>(u)];
  if (st.stopped || st.crashed || st.rebuilding) return policy::ProbeOutcome::kNoAnswer;
  return st.corrupt ? policy::ProbeOutcome::kMismatch : policy::ProbeOutcome::kMatch;
}

void FailureModel::Act(int u, const policy::FleetAction& a) {
  UnitState& st = state_[static_cast<size_t>(u)];
  Unit& unit = *units_[static_cast<size_t>(u)];
  using policy::ActionKind;
  switch (a.kind) {
    case ActionKind::kDrain: {
      unit.set_routable(false);
      if (st.planned) return;  // maintenance: detected by the schedule
      const int fi = Blame(u, a);
      Detected(fi, a.rank >= 0                     ? "step_telemetry"
                   : a.reason == "hang"            ? "watchdog"
                   : a.reason == "answer mismatch" ? "probe"
                                                   : "heartbeat");
      MarkDown(u);
      return;
    }
    case ActionKind::kRestart:
    case ActionKind::kChangeRole:  // a simulated unit keeps its pool's role: a restart
      Restart(u);
      return;
    case ActionKind::kCordon:
      // Out until an operator acts: here the operator replaces the suspect node at once, and
      // the repaired unit comes back through the gate.
      Restart(u);
      return;
    case ActionKind::kReadmit:
      Readmit(u);
      return;
    default:
      return;
  }
}

void FailureModel::Restart(int u) {
  UnitState& st = state_[static_cast<size_t>(u)];
  // The rebuild under way is this restart (a controller that finds it still down after its
  // restart_timeout, waiting for a spare node, would restart it again: nothing more to do).
  if (st.rebuilding) return;
  st.rebuilding = true;
  if (st.planned) {
    BeginDrain(u);
    return;
  }
  // Routing tables everywhere stop sending, then the processes are stopped.
  events_.After(cfg_.recovery.eject, [this, u] { Eject(u); });
}

void FailureModel::Eject(int u) {
  UnitState& st = state_[static_cast<size_t>(u)];
  if (!st.rebuilding || (st.planned && !st.draining)) return;  // already ejected
  st.draining = false;
  st.corrupt = false;
  Unit& unit = *units_[static_cast<size_t>(u)];
  if (!unit.halted()) unit.Halt();
  unit.set_routable(false);
  host_.EvacuateUnit(u);  // whatever did not finish is retried elsewhere
  if (st.fault >= 0) MaybeDegrade(u, NeedsNode(faults_[static_cast<size_t>(st.fault)].kind));
  events_.After(cfg_.recovery.stop, [this, u] { TakeSpares(u); });
}

void FailureModel::BeginDrain(int u) {
  UnitState& st = state_[static_cast<size_t>(u)];
  st.draining = true;
  MarkDown(u);
  const Nanos deadline = events_.now() + cfg_.drain_timeout;
  struct Poll {
    FailureModel* m;
    int u;
    Nanos deadline;
    void operator()() const {
      UnitState& s = m->state_[static_cast<size_t>(u)];
      if (!s.draining) return;  // a fault cut it short
      if (m->units_[static_cast<size_t>(u)]->idle() || m->events_.now() >= deadline) {
        m->Eject(u);
        return;
      }
      m->events_.After(kSecond, *this);
    }
  };
  events_.After(kSecond, Poll{this, u, deadline});
}

void FailureModel::ReturnNodes(int n, Nanos after) {
  events_.After(after, [this, n] {
    spares_ += n;
    ServeSpareQueue();
  });
}

void FailureModel::TakeSpares(int u) {
  UnitState& st = state_[static_cast<size_t>(u)];
  if (st.nodes_needed == 0) {
    LoadWeights(u);
    return;
  }
  // The bad nodes leave for repair (or maintenance) now.
  ReturnNodes(st.nodes_needed, st.node_to_maintenance ? cfg_.maintenance_duration : cfg_.recovery.node_repair);
  waiting_spares_.push_back(u);
  ServeSpareQueue();
}

void FailureModel::ServeSpareQueue() {
  while (!waiting_spares_.empty()) {
    const int u = waiting_spares_.front();
    UnitState& st = state_[static_cast<size_t>(u)];
    if (spares_ < st.nodes_needed) {
      ++spare_waits_;
      return;
    }
    spares_ -= st.nodes_needed;
    spares_min_ = std::min(spares_min_, spares_);
    waiting_spares_.pop_front();
    events_.After(cfg_.recovery.spare_acquire, [this, u] { LoadWeights(u); });
  }
}

void FailureModel::LoadWeights(int u) {
  const Unit& unit = *units_[static_cast<size_t>(u)];
  const Placement& pl = placements_[static_cast<size_t>(u)];
  const UnitState& st = state_[static_cast<size_t>(u)];
  const policy::RecoveryOptions& r = cfg_.recovery;
  // Elastic EP: only the replaced node (or the restarted rank) loads, its own serving ranks
  // being peers, and Readmit's pause rebuilds the communicator; otherwise every node loads.
  const int loaders = st.elastic ? 1 : pl.nodes;
  const int gpus = st.elastic ? (st.elastic_node ? pl.gpus / pl.nodes : 1) : pl.gpus;
  const double bytes = unit.model().WeightBytesPerGpu() * gpus;
  const Nanos after_load = (st.elastic ? 0 : r.comm_init) + r.warmup + r.readiness;
  bool peer = st.elastic && r.weights_from_peers;
  if (r.weights_from_peers) {
    for (size_t v = 0; v < units_.size() && !peer; ++v) {
      peer = static_cast<int>(v) != u && PoolOf(static_cast<int>(v)) == PoolOf(u) && units_[v]->routable();
    }
  }
  if (peer) {
    events_.After(policy::PeerLoadTime(bytes / loaders, r) + after_load, [this, u] { Rebuilt(u); });
    return;
  }
  storage_.Start(bytes, loaders, loaders * r.storage_per_node_bytes_per_s,
                 [this, u, after_load] { events_.After(after_load, [this, u] { Rebuilt(u); }); });
}

void FailureModel::ClearSlow(int u) {
  UnitState& st = state_[static_cast<size_t>(u)];
  st.slow_fault = st.slow_rank = -1;
  st.slow = 1;
  ApplySlowdown(u);
}

void FailureModel::Rebuilt(int u) {
  UnitState& st = state_[static_cast<size_t>(u)];
  Unit& unit = *units_[static_cast<size_t>(u)];
  if (st.elastic) {
    // The new node joins a serving unit: the communicator is rebuilt with it, a pause.
    const bool serving = st.degraded;
    EndDegraded(u);
    if (serving) unit.PauseUntil(events_.now() + cfg_.elastic_ep.reconfigure);
  }
  if (st.fault >= 0 && st.fault == st.slow_fault) ClearSlow(u);
  st.rebuilding = st.stopped = st.crashed = st.ejected = st.planned = false;
  st.passive.Reset();
  st.nodes_needed = 0;
  st.node_to_maintenance = false;
  unit.Resume();
  // Up again: the controller's next scrape runs the warmup gate (a repaired cordoned unit too).
  controller().Repaired(u, events_.now());
}

void FailureModel::Readmit(int u) {
  UnitState& st = state_[static_cast<size_t>(u)];
  const Nanos now = events_.now();
  if (st.fault >= 0) faults_[static_cast<size_t>(st.fault)].recovered = now;
  for (FaultRecord& f : faults_) {
    if (f.unit == u && f.absorbed && f.recovered < 0 && f.at <= now && f.kind != FaultKind::kStraggler) f.recovered = now;
  }
  st.fault = -1;
  if (!st.down.empty() && st.down.back().second < 0) st.down.back().second = now;
  units_[static_cast<size_t>(u)]->set_routable(true);
}

double FailureModel::Availability(int pool, Nanos from, Nanos to) const {
  double down = 0, units = 0;
  for (size_t u = 0; u < units_.size(); ++u) {
    if (PoolOf(static_cast<int>(u)) != pool) continue;
    units += 1;
    for (auto [a, b] : state_[u].down) {
      const Nanos hi = std::min(b < 0 ? to : b, to), lo = std::max(a, from);
      if (hi > lo) down += static_cast<double>(hi - lo);
    }
  }
  const double span = units * static_cast<double>(to - from);
  return span > 0 ? 1.0 - down / span : 1.0;
}

nlohmann::ordered_json FailureModel::Report(Nanos end) const {
  using nlohmann::ordered_json;
  auto summary = [](const Distribution& d) -> ordered_json {
    const Summary s = d.Summarize();
    return {{"count", s.count}, {"p50", s.p50}, {"p99", s.p99}, {"max", s.max}};
  };
  std::map<std::string, std::array<Distribution, 3>> by_kind;
  std::map<std::string, int64_t> counts;
  ordered_json list = ordered_json::array();
  int64_t false_positives = 0, unrecovered = 0;
  for (const FaultRecord& f : faults_) {
    if (f.at > end) continue;
    const std::string kind(FaultKindName(f.kind));
    ++counts[kind];
    if (f.detected_by == "false_positive" && f.kind == FaultKind::kStraggler) ++false_positives;
    if (f.recovered < 0 && f.unit >= 0 && !f.absorbed) ++unrecovered;
    auto& d = by_kind[kind];
    if (!f.absorbed && f.detected >= 0) d[0].Add(NanosToSeconds(f.detected - f.at));
    if (!f.absorbed && f.detected >= 0 && f.recovered >= 0) d[1].Add(NanosToSeconds(f.recovered - f.detected));
    // The outage lasts until the unit serves again: degraded, under elastic EP.
    const Nanos back = f.resumed >= 0 ? f.resumed : f.recovered;
    if (!f.absorbed && back >= 0) d[2].Add(NanosToSeconds(back - f.at));
    if (list.size() < 500) {
      list.push_back({{"at_s", NanosToSeconds(f.at)},
                      {"kind", kind},
                      {"unit", f.unit},
                      {"pool", f.unit >= 0 ? s_.pools[static_cast<size_t>(PoolOf(f.unit))].name : ""},
                      {"detected_s", f.detected >= 0 ? ordered_json(NanosToSeconds(f.detected)) : ordered_json()},
                      {"recovered_s", f.recovered >= 0 ? ordered_json(NanosToSeconds(f.recovered)) : ordered_json()},
                      {"detected_by", f.detected_by},
                      {"absorbed", f.absorbed}});
      if (f.resumed >= 0) list.back()["resumed_degraded_s"] = NanosToSeconds(f.resumed);
      if (f.degraded_imbalance > 0) list.back()["degraded_expert_imbalance"] = f.degraded_imbalance;
      if (f.replaced_bytes >= 0) {
        list.back()["re_placement_gigabytes"] = f.replaced_bytes / 1e9;
        list.back()["re_placement_pause_s"] = NanosToSeconds(f.replace_pause);
      }
      if (f.kind == FaultKind::kStraggler) {
        list.back()["factor"] = f.factor;
        list.back()["rank"] = f.rank;
      }
    }
  }
  ordered_json detection = ordered_json::object();
  for (const auto& [kind, d] : by_kind) {
    detection[kind] = {{"time_to_detect_s", summary(d[0])},
                       {"time_to_recover_s", summary(d[1])},
                       {"outage_s", summary(d[2])}};
  }
  ordered_json availability = ordered_json::object();
  for (size_t p = 0; p < s_.pools.size(); ++p) availability[s_.pools[p].name] = Availability(static_cast<int>(p), 0, end);
  // The slow-node radar: ranks by their smoothed step-time excess over their unit's median.
  ordered_json radar_json = ordered_json::array();
  for (const policy::RadarEntry& e : controller().Radar(10)) {
    const Placement& pl = placements_[static_cast<size_t>(e.unit)];
    radar_json.push_back({{"unit", e.unit},
                          {"pool", s_.pools[static_cast<size_t>(PoolOf(e.unit))].name},
                          {"rank", e.rank},
                          {"node", pl.first_node + e.rank / s_.hardware.gpus_per_node},
                          {"step_time_excess", e.excess}});
  }
  ordered_json counts_json = ordered_json::object();
  for (const auto& [k, n] : counts) counts_json[k] = n;
  // What the controller did, as `myriad control` logs it; admissions and probes that matched
  // are only counted.
  std::map<std::string, int64_t> actions;
  ordered_json lines = ordered_json::array();
  for (const ControllerEvent& e : timeline()) {
    if (e.at > end) continue;
    ++actions[e.action];
    if (e.action == "record_answer" || (e.action == "probe" && e.probe == "match") || lines.size() >= 500) continue;
    lines.push_back({{"t_s", NanosToSeconds(e.at)}, {"unit", e.engine}, {"action", e.action}, {"reason", e.reason}});
    if (!e.probe.empty()) lines.back()["probe"] = e.probe;
  }
  ordered_json actions_json = ordered_json::object();
  for (const auto& [k, n] : actions) actions_json[k] = n;
  return {{"faults", counts_json},
          {"unrecovered_at_end", unrecovered},
          {"straggler_false_positives", false_positives},
          {"detection_and_recovery", detection},
          {"availability", availability},
          {"spares", {{"initial", spares_initial_}, {"min", spares_min_},
                      {"at_end", spares_}, {"waits", spare_waits_}}},
          {"peak_concurrent_storage_loads", storage_.peak_flows()},
          {"elastic_ep", ElasticReport(end)},
          {"slow_node_radar", radar_json},
          {"controller", {{"actions", actions_json}, {"timeline", lines}}},
          {"events", list}};
}

}  // namespace myriad::sim
