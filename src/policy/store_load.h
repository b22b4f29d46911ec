#pragma once
// Which blocks of a prompt, past the unit's HBM prefix, the unit loads from its KV store tier
// and which it recomputes. The one decision the emulated engine's store tier
// (emu/kv_store_tier.cc) and the simulator's (sim/store_tier.cc) take once the store has said
// what it holds, priced by tier_pricing.h so that it agrees with the router's estimate: the
// store's run is loaded only when its bytes over the path, plus the prefill of the rest, beat
// recomputing it. Pure arithmetic.
#include <cstdint>

#include "policy/prefill_cost.h"
#include "policy/tier_pricing.h"

namespace myriad::policy {

struct StoreLoadQuery {
  int64_t input_tokens = 0;  // the prompt (and output so far, after a preemption)
  int64_t hbm_blocks = 0;    // its leading blocks in the unit's HBM
  int64_t store_blocks = 0;  // the blocks right after them that the store holds, in a run
  int64_t block_tokens = 0;  // >= 1
  double block_bytes = 0;    // one block as the store holds it
};

struct StoreLoad {
  int64_t load_blocks = 0;       // from the store: 0 or the whole run
  int64_t recompute_tokens = 0;  // computed by the prefill, past HBM and the loaded blocks
  double seconds = 0;            // expected: the load, then the prefill of the rest
};

// A run that reaches past the prompt (its last block partial) is counted only up to it.
StoreLoad DecideStoreLoad(const PrefillCost& cost, const StorePath& path, const StoreLoadQuery& q);

}  // namespace myriad::policy
