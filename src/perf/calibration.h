#pragma once
// The reference configurations the step model is calibrated against, as functions so that
// tests, benchmarks and `myriad perf` print the same figures.
#include "absl/status/statusor.h"
#include "perf/step_model.h"

namespace myriad::perf {

// DeepSeek-V3 prefill unit: 4 nodes of 8 H800, DP32/EP32, 32 redundant experts. A step carries
// per DP rank 4 sequences of 2,048 uncached tokens behind 2,941 cached ones (4,989 tokens in
// all, DeepSeek's average KV length). Returns uncached input tokens per second per node.
absl::StatusOr<double> DeepSeekPrefillTokensPerNode(const Calibration& cal = {});

// DeepSeek-V3 decode unit: 18 nodes of 8 H800, DP144/EP144, 32 redundant experts, 128
// sequences per GPU at 4,989 tokens of KV each. Returns output tokens per second per node.
absl::StatusOr<double> DeepSeekDecodeTokensPerNode(const Calibration& cal = {});

}  // namespace myriad::perf
