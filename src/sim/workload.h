#pragma once
// Where simulated requests come from: recorded traces (Mooncake JSONL, Azure CSV) and a
// synthetic generator, all behind one pull interface so a run streams requests instead of
// holding an hour of them in memory.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "absl/status/statusor.h"
#include "core/block_hash.h"
#include "core/time.h"

namespace myriad::sim {

// A prompt's block keys: most prompts' fit inline (no allocation per request, and the keys sit
// beside the request's other state); longer ones spill to the heap.
using BlockList = absl::InlinedVector<BlockKey, 10>;

struct Request {
  uint64_t id = 0;          // 0, 1, 2... in arrival order
  Nanos arrival = 0;
  int32_t input_tokens = 0;
  int32_t output_tokens = 0;  // at least 1
  uint32_t tenant = 0;
  // Keys of the prompt's full KV blocks (block size fixed per run), in order: equal keys at
  // equal positions mean a shared prefix up to that block.
  BlockList blocks;
};

class Workload {
 public:
  virtual ~Workload() = default;
  // The next request in arrival order (arrivals never decrease), or nullopt when exhausted.
  virtual std::optional<Request> Next() = 0;
};

}  // namespace myriad::sim
