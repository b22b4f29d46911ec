#pragma once
// vLLM's KV-cache events as plain data: what net's codec (net/kv_events.h) decodes from an
// engine's ZMQ stream and encodes for the emulator's, and what the event indexer
// (policy/kv_event_indexer.h) applies to the prefix index. Field meanings and the vLLM versions
// they come from are described in net/kv_events.h.
#include <cstdint>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "core/block_hash.h"

namespace myriad {

// An engine's block hash. Raw-bytes hashes are normalised to what vLLM's int form would have
// been: the last 8 bytes big-endian (fewer than 8 bytes: all of them, zero-extended), so the
// two forms of one engine's stream name a block alike. A negative int is its two's complement.
using EngineBlockHash = uint64_t;

using BlockExtraKeys = std::optional<std::vector<ExtraKey>>;  // nil: the block has none

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
  // Events whose tag the decoder does not know (newer vLLM), skipped rather than fatal.
  uint32_t unknown_events = 0;
  bool operator==(const KvEventBatch&) const = default;
};

}  // namespace myriad
