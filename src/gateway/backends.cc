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

// A decode engine's KV capacity in tokens as far as the gateway knows it (configured, or a paged
// pool the engine reported); 0: unknown.
int64_t DecodeCapacity(const BackendConfig& c, const policy::EngineCacheCapacity& probed) {
  if (c.cache_slots == 0 && c.cache_tokens > 0) return c.cache_tokens;
  return probed.kind == policy::EngineCacheKind::kPaged ? probed.tokens : 0;
}

}  // namespace

policy::UnitLoad Backend::Load() const {
  const policy::UnitLoad l = LoadOf(inflight, queued_prefill_tokens, running, waiting, kv_usage, available());
  return config.role == BackendRole::kDecode
             ? policy::DecodeLoad(decode_charge, DecodeCapacity(config, cache_capacity), l)
             : l;
}

policy::UnitLoad Backend::RankLoad(size_t rank) const {
  const RankState& r = ranks[rank];
  const policy::UnitLoad l = LoadOf(r.inflight, r.queued_prefill_tokens, r.running, r.waiting, r.kv_usage, available());
  return config.role == BackendRole::kDecode ? policy::DecodeLoad(r.decode_charge, DecodeCapacity(config, cache_capacity), l)
                                             : l;
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

void Backend::ChargeDecode(int rank, int sign, int64_t tokens) {
  decode_charge.Apply(sign, tokens);
  if (rank >= 0 && static_cast<size_t>(rank) < ranks.size()) {
    ranks[static_cast<size_t>(rank)].decode_charge.Apply(sign, tokens);
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
