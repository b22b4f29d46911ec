#pragma once
// The token-block hash chain that names KV everywhere in Myriad: block i's key is a 64-bit
// XXH3 hash of (key of block i-1, the block's token ids), seeded by the extra key (LoRA name,
// cache salt, model namespace). Equal keys mean equal prefixes up to and including the block.
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

namespace myriad {

using BlockKey = uint64_t;

// The parent of a prompt's first block.
inline constexpr BlockKey kRootBlockKey = 0;

BlockKey HashTokenBlock(BlockKey parent, std::span<const uint32_t> tokens, uint64_t extra = 0);

// The extra key of a chain whose blocks depend on a name (a LoRA adapter's, a cache salt), so
// that everyone who keys such a prompt (router, engine-event indexer) seeds it alike. The
// empty name is 0, the extra key of a plain prompt.
uint64_t ExtraKeyOf(std::string_view name);

// For traces that name a block's content by an id (Mooncake's hash_ids) instead of tokens.
BlockKey HashContentBlock(BlockKey parent, uint64_t content_id, uint64_t extra = 0);

// Keys of every full block of `tokens`; a trailing partial block is not keyed (engines only
// cache full blocks). The first block is seeded with extra ^ first_extra (a cache salt's
// digest: engines salt only a request's first block, the chain carries it on).
std::vector<BlockKey> HashTokenBlocks(std::span<const uint32_t> tokens, size_t block_size,
                                      uint64_t extra = 0, uint64_t first_extra = 0);

}  // namespace myriad
