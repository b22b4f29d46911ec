#include "net/vllm_metrics.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <string>

namespace myriad::net {

std::string_view PrometheusLabelValue(std::string_view labels, std::string_view name) {
  size_t at = 0;
  while ((at = labels.find(name, at)) != std::string_view::npos) {
    const bool starts = at == 0 || labels[at - 1] == '{' || labels[at - 1] == ',' || labels[at - 1] == ' ';
    const size_t eq = at + name.size();
    if (starts && eq + 1 < labels.size() && labels[eq] == '=' && labels[eq + 1] == '"') {
      const size_t close = labels.find('"', eq + 2);
      if (close == std::string_view::npos) return {};
      return labels.substr(eq + 2, close - eq - 2);
    }
    at = eq;
  }
  return {};
}

namespace {

enum class Field { kNone, kRunning, kWaiting, kKvUsage, kGenerated, kPreemptions, kFinished, kStepSum, kStepCount };

Field FieldOf(std::string_view name) {
  if (name == "vllm:num_requests_running" || name == "sglang:num_running_reqs") return Field::kRunning;
  if (name == "vllm:num_requests_waiting" || name == "sglang:num_queue_reqs") return Field::kWaiting;
  if (name == "vllm:kv_cache_usage_perc" || name == "vllm:gpu_cache_usage_perc" || name == "sglang:token_usage") {
    return Field::kKvUsage;
  }
  if (name == "vllm:generation_tokens_total" || name == "sglang:generation_tokens_total") return Field::kGenerated;
  if (name == "vllm:num_preemptions_total") return Field::kPreemptions;
  if (name == "vllm:request_success_total") return Field::kFinished;
  // vLLM V1's name, then V0's for the same histogram.
  if (name == "vllm:inter_token_latency_seconds_sum" || name == "vllm:time_per_output_token_seconds_sum") {
    return Field::kStepSum;
  }
  if (name == "vllm:inter_token_latency_seconds_count" || name == "vllm:time_per_output_token_seconds_count") {
    return Field::kStepCount;
  }
  return Field::kNone;
}

}  // namespace

void ForEachPrometheusSample(std::string_view text,
                             const std::function<void(std::string_view, std::string_view, double)>& f) {
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    const std::string_view line = text.substr(pos, end - pos);
    pos = end + 1;
    if (line.empty() || line[0] == '#') continue;
    const size_t name_end = line.find_first_of("{ ");
    if (name_end == std::string_view::npos) continue;
    // The value follows the labels, which may hold spaces inside quotes.
    size_t value_at = name_end;
    std::string_view labels;
    if (line[name_end] == '{') {
      const size_t close = line.rfind('}');
      if (close == std::string_view::npos) continue;
      value_at = close + 1;
      labels = line.substr(name_end, close + 1 - name_end);
    }
    const std::string value(line.substr(value_at));
    const size_t first = value.find_first_not_of(' ');
    if (first == std::string::npos) continue;
    char* stop = nullptr;
    const double v = std::strtod(value.c_str() + first, &stop);
    if (stop == value.c_str() + first || !std::isfinite(v)) continue;
    f(line.substr(0, name_end), labels, v);
  }
}

VllmScrape ParseVllmMetrics(std::string_view text) {
  VllmScrape out;
  ForEachPrometheusSample(text, [&out](std::string_view name, std::string_view labels, double v) {
    const Field field = FieldOf(name);
    if (field == Field::kNone) return;
    out.any = true;
    VllmScrape::Rank* rank = nullptr;
    const std::string_view engine = PrometheusLabelValue(labels, "engine");
    size_t r = 0;
    const auto parsed = std::from_chars(engine.data(), engine.data() + engine.size(), r);
    if (!engine.empty() && parsed.ec == std::errc() && parsed.ptr == engine.data() + engine.size() &&
        r < kMaxScrapedRanks) {
      if (out.ranks.size() <= r) out.ranks.resize(r + 1);
      rank = &out.ranks[r];
    }
    switch (field) {
      case Field::kRunning:
        out.running += v;
        if (rank) rank->running += v;
        break;
      case Field::kWaiting:
        out.waiting += v;
        if (rank) rank->waiting += v;
        break;
      case Field::kKvUsage:
        out.kv_usage = std::max(out.kv_usage, v);
        if (rank) rank->kv_usage = std::max(rank->kv_usage, v);
        break;
      case Field::kGenerated:
        out.generation_tokens += v;
        if (rank) rank->generation_tokens += v;
        break;
      case Field::kPreemptions: out.preemptions += v; break;
      case Field::kFinished: out.finished += v; break;
      case Field::kStepSum:
        if (rank) rank->step_seconds_sum += v;
        break;
      case Field::kStepCount:
        if (rank) rank->step_count += v;
        break;
      case Field::kNone: break;
    }
  });
  return out;
}

}  // namespace myriad::net
