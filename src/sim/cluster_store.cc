// The cluster's side of the KV store tier: building it on the topology, the units' prefixes
// it extends, the load-backs before a prefill, and its report section.
#include <fmt/format.h>

#include <algorithm>

#include "sim/cluster.h"

namespace myriad::sim {

absl::Status Cluster::BuildStore() {
  const HardwareConfig& hw = scenario_.hardware;
  const int racks = (hw.nodes + hw.nodes_per_rack - 1) / hw.nodes_per_rack;
  // Every pool serves the one model, so a block's KV is the same size wherever it comes from.
  const double block_bytes = units_.empty() ? 0.0 : scenario_.kv_block_tokens * units_.front()->model().KvBytesPerToken();
  if (!(block_bytes >= 1) || block_bytes > static_cast<double>(kvstore::kMaxObjectBytes)) {
    return absl::InvalidArgumentError(
        fmt::format("store: a prefix block of {} is {:.0f} bytes, outside the store's 1 byte to 4 GiB per object",
                    scenario_.model, block_bytes));
  }
  store_ = std::make_unique<StoreTier>(scenario_.store, events_, transfer_, racks, static_cast<uint64_t>(block_bytes),
                                       scenario_.seed);
  store_->set_on_first_loss([this] { limiter_shed_at_loss_ = limiter_ ? static_cast<int64_t>(limiter_->shed()) : 0; });
  return absl::OkStatus();
}

const policy::PrefillCost& Cluster::CostOf(const Unit& u) const {
  const auto pool = static_cast<size_t>(u.config().pool);
  return pool_learned_.empty() ? pool_costs_[pool] : pool_learned_[pool]->cost();
}

size_t Cluster::CachedBlocks(const Unit& u, std::span<const BlockKey> blocks, int64_t input_tokens) const {
  const size_t have = u.CachedPrefix(blocks);
  if (!store_) return have;
  // Only what LoadFromStore will load: a run it leaves to recompute is no cached prefix.
  return have + store_->PlanLoad(blocks, have, u.model().layout().tp,
                                 {.cost = CostOf(u), .input_tokens = input_tokens,
                                  .block_tokens = scenario_.kv_block_tokens})
                    .take;
}

bool Cluster::LoadFromStore(uint32_t slot, int unit) {
  if (!store_) return false;
  const Unit& u = *units_[static_cast<size_t>(unit)];
  const std::span<const BlockKey> blocks = table_[slot].req.blocks;
  const size_t have = u.CachedPrefix(blocks);
  // Priced by the cost the router ranks this unit by.
  const StoreTier::Load got = store_->LoadBack(
      blocks, have, placements_[static_cast<size_t>(unit)].rack, u.model().layout().tp,
      {.cost = CostOf(u), .input_tokens = int64_t{table_[slot].req.input_tokens} + table_[slot].generated,
       .block_tokens = scenario_.kv_block_tokens});
  if (got.blocks == 0) return false;
  // As a copy from a peer unit: the blocks land in the unit's prefix cache, where the prefill
  // finds them.
  events_.At(got.ready_at, [this, slot, unit, upto = have + got.blocks] {
    Unit& t = *units_[static_cast<size_t>(unit)];
    if (!t.routable()) return Retry(slot);
    t.AddToCache(std::span<const BlockKey>(table_[slot].req.blocks).first(upto));
    t.EnqueuePrefill(slot);
  });
  return true;
}

nlohmann::ordered_json Cluster::StoreReport() const {
  nlohmann::ordered_json j = store_->Report(end_, scenario_.kv_block_tokens);
  const int64_t shed = limiter_ ? static_cast<int64_t>(limiter_->shed()) : 0;
  j["recompute_limiter"] = {
      {"enabled", limiter_ != nullptr},
      {"shed", shed},
      {"shed_after_first_loss",
       limiter_shed_at_loss_ >= 0 ? nlohmann::ordered_json(shed - limiter_shed_at_loss_) : nlohmann::ordered_json()}};
  return j;
}

}  // namespace myriad::sim
