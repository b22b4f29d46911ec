#pragma once
// vLLM's KV-cache events, as its engines publish them over ZMQ (see
// shared/reference/PROTOCOLS.md, "vLLM KV cache events"), and their msgpack codec.
//
// Checked against vllm-project/vllm, vllm/distributed/kv_events.py and
// vllm/v1/core/kv_cache_utils.py (maybe_convert_block_hash):
// - EventBatch{ts: float, events: list, data_parallel_rank: int | None = None} and the events
//   are msgspec Structs with omit_defaults=True, tag=True. Older releases add array_like=True:
//   a struct is an array of its fields in declaration order, a tagged one starts with the tag
//   (the class name), and trailing fields equal to their default are omitted. Newer ones drop
//   array_like: a struct is a map, a tagged one carries {"type": "<ClassName>"} first, and
//   fields equal to their default are omitted (fields without a default, e.g. lora_id, are
//   always there, nil when None).
// - BlockStored fields, in order: block_hashes, parent_block_hash, token_ids, block_size,
//   lora_id (deprecated), medium, lora_name, extra_keys = None, group_idx = None,
//   kv_cache_spec_kind = None, kv_cache_spec_sliding_window = None. BlockRemoved:
//   block_hashes, medium, group_idx = None. AllBlocksCleared: none.
// - A block hash (ExternalBlockHash = bytes | int) is, from 0.10.2 on, with
//   VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES (the default), int.from_bytes(digest, "big") &
//   (2**64 - 1), i.e. the digest's last 8 bytes read big-endian, which may exceed INT64_MAX;
//   otherwise the raw digest bytes. 0.9.0 to 0.10.1 publish the block's int hash_value, by
//   default Python's hash(): signed, negative about half the time (docs/kv_events.md).
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <variant>
#include <vector>

#include "absl/status/statusor.h"

namespace myriad::net {

// An engine's block hash. Raw-bytes hashes are normalised to what vLLM's int form would have
// been: the last 8 bytes big-endian (fewer than 8 bytes: all of them, zero-extended), so the
// two forms of one engine's stream name a block alike. A negative int is its two's complement.
using EngineBlockHash = uint64_t;

uint64_t EngineHashFromBytes(std::span<const uint8_t> digest);

// One element of a block's extra keys, which vLLM hashes with the block's tokens: the LoRA
// name, multimodal input hashes, and a request's cache_salt (first block only). Strings and
// integers are kept as such; anything else (a nested tuple, a float) is kept as a digest of its
// structure, which names it consistently but no request can reproduce.
struct ExtraKey {
  enum class Kind : uint8_t { kString, kInt, kOther };
  Kind kind = Kind::kString;
  std::string str{};  // kString
  int64_t num = 0;    // kInt (an unsigned value above INT64_MAX wraps), kOther: the digest
  bool operator==(const ExtraKey&) const = default;
};
using BlockExtraKeys = std::optional<std::vector<ExtraKey>>;  // nil: the block has none

// A 64-bit digest of a block's extra keys (0 for none), the same for the same keys however they
// were encoded; Myriad seeds the block's key with it, so the gateway keys a salted request's
// first block with DigestExtraKeys({cache_salt}) to meet what the engine reported.
uint64_t DigestExtraKeys(std::span<const ExtraKey> keys);

struct BlockStored {
  std::vector<EngineBlockHash> block_hashes{};
  std::optional<EngineBlockHash> parent_block_hash{};
  // The tokens of all the stored blocks, block_hashes.size() * block_size of them.
  std::vector<uint32_t> token_ids{};
  uint32_t block_size = 0;
  std::optional<std::string> medium{};  // "GPU", "CPU", ...; nil in older releases
  std::optional<std::string> lora_name{};
  // One entry per block when present (vLLM's list[tuple | None] | None).
  std::optional<std::vector<BlockExtraKeys>> extra_keys{};
  std::optional<int64_t> group_idx{};  // the KV-cache group (hybrid models)
  bool operator==(const BlockStored&) const = default;
};

struct BlockRemoved {
  std::vector<EngineBlockHash> block_hashes{};
  std::optional<std::string> medium{};
  std::optional<int64_t> group_idx{};
  bool operator==(const BlockRemoved&) const = default;
};

struct AllBlocksCleared {
  bool operator==(const AllBlocksCleared&) const = default;
};

using KvEvent = std::variant<BlockStored, BlockRemoved, AllBlocksCleared>;

struct KvEventBatch {
  double ts = 0;
  std::vector<KvEvent> events{};
  std::optional<int> dp_rank{};  // data_parallel_rank
  // Events whose tag this decoder does not know (newer vLLM), skipped rather than fatal.
  uint32_t unknown_events = 0;
  bool operator==(const KvEventBatch&) const = default;
};

// Accepts array or map at both the batch and the event level; fields are read by position or
// by name, trailing fields with defaults may be missing, unknown trailing fields and unknown
// keys are ignored. Errors name the field: "events[3].token_ids: expected an array".
absl::StatusOr<KvEventBatch> DecodeKvEventBatch(std::span<const uint8_t> payload);

enum class KvEventEncoding {
  kArray,       // older vLLM: array_like everywhere
  kMap,         // newer vLLM: maps, events tagged by "type"
  kArrayBatch,  // the transition: array batch, map events
};

enum class KvHashEncoding {
  kInt,    // VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES=1 (default)
  kBytes,  // raw digests; ours are the 8 big-endian bytes, which decode to the same hash
};

// The bytes vLLM's msgspec encoder would produce for `batch` in that shape (floats as float64,
// integers in their smallest form, map keys in declaration order, defaults omitted). vLLM's
// deprecated lora_id is always nil.
std::vector<uint8_t> EncodeKvEventBatch(const KvEventBatch& batch,
                                        KvEventEncoding encoding = KvEventEncoding::kMap,
                                        KvHashEncoding hashes = KvHashEncoding::kInt);

}  // namespace myriad::net
