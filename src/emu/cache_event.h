#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace myriad::emu {

// One event of the engine's prefix cache, as vLLM reports it (engine hashes, not Myriad keys).
struct CacheEvent {
  enum class Kind { kStored, kRemoved, kCleared } kind = Kind::kStored;
  std::vector<uint64_t> hashes;
  std::optional<uint64_t> parent;  // kStored: the block before the first, if any
  std::vector<uint32_t> tokens;    // kStored: hashes.size() * block_size token ids
  std::string salt;                // kStored from position 0: the request's cache_salt, if any
  // Where the blocks are, as vLLM's medium: the engine's HBM ("GPU") or the KV store tier
  // ("CPU", as vLLM's offloading connectors report theirs).
  enum class Medium { kGpu, kCpu } medium = Medium::kGpu;
};

}  // namespace myriad::emu
