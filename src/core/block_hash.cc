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

uint64_t DigestExtraKeys(std::span<const ExtraKey> keys) {
  if (keys.empty()) return 0;
  XXH3_state_t st;
  XXH3_INITSTATE(&st);
  XXH3_64bits_reset_withSeed(&st, 0x6d79726961640003ULL);
  for (const ExtraKey& k : keys) {
    const auto kind = static_cast<uint8_t>(k.kind);
    XXH3_64bits_update(&st, &kind, 1);
    if (k.kind == ExtraKey::Kind::kString) {
      const uint64_t n = k.str.size();
      XXH3_64bits_update(&st, &n, sizeof n);
      XXH3_64bits_update(&st, k.str.data(), k.str.size());
    } else {
      XXH3_64bits_update(&st, &k.num, sizeof k.num);
    }
  }
  return XXH3_64bits_digest(&st);
}

std::vector<ExtraKey> CacheSaltExtraKeys(std::string_view cache_salt) {
  return {ExtraKey{.kind = ExtraKey::Kind::kString, .str = std::string(cache_salt)}};
}

uint64_t CacheSaltDigest(std::string_view cache_salt) {
  return cache_salt.empty() ? 0 : DigestExtraKeys(CacheSaltExtraKeys(cache_salt));
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
