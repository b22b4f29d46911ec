#pragma once
// `myriad twin DESCRIPTION.yaml`: issue 19's twin check. One description generates both a live
// cluster (a gateway and emulated engines, as `myriad up` runs them, at an accelerated speed)
// and the equivalent simulator scenario; the same workload runs through both and the two are
// compared request by request: routing agreement outside the failure window, prefix hit rate,
// TTFT p50/p99, rejections by reason and the time to eject the failed backend.
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/time.h"
#include "sim/trace_workload.h"

namespace myriad::cli {

struct TwinTenant {
  std::string name;
  double share = 1;  // of the synthetic workload's requests
  double weight = 1;
  int priority = 0;
  double quota_tokens_per_s = 0;
  double burst_tokens = 0;
};

// The synthetic workload: requests that share one of `prefixes` prompt prefixes (picked by a
// Zipf law), followed by blocks of their own, at Poisson arrivals. Block = 512 tokens, the
// trace's unit, so the workload is written as a Mooncake trace both sides read.
struct TwinWorkload {
  std::string trace;  // a Mooncake JSONL to replay instead (relative to the description)
  int requests = 2000;
  double rate = 4;  // requests per emulated second
  int prefixes = 32;
  double zipf = 1.0;
  int prefix_blocks = 4;
  int own_blocks_min = 1, own_blocks_max = 4;
  int output_min = 16, output_max = 256;
};

struct TwinDescription {
  std::string name = "twin";
  uint64_t seed = 1;
  double speed = 4;  // emulated seconds per real second on the live side
  std::string model = "Llama-3.1-8B";
  std::string gpu = "H100";
  int colocated = 2, prefill = 0, decode = 0;
  std::string policy = "kv-aware";
  // Both sides learn each pool's cost from their own first tokens (gateway routing.learn_cost,
  // scenario router.learn_cost); false: both use the configured model.
  bool learn_cost = true;
  int kv_block_tokens = 16;
  Nanos ttft_slo = 2 * kSecond;
  // P/D: the live path's second exchange (the gateway reads the prefill's whole answer, then
  // calls the decode engine), in real time; the simulator delays each hand-off by it x speed
  // (scenario router.handoff_delay), as the live side's real costs count speed times over.
  Nanos handoff_delay = 0;
  std::vector<TwinTenant> tenants;
  TwinWorkload workload;
  int fail_engine = -1;  // -1: no failure
  Nanos fail_at = 0;     // emulated time since the first request
  int engines() const { return prefill > 0 ? prefill + decode : colocated; }
};

// Bounds (docs/twin.md).
inline constexpr int kMaxTwinEngines = 16;
inline constexpr int kMaxTwinRequests = 100'000;
inline constexpr double kMaxTwinSpeed = 100;
inline constexpr Nanos kMaxTwinHandoffDelay = 100 * kMillisecond;

absl::StatusOr<TwinDescription> ParseTwinDescription(const std::string& yaml, const std::string& source_name);
absl::StatusOr<TwinDescription> LoadTwinDescription(const std::string& path);

// The records both sides replay: the description's trace, or the synthetic workload drawn from
// its seed (the same seed, the same records). A record's tenant indexes desc.tenants.
absl::StatusOr<std::vector<sim::TraceRecord>> TwinRecords(const TwinDescription& d);
// Mooncake JSONL of `records` (with the "tenant" extension).
std::string TwinTraceJsonl(const std::vector<sim::TraceRecord>& records);

// The simulator's scenario for the live cluster the description names: one GPU per engine,
// engine i = unit i, the same router, block size, tenants and failure; `trace_path` holds the
// records, keyed by their token ids as the gateway keys them.
std::string TwinScenarioYaml(const TwinDescription& d, const std::string& trace_path, Nanos span);

// One request as one side saw it.
struct TwinRequest {
  bool served = false;
  std::string reason;  // why not served ("" when served)
  int entry = -1;      // the engine that computed the prompt
  int decode = -1;     // P/D: the engine that decoded
  double ttft_s = -1;  // emulated seconds
  int64_t prompt_tokens = 0, cached_tokens = 0;
};

struct TwinSide {
  std::vector<TwinRequest> requests;  // record order
  double eject_s = -1;                // failure to ejection, emulated seconds; -1: none seen
};

struct TwinTargets {
  double agreement = 0.95, hit_points = 2, ttft_p50 = 0.10, ttft_p99 = 0.20;
};

struct TwinComparison {
  int64_t compared = 0, agreed = 0, excluded = 0;  // excluded: in the failure window
  int64_t decode_compared = 0, decode_agreed = 0;
  double hit_sim = 0, hit_live = 0;
  double p50_sim = 0, p50_live = 0, p99_sim = 0, p99_live = 0;
  std::map<std::string, int64_t> rejected_sim, rejected_live;
  double eject_sim = -1, eject_live = -1;
  bool agreement_ok = false, hit_ok = false, p50_ok = false, p99_ok = false;
  bool ok() const { return agreement_ok && hit_ok && p50_ok && p99_ok; }
  std::string Table(const TwinTargets& t) const;
  std::string Json() const;
};

TwinComparison CompareTwins(const TwinDescription& d, const std::vector<sim::TraceRecord>& records,
                            const TwinSide& sim, const TwinSide& live, const TwinTargets& targets = {});

// The two runs. The simulated one is deterministic; the live one runs in real time for the
// workload's span / speed.
absl::StatusOr<TwinSide> RunSimTwin(const TwinDescription& d, const std::string& trace_path,
                                    const std::vector<sim::TraceRecord>& records, std::string* scenario_out);
absl::StatusOr<TwinSide> RunLiveTwin(const TwinDescription& d, const std::vector<sim::TraceRecord>& records);

}  // namespace myriad::cli
