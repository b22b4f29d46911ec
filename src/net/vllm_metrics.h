#pragma once
// Reading an engine's Prometheus exposition by vLLM's metric names (the older names too, and
// SGLang's where it has one): what a controller needs to judge an engine's health, summed over
// its label sets and kept per DP rank (vLLM's `engine` label). Unknown and malformed lines are
// skipped: an exposition is another process's output, not our input to reject.
#include <cstddef>
#include <functional>
#include <string_view>
#include <vector>

namespace myriad::net {

// A DP rank label beyond this is not a rank (vLLM numbers them 0..dp-1).
inline constexpr size_t kMaxScrapedRanks = 4096;

struct VllmScrape {
  bool any = false;  // at least one known sample
  double running = 0, waiting = 0;
  double kv_usage = 0;  // the fullest rank's
  double generation_tokens = 0, preemptions = 0;
  // Requests finished (vllm:request_success_total, every finished_reason): with the change in
  // running + waiting between two scrapes, the requests the engine was offered.
  double finished = 0;
  struct Rank {
    double running = 0, waiting = 0, generation_tokens = 0;
    double kv_usage = 0;
    // The inter-token latency histogram's _sum and _count: between two scrapes their deltas
    // give the rank's mean decode step time.
    double step_seconds_sum = 0, step_count = 0;
  };
  std::vector<Rank> ranks;  // by the `engine` label, when it is a number
};
VllmScrape ParseVllmMetrics(std::string_view exposition);

// Calls `f(name, labels, value)` for each sample line of a Prometheus text exposition (labels
// with their braces, "" when none); comments, malformed lines and non-finite values skipped.
void ForEachPrometheusSample(std::string_view exposition,
                             const std::function<void(std::string_view, std::string_view, double)>& f);

// The value of label `name` in a sample's label set ("{a=\"x\",b=\"y\"}"), or "".
std::string_view PrometheusLabelValue(std::string_view labels, std::string_view name);

}  // namespace myriad::net
