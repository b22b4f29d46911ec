#include "kvstore_core/routing.h"

namespace myriad::kvstore {

uint32_t MasterForKey(BlockKey route_key, uint32_t masters) {
  if (masters <= 1) return 0;
  // Jump consistent hash, from the paper, with its 64-bit LCG.
  uint64_t key = route_key;
  int64_t b = -1, j = 0;
  while (j < static_cast<int64_t>(masters)) {
    b = j;
    key = key * 2862933555777941757ULL + 1;
    j = static_cast<int64_t>(static_cast<double>(b + 1) *
                             (static_cast<double>(int64_t{1} << 31) /
                              static_cast<double>((key >> 33) + 1)));
  }
  return static_cast<uint32_t>(b);
}

std::vector<std::vector<uint32_t>> SplitByMaster(std::span<const BlockKey> route_keys,
                                                 uint32_t masters) {
  if (masters == 0) masters = 1;
  std::vector<std::vector<uint32_t>> out(masters);
  for (size_t i = 0; i < route_keys.size(); ++i) {
    out[MasterForKey(route_keys[i], masters)].push_back(static_cast<uint32_t>(i));
  }
  return out;
}

}  // namespace myriad::kvstore
