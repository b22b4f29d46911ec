#pragma once
// A prompt's block keys for the routing tests: a chain of `n` blocks from position 0, whose
// contents are first, first+1, ... (distinct `first`s far apart give unrelated prompts).
#include <vector>

#include "core/block_hash.h"

namespace myriad::policy::routing_test {

inline std::vector<BlockKey> Chain(BlockKey first, int n) {
  std::vector<BlockKey> out;
  BlockKey parent = kRootBlockKey;
  for (int i = 0; i < n; ++i) out.push_back(parent = HashContentBlock(parent, first + static_cast<BlockKey>(i)));
  return out;
}

}  // namespace myriad::policy::routing_test
