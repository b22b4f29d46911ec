// The cluster's side of a model rollout (sim/rollout_driver.h): candidate lists split by
// version, so that a request routes among the units of the version the split picked.
#include <algorithm>

#include "sim/cluster.h"

namespace myriad::sim {

void Cluster::FillCandidates() {
  const bool split = rollout_ && rollout_->split();
  // The canary's units first, each side in unit order.
  auto order = [&](std::vector<int>& ids) {
    std::sort(ids.begin(), ids.end());
    if (split) std::stable_partition(ids.begin(), ids.end(), [&](int u) { return rollout_->canary(u); });
    return split ? static_cast<size_t>(std::count_if(ids.begin(), ids.end(), [&](int u) { return rollout_->canary(u); }))
                 : size_t{0};
  };
  entry_canary_ = order(entry_units_);
  decode_canary_ = order(decode_units_);
  const policy::RoutingPolicy policy = router_->options().policy;
  const bool ranked = policy != policy::RoutingPolicy::kRandom && policy != policy::RoutingPolicy::kRoundRobin;
  auto fill = [&](const std::vector<int>& ids, size_t canaries, std::vector<policy::Candidate>& cands,
                  std::unique_ptr<policy::LoadRanking>& ranking, std::unique_ptr<policy::LoadRanking>& canary_ranking,
                  policy::Phase phase) {
    // Sized here, and again on every regroup: the units keep pointers into these and are all
    // pointed anew below.
    cands.assign(ids.size(), policy::Candidate{});
    ranking = ranked ? std::make_unique<policy::LoadRanking>(phase, ids.size() - canaries) : nullptr;
    canary_ranking = ranked && canaries > 0 ? std::make_unique<policy::LoadRanking>(phase, canaries) : nullptr;
    for (size_t i = 0; i < ids.size(); ++i) {
      Unit& u = *units_[static_cast<size_t>(ids[i])];
      cands[i].holder = static_cast<policy::HolderId>(ids[i]);
      const auto pool = static_cast<size_t>(u.config().pool);
      cands[i].cost = pool_learned_.empty() ? &pool_costs_[pool] : &pool_learned_[pool]->cost();
      if (store_) cands[i].store_path = &pool_store_paths_[pool];
      // Each group's ranking counts from its own first candidate, as the router sees its span.
      if (i < canaries) u.PublishLoadTo(&cands[i].load, canary_ranking.get(), i);
      else u.PublishLoadTo(&cands[i].load, ranking.get(), i - canaries);
      if (bus_ || store_) u.EnableCacheEvents();
    }
  };
  fill(entry_units_, entry_canary_, entry_cands_, entry_ranking_, entry_canary_ranking_, policy::Phase::kPrefill);
  fill(decode_units_, decode_canary_, decode_cands_, decode_ranking_, decode_canary_ranking_, policy::Phase::kDecode);
  UseGroup(false);
}

std::pair<std::span<const policy::Candidate>, std::span<const policy::Candidate>> Cluster::UseGroup(bool canary) {
  const std::span<const policy::Candidate> entry(entry_cands_), decode(decode_cands_);
  if (canary) {
    entry_off_ = decode_off_ = 0;
    router_->UseLoadRankings(entry_canary_ranking_.get(), decode_canary_ranking_.get());
    return {entry.first(entry_canary_), decode.first(decode_canary_)};
  }
  entry_off_ = entry_canary_;
  decode_off_ = decode_canary_;
  router_->UseLoadRankings(entry_ranking_.get(), decode_ranking_.get());
  return {entry.subspan(entry_canary_), decode.subspan(decode_canary_)};
}

void Cluster::BuildRollout() {
  rollout_ = std::make_unique<RolloutDriver>(
      scenario_, events_, units_, [this] { FillCandidates(); }, [this](int u) { return elastic_->ReloadTime(u); });
  elastic_->Pin(&rollout_->pinned());
}

}  // namespace myriad::sim
