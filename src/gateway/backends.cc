#include "gateway/backends.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <string>

namespace myriad::gateway {

namespace {

// The engine's own count covers other gateways' requests; ours covers what it has not
// reported yet. The larger is the better guess of both.
policy::UnitLoad LoadOf(int64_t inflight, int64_t queued, double running, double waiting, double kv_usage,
                        bool available) {
  policy::UnitLoad l;
  l.queued_prefill_tokens = queued;
  l.running = static_cast<int32_t>(std::max<double>(static_cast<double>(inflight), running));
  l.waiting = static_cast<int32_t>(waiting);
  l.kv_usage = kv_usage;
  l.available = available;
  return l;
}

}  // namespace

policy::UnitLoad Backend::Load() const {
  return LoadOf(inflight, queued_prefill_tokens, running, waiting, kv_usage, available());
}

policy::UnitLoad Backend::RankLoad(size_t rank) const {
  const RankState& r = ranks[rank];
  return LoadOf(r.inflight, r.queued_prefill_tokens, r.running, r.waiting, r.kv_usage, available());
}


std::vector<policy::HolderId> Backend::Holders() const {
  if (ranks.empty()) return {holder};
  std::vector<policy::HolderId> out;
  for (const RankState& r : ranks) out.push_back(r.holder);
  return out;
}

void Backend::Charge(int rank, int64_t requests, int64_t prefill_tokens) {
  auto apply = [&](int64_t& inflight_count, int64_t& queued) {
    inflight_count = std::max<int64_t>(0, inflight_count + requests);
    queued = std::max<int64_t>(0, queued + prefill_tokens);
  };
  apply(inflight, queued_prefill_tokens);
  if (rank >= 0 && static_cast<size_t>(rank) < ranks.size()) {
    RankState& r = ranks[static_cast<size_t>(rank)];
    apply(r.inflight, r.queued_prefill_tokens);
  }
}

namespace {

// The value of label `name` in a sample's label set, or "".
std::string_view LabelValue(std::string_view labels, std::string_view name) {
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

}  // namespace

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
    std::string_view labels;
    if (line[name_end] == '{') {
      const size_t close = line.rfind('}');
      if (close == std::string_view::npos) continue;
      value_at = close + 1;
      labels = line.substr(name_end, close + 1 - name_end);
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
    const std::string_view engine = LabelValue(labels, "engine");
    size_t rank = 0;
    const auto parsed = std::from_chars(engine.data(), engine.data() + engine.size(), rank);
    if (!engine.empty() && parsed.ec == std::errc() && parsed.ptr == engine.data() + engine.size() && rank < 4096) {
      if (out.by_engine.size() <= rank) out.by_engine.resize(rank + 1);
      ScrapedLoad::Engine& e = out.by_engine[rank];
      double* slot = target == &out.running ? &e.running : target == &out.waiting ? &e.waiting : &e.kv_usage;
      *slot = target == &out.kv_usage ? std::max(*slot, v) : *slot + v;
    }
  }
  return out;
}

bool RecordOutcome(Backend& b, bool ok) {
  b.requests++;
  if (!ok) b.failures++;
  return b.health.RecordRequest(ok) == policy::HealthChange::kEjected;
}

std::string_view RecordHealth(Backend& b, bool ok) { return policy::HealthChangeName(b.health.RecordCheck(ok)); }

}  // namespace myriad::gateway
