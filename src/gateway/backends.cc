#include "gateway/backends.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <string>

#include "net/vllm_metrics.h"

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
  if (ranks.empty()) return {holder, store_holder};
  std::vector<policy::HolderId> out;
  for (const RankState& r : ranks) {
    out.push_back(r.holder);
    out.push_back(r.store_holder);
  }
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

ScrapedLoad ParseEngineMetrics(std::string_view text) {
  // One reader of vLLM's (and SGLang's) names for the gateway and the controller.
  const net::VllmScrape s = net::ParseVllmMetrics(text);
  ScrapedLoad out;
  out.any = s.any;
  out.running = s.running;
  out.waiting = s.waiting;
  out.kv_usage = s.kv_usage;  // per engine: the fullest rank bounds admission
  out.by_engine.resize(s.ranks.size());
  for (size_t r = 0; r < s.ranks.size(); ++r) {
    out.by_engine[r] = ScrapedLoad::Engine{s.ranks[r].running, s.ranks[r].waiting, s.ranks[r].kv_usage};
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
