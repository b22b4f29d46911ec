#pragma once
// What a prompt costs a unit before its first token, by where each part of its prefix comes
// from: blocks already in the unit's HBM cost nothing to get, blocks its store tier holds cost
// their bytes over the store path (plus the path's latency), the rest is recomputed. Loading
// is taken only when it beats recomputing those same blocks, so a slow path or a short prefix
// falls back to recompute. The router ranks candidates with it (router.h), in the simulator
// and in the gateway alike. Pure arithmetic.
#include <cstddef>
#include <cstdint>
#include <span>

#include "core/block_hash.h"
#include "core/time.h"
#include "policy/prefill_cost.h"

namespace myriad::policy {

// The path a unit loads store-tier blocks over (its NIC towards the store, or PCIe from its
// host's DRAM). bytes_per_s 0: no store tier is priced.
struct StorePath {
  double bytes_per_s = 0;
  Nanos latency = 0;
};

// The decision's split of the prompt: tokens found in HBM, tokens loaded from the store, and
// what it all takes (queue included).
struct TierPrice {
  double ttft_s = 0;
  int64_t hbm_tokens = 0;
  int64_t store_tokens = 0;
};

// `hbm_tokens` of the `input_tokens` are in the unit's HBM; its store tier holds the prompt up
// to `reach_tokens` (HBM and store together, so store_tokens = reach - hbm when loaded).
// `queue_s`: the wait behind the unit's queue. Inline: the router calls it for every candidate
// of every request, a thousand units per decision in the simulator. `store_bytes`: what the
// store's part weighs on the path (an engine may store its blocks in another layout than the
// model's KV per token; PriceTiers, below, weighs them by the model's).
inline TierPrice PriceTierBytes(const PrefillCost& cost, double queue_s, int64_t input_tokens, int64_t hbm_tokens,
                                int64_t reach_tokens, double store_bytes, const StorePath& path) {
  TierPrice p;
  p.hbm_tokens = hbm_tokens;
  // Recompute: the same expression the router has always ranked by, so a world without a
  // store tier decides exactly as before.
  p.ttft_s = queue_s + cost.PrefillSeconds(input_tokens - hbm_tokens, hbm_tokens);
  if (path.bytes_per_s <= 0 || reach_tokens <= hbm_tokens) return p;
  const double loaded = queue_s + NanosToSeconds(path.latency) + store_bytes / path.bytes_per_s +
                        cost.PrefillSeconds(input_tokens - reach_tokens, reach_tokens);
  if (loaded < p.ttft_s) {
    p.ttft_s = loaded;
    p.store_tokens = reach_tokens - hbm_tokens;
  }
  return p;
}

// A store tier that every unit loads from (the simulator's: one store for the cluster), where
// a gateway knows each engine's own store tier from its events (Candidate::store_holder in
// router.h). The router prices, for each unit, the store's run that continues the unit's own
// HBM prefix, as the unit would load it.
class SharedStoreView {
 public:
  virtual ~SharedStoreView() = default;
  // Leading blocks of `blocks` the store holds, complete.
  virtual size_t Covered(std::span<const BlockKey> blocks) const = 0;
};

inline TierPrice PriceTiers(const PrefillCost& cost, double queue_s, int64_t input_tokens, int64_t hbm_tokens,
                            int64_t reach_tokens, const StorePath& path) {
  return PriceTierBytes(cost, queue_s, input_tokens, hbm_tokens, reach_tokens,
                        static_cast<double>(reach_tokens - hbm_tokens) * cost.kv_bytes_per_token(), path);
}

}  // namespace myriad::policy
