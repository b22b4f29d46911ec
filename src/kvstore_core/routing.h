#pragma once
// Splitting keys across several masters. A run is found by any of its block keys, so all runs
// of one prefix must live on one master: callers route by the chain's root key (the key of
// block 0, which every request of that prefix knows), not by the looked-up key itself.
#include <cstdint>
#include <span>
#include <vector>

#include "core/block_hash.h"

namespace myriad::kvstore {

// Which of `masters` masters owns `route_key`: a jump consistent hash (Lamping and Veach), so
// growing from n to n + 1 masters moves only 1/(n + 1) of the keys. masters >= 1.
uint32_t MasterForKey(BlockKey route_key, uint32_t masters);

// Positions of `route_keys` grouped by master: out[m] lists, in input order, the indices of
// the keys master m owns. A batch is split this way and each part sent to its master.
std::vector<std::vector<uint32_t>> SplitByMaster(std::span<const BlockKey> route_keys,
                                                 uint32_t masters);

}  // namespace myriad::kvstore
