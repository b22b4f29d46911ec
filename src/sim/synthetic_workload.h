#pragma once
// A synthetic workload with the features that matter to a KV-cache-aware cluster: bursty and
// diurnal arrivals, heavy-tailed lengths, shared system prompts (Zipf popularity) and
// multi-turn sessions whose turns extend the previous turn's context. Prompts are sequences of
// segments, never token ids, so generating millions of requests stays cheap.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/time.h"
#include "sim/workload.h"

namespace myriad::sim {

// Lognormal with this mean and coefficient of variation (cv 0 = constant), clamped to
// [min, max] and rounded to whole tokens.
struct LengthDist {
  double mean = 1000;
  double cv = 1.0;
  int32_t min = 1;
  int32_t max = 131072;
};

struct SyntheticOptions {
  // Mean rate of new arrivals (single requests plus first turns of sessions), requests/s.
  // Follow-up turns of sessions come on top, so the total rate is higher.
  double rate = 10.0;
  std::string arrival = "poisson";  // or "gamma": renewal process with gaps of cv burst_cv
  double burst_cv = 1.0;            // gamma only; > 1 is burstier than Poisson
  // Rate at time t is rate * (1 + amplitude * sin(2*pi*(t / period + phase))), applied by
  // time-rescaling so a gamma process stays gamma in rescaled time.
  double diurnal_amplitude = 0.0;  // 0..1
  Nanos diurnal_period = 24 * kHour;
  double diurnal_phase = 0.0;  // fraction of a period
  // A burst on top of the wave (an extra stream of new arrivals, Poisson): from burst_start the
  // rate rises linearly over burst_ramp by (burst_factor - 1) x rate, holds for burst_duration,
  // and falls back over burst_ramp. Where the wave is at its mean, factor 3 triples the rate.
  double burst_factor = 1;  // 1..100; 1: none
  Nanos burst_start = 0;
  Nanos burst_duration = 0;
  Nanos burst_ramp = 0;

  // Whole prompt of a new arrival, system prompt included (a prompt drawn shorter than its
  // system prompt is lengthened to the system prompt plus input.min).
  LengthDist input{4000, 1.0, 16, 131072};
  LengthDist output{800, 1.0, 1, 32768};

  // Per tenant, `system_prompts` distinct prompts, picked by Zipf(system_prompt_zipf) rank;
  // each prompt's length is fixed at creation, uniform in [0.5, 1.5] x system_prompt_tokens.
  int system_prompts = 100;
  double system_prompt_zipf = 1.1;
  int system_prompt_tokens = 1500;
  double system_prompt_fraction = 0.5;  // share of new arrivals that start with one

  // A session's turn k prompt is turn k-1's prompt + turn k-1's output + a new user message
  // of turn_tokens tokens. Turns are geometric with mean turns_mean; the next turn arrives an
  // exponential think time after the previous turn's arrival (the generator cannot see
  // completions). A session ends early when its next prompt would exceed input.max.
  double session_fraction = 0.3;  // share of new arrivals that start a session
  double turns_mean = 4.0;
  Nanos think_time_mean = 30 * kSecond;
  LengthDist turn_tokens{400, 1.0, 1, 16384};

  int block_tokens = 256;  // the simulator's KV block size
  Nanos duration = 0;      // no arrivals at or after it; 0 = endless (the caller stops pulling)
  uint64_t seed = 1;
  int tenants = 1;
  std::vector<double> tenant_weights;  // share of new arrivals per tenant; empty = equal
};

// The first rule `options` breaks (nullopt: none), fields named by their scenario key path;
// includes the bounds: lengths up to kMaxTokens, and at most kMaxSimulatedRequests expected
// over `duration`.
std::optional<FieldError> CheckSyntheticOptions(const SyntheticOptions& options);

// Validates `options` (errors name the field) and returns a deterministic generator: the same
// options give the same requests, byte for byte.
absl::StatusOr<std::unique_ptr<Workload>> MakeSyntheticWorkload(SyntheticOptions options);

}  // namespace myriad::sim
