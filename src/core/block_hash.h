#pragma once
// The token-block hash chain that names KV everywhere in Myriad: block i's key is a 64-bit
// XXH3 hash of (key of block i-1, the block's token ids), seeded by the extra key (LoRA name,
// cache salt, model namespace). Equal keys mean equal prefixes up to and including the block.
#include <cstdint>
#include <span>
#include <string>
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

// One element of a block's extra keys, which vLLM hashes with the block's tokens and reports in
// its KV events: the LoRA name, multimodal input hashes, and a request's cache_salt (first block
// only). Strings and integers are kept as such; anything else (a nested tuple, a float) is kept
// as a digest of its structure, which names it consistently but no request can reproduce.
struct ExtraKey {
  enum class Kind : uint8_t { kString, kInt, kOther };
  Kind kind = Kind::kString;
  std::string str{};  // kString
  int64_t num = 0;    // kInt (an unsigned value above INT64_MAX wraps), kOther: the digest
  bool operator==(const ExtraKey&) const = default;
};

// The block-key rule for extra keys: a 64-bit digest of a block's extra keys (0 for none), the
// same for the same keys however they were encoded. A block's key is seeded with it, so the
// event indexer (a stored block's reported keys) and the router (a request's cache_salt) key
// the block alike.
uint64_t DigestExtraKeys(std::span<const ExtraKey> keys);

// The extra keys vLLM reports on a salted request's first block: the salt alone.
std::vector<ExtraKey> CacheSaltExtraKeys(std::string_view cache_salt);

// The seed a request's first block gets from its cache_salt (0 for none): the digest of
// CacheSaltExtraKeys, passed as HashTokenBlocks' first_extra.
uint64_t CacheSaltDigest(std::string_view cache_salt);

// For traces that name a block's content by an id (Mooncake's hash_ids) instead of tokens.
BlockKey HashContentBlock(BlockKey parent, uint64_t content_id, uint64_t extra = 0);

// Keys of every full block of `tokens`; a trailing partial block is not keyed (engines only
// cache full blocks). The first block is seeded with extra ^ first_extra (a cache salt's
// digest: engines salt only a request's first block, the chain carries it on).
std::vector<BlockKey> HashTokenBlocks(std::span<const uint32_t> tokens, size_t block_size,
                                      uint64_t extra = 0, uint64_t first_extra = 0);

}  // namespace myriad
