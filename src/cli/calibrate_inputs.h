#pragma once
// Reads benchmark results for `myriad calibrate` into step-model samples (perf/calibration_fit.h):
// vLLM's benchmarks/benchmark_serving.py --save-result (with --save-detailed, for the per-request
// lists) and benchmarks/benchmark_latency.py --output-json. Errors name the file and the field
// (or, for a JSON syntax error, the line), and Vidur's per-operator profile of a layer's linear
// operators (mlp.csv: n_embd, n_expanded_embd, n_head, n_kv_head, num_tokens,
// num_tensor_parallel_workers, use_gated_mlp, time_stats.<op>.median in ms); a file that does not
// start with '{' or '[' is read as that CSV, its errors naming the line and the column.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "perf/calibration_fit.h"

namespace myriad::cli {

// Bounds on what a file may hold (docs/calibration.md).
inline constexpr int64_t kMaxCalibrationTokens = 10'000'000;     // input or output tokens of a request
inline constexpr int64_t kMaxCalibrationConcurrency = 65'536;   // concurrency or batch size
inline constexpr int64_t kMaxCalibrationRequests = 1'000'000;   // requests in one file

// benchmark_latency's run shape: its JSON does not record it (they are its command-line
// arguments), so it comes from the file's own keys batch_size, input_len and output_len if a user
// added them, else from these.
struct LatencyShape {
  std::optional<int64_t> batch_size, input_len, output_len;
};

struct BenchmarkFile {
  std::string path;
  std::string format;  // "benchmark_serving", "benchmark_latency" or "vidur_mlp_csv"
  std::vector<perf::FitSample> samples;
  int skipped_failed = 0;  // benchmark_serving requests that failed (no first token)
};

absl::StatusOr<BenchmarkFile> ReadBenchmarkFile(const std::string& path, const LatencyShape& shape);
absl::StatusOr<BenchmarkFile> ParseBenchmarkJson(const std::string& text, const std::string& path,
                                                 const LatencyShape& shape);

}  // namespace myriad::cli
