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

// The most requests a run may be set up to simulate (expected arrivals, counted before the run
// starts): about 7 hours at 400 k simulated requests/s, and a bound that keeps a typo such as
// `rate: 1e308` from running until memory or patience runs out.
inline constexpr double kMaxSimulatedRequests = 1e10;
// The longest prompt or output a workload may draw, in tokens.
inline constexpr int32_t kMaxTokens = int32_t{1} << 24;

// An option that breaks a workload's rules. `field` is its key path in a scenario file
// ("workload.sessions.think_time"), so the scenario parser can point at the line.
struct FieldError {
  std::string field;
  std::string what;  // "must be > 0, got -3"
};

class Workload {
 public:
  virtual ~Workload() = default;
  // The next request in arrival order (arrivals never decrease), or nullopt when exhausted.
  virtual std::optional<Request> Next() = 0;
};

}  // namespace myriad::sim
