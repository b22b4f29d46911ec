#include "policy/weight_plan.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace myriad::policy {
namespace {

constexpr double kUnlimited = std::numeric_limits<double>::infinity();

struct Rates {
  double shard;  // bytes each node needs
  double nic;    // one node's NICs
  double hop;    // one node copying to another
  const WeightFabric* f;
  // Each of `readers` nodes reading from storage at once.
  double Storage(double readers) const {
    return std::min({f->storage_node_bytes_per_s, f->storage_bytes_per_s / std::max(readers, 1.0), nic});
  }
};

WeightPlan Finish(WeightPlanKind kind, const std::vector<double>& ready_s) {
  WeightPlan p;
  p.kind = kind;
  p.ready.reserve(ready_s.size());
  for (double t : ready_s) p.ready.push_back(SecondsToNanos(t));
  p.makespan = p.ready.empty() ? 0 : *std::max_element(p.ready.begin(), p.ready.end());
  return p;
}

std::vector<double> StoragePlan(const WeightLoad& j, const Rates& r) {
  const double t = r.shard / r.Storage(static_cast<double>(j.units) * j.nodes_per_unit);
  return std::vector<double>(static_cast<size_t>(j.units), t);
}

// Without a loaded unit, the first units read from storage: as many as it feeds at the full
// per-node rate (at least one); they then feed the others.
int StorageHeads(const WeightLoad& j, const Rates& r) {
  const double full = std::min(r.f->storage_node_bytes_per_s, r.nic) * j.nodes_per_unit;
  const double fed = std::floor(r.f->storage_bytes_per_s / std::max(full, 1e-9));
  return static_cast<int>(std::clamp(fed, 1.0, static_cast<double>(j.units)));
}

std::vector<double> ChainPlan(const WeightLoad& j, const Rates& r) {
  std::vector<double> ready(static_cast<size_t>(j.units));
  const double chunk = std::min(r.f->chunk_bytes, r.shard) / r.hop;
  const int heads = j.loaded_units > 0 ? 0 : StorageHeads(j, r);
  const int chains = j.loaded_units > 0 ? std::min(j.loaded_units, j.units) : heads;
  // A chain runs at its slowest link; each hop adds one chunk's delay.
  const double feed = heads > 0 ? r.Storage(static_cast<double>(heads) * j.nodes_per_unit) : r.hop;
  for (int u = 0; u < j.units; ++u) {
    const int pos = u / chains;
    if (heads > 0 && pos == 0) {
      ready[static_cast<size_t>(u)] = r.shard / feed;
    } else {
      ready[static_cast<size_t>(u)] = r.shard / std::min(feed, r.hop) + pos * chunk;
    }
  }
  return ready;
}

std::vector<double> TreePlan(const WeightLoad& j, const Rates& r) {
  std::vector<double> ready;
  ready.reserve(static_cast<size_t>(j.units));
  double t = 0;
  int64_t holders = j.loaded_units;
  if (holders == 0) {
    const int heads = StorageHeads(j, r);
    t = r.shard / r.Storage(static_cast<double>(heads) * j.nodes_per_unit);
    ready.assign(static_cast<size_t>(heads), t);
    holders = heads;
  }
  const double round = r.shard / r.hop;
  while (static_cast<int>(ready.size()) < j.units) {
    t += round;
    const int64_t fresh = std::min<int64_t>(holders, j.units - static_cast<int64_t>(ready.size()));
    ready.insert(ready.end(), static_cast<size_t>(fresh), t);
    holders += fresh;
  }
  return ready;
}

}  // namespace

std::string_view WeightPlanName(WeightPlanKind k) {
  switch (k) {
    case WeightPlanKind::kStorage: return "storage";
    case WeightPlanKind::kChain: return "chain";
    case WeightPlanKind::kTree: return "tree";
  }
  return "?";
}

WeightPlan PlanWeightLoad(const WeightLoad& job, const WeightFabric& f) {
  WeightLoad j = job;
  j.units = std::max(j.units, 0);
  j.nodes_per_unit = std::max(j.nodes_per_unit, 1);
  j.loaded_units = std::max(j.loaded_units, 0);
  const double nic = f.nic_bytes_per_s > 0 ? f.nic_bytes_per_s : kUnlimited;
  const Rates r{.shard = std::max(j.unit_bytes, 0.0) / j.nodes_per_unit,
                .nic = nic,
                .hop = std::min(f.peer_bytes_per_s, nic / std::max(f.oversubscription, 1.0)),
                .f = &f};
  WeightPlan best = Finish(WeightPlanKind::kStorage, StoragePlan(j, r));
  const Nanos storage = best.makespan;
  if (j.peers_allowed && j.units > 0) {
    // On a tie the copy between peers wins: it leaves storage to other loads.
    for (WeightPlan p : {Finish(WeightPlanKind::kChain, ChainPlan(j, r)), Finish(WeightPlanKind::kTree, TreePlan(j, r))}) {
      if (p.makespan <= best.makespan && (best.kind == WeightPlanKind::kStorage || p.makespan < best.makespan)) {
        best = std::move(p);
      }
    }
  }
  best.storage_makespan = storage;
  return best;
}

}  // namespace myriad::policy
