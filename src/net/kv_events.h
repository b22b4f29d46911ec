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
#include <span>
#include <vector>

#include "absl/status/statusor.h"
#include "core/kv_events.h"

namespace myriad::net {

// An engine's raw-bytes block hash as its int form (core/kv_events.h, EngineBlockHash).
uint64_t EngineHashFromBytes(std::span<const uint8_t> digest);

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
