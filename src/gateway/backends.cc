#include "gateway/backends.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <string>

namespace myriad::gateway {

policy::UnitLoad Backend::Load() const {
  policy::UnitLoad l;
  l.queued_prefill_tokens = queued_prefill_tokens;
  // The engine's own count covers other gateways' requests; ours covers what it has not
  // reported yet. The larger is the better guess of both.
  l.running = static_cast<int32_t>(std::max<double>(static_cast<double>(inflight), running));
  l.waiting = static_cast<int32_t>(waiting);
  l.kv_usage = kv_usage;
  l.available = available();
  return l;
}

ScrapedLoad ParseEngineMetrics(std::string_view text) {
  ScrapedLoad out;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(pos, end - pos);
    pos = end + 1;
    if (line.empty() || line[0] == '#') continue;
    const size_t name_end = line.find_first_of("{ ");
    if (name_end == std::string_view::npos) continue;
    const std::string_view name = line.substr(0, name_end);
    double* target = nullptr;
    if (name == "vllm:num_requests_running" || name == "sglang:num_running_reqs") target = &out.running;
    else if (name == "vllm:num_requests_waiting" || name == "sglang:num_queue_reqs") target = &out.waiting;
    else if (name == "vllm:kv_cache_usage_perc" || name == "vllm:gpu_cache_usage_perc" ||
             name == "sglang:token_usage") target = &out.kv_usage;
    if (!target) continue;
    // The value follows the labels (which may contain spaces inside quotes).
    size_t value_at = name_end;
    if (line[name_end] == '{') {
      const size_t close = line.rfind('}');
      if (close == std::string_view::npos) continue;
      value_at = close + 1;
    }
    std::string value(line.substr(value_at));
    const size_t first = value.find_first_not_of(' ');
    if (first == std::string::npos) continue;
    char* stop = nullptr;
    const double v = std::strtod(value.c_str() + first, &stop);
    if (stop == value.c_str() + first || !std::isfinite(v)) continue;
    if (target == &out.kv_usage) {
      *target = std::max(*target, v);  // per engine: the fullest one bounds admission
    } else {
      *target += v;
    }
    out.any = true;
  }
  return out;
}

bool RecordOutcome(Backend& b, bool ok, int eject_after_errors) {
  b.requests++;
  if (ok) {
    b.consecutive_errors = 0;
    return false;
  }
  b.failures++;
  b.consecutive_errors++;
  if (!b.ejected && eject_after_errors > 0 && b.consecutive_errors >= eject_after_errors) {
    b.ejected = true;
    b.consecutive_health_ok = 0;
    return true;
  }
  return false;
}

std::string_view RecordHealth(Backend& b, bool ok, const GatewayConfig& config) {
  if (ok) {
    b.consecutive_health_ok++;
    if (!b.healthy) {
      b.healthy = true;
      b.consecutive_errors = 0;
      return "healthy";
    }
    if (b.ejected && b.consecutive_health_ok >= config.readmit_after_successes) {
      b.ejected = false;
      b.consecutive_errors = 0;
      return "readmitted";
    }
    return "";
  }
  b.consecutive_health_ok = 0;
  b.consecutive_errors++;
  if (b.healthy && b.consecutive_errors >= std::max(1, std::min(config.eject_after_errors, 2))) {
    // Two failed checks in a row (or fewer when errors eject sooner) mark it down.
    b.healthy = false;
    return "unhealthy";
  }
  return "";
}

}  // namespace myriad::gateway
