#include "core/block_hash.h"

#define XXH_INLINE_ALL
#include <xxhash.h>

#include <cstring>

namespace myriad {

BlockKey HashTokenBlock(BlockKey parent, std::span<const uint32_t> tokens, uint64_t extra) {
  XXH3_state_t state;
  XXH3_INITSTATE(&state);
  XXH3_64bits_reset_withSeed(&state, extra);
  XXH3_64bits_update(&state, &parent, sizeof parent);
  XXH3_64bits_update(&state, tokens.data(), tokens.size_bytes());
  return XXH3_64bits_digest(&state);
}

uint64_t ExtraKeyOf(std::string_view name) {
  if (name.empty()) return 0;
  return XXH3_64bits_withSeed(name.data(), name.size(), 0x6d79726961640002ULL);
}

BlockKey HashContentBlock(BlockKey parent, uint64_t content_id, uint64_t extra) {
  uint64_t buf[2] = {parent, content_id};
  return XXH3_64bits_withSeed(buf, sizeof buf, extra ^ 0x6d79726961640001ULL);
}

std::vector<BlockKey> HashTokenBlocks(std::span<const uint32_t> tokens, size_t block_size,
                                      uint64_t extra, uint64_t first_extra) {
  std::vector<BlockKey> keys;
  if (block_size == 0) return keys;
  keys.reserve(tokens.size() / block_size);
  BlockKey parent = kRootBlockKey;
  for (size_t i = 0; i + block_size <= tokens.size(); i += block_size) {
    parent = HashTokenBlock(parent, tokens.subspan(i, block_size), i == 0 ? extra ^ first_extra : extra);
    keys.push_back(parent);
  }
  return keys;
}

}  // namespace myriad
