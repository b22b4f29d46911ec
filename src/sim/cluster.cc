#include "sim/cluster.h"

#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <memory>

#include "perf/hardware.h"
#include "perf/model.h"
#include "policy/eplb.h"
#include "policy/slo.h"
#include "policy/tenant_fill.h"
#include "sim/moe_placement.h"

namespace myriad::sim {

Cluster::Cluster(const Scenario& s, std::unique_ptr<Workload> workload)
    : scenario_(s),
      workload_(std::move(workload)),
      rng_(Rng(s.seed).Fork(0x726f75746572)),  // "router"
      metrics_(s.slo.ttft, s.slo.tpot,
               s.tenants.size() > 1 || (s.workload.type == "synthetic" && s.workload.synthetic.tenants > 1)),
      topology_(s.hardware.nodes, s.hardware.gpus_per_node, s.hardware.nodes_per_rack) {}

absl::StatusOr<std::unique_ptr<Cluster>> Cluster::Create(const Scenario& scenario,
                                                         std::unique_ptr<Workload> workload) {
  std::unique_ptr<Cluster> c(new Cluster(scenario, std::move(workload)));
  if (absl::Status st = c->Build(); !st.ok()) return st;
  return c;
}

absl::Status Cluster::Build() {
  auto gpu = perf::FindGpu(scenario_.hardware.gpu);
  if (!gpu.ok()) return gpu.status();
  auto model = perf::FindModel(scenario_.model);
  if (!model.ok()) return model.status();
  const RouterConfig& rc = scenario_.router;
  policy::RouterOptions base;
  base.ttft_slo = scenario_.slo.ttft;
  base.reject_factor = rc.reject_factor;
  base.disagg_min_uncached = rc.disagg_min_uncached;
  base.hot_queue_seconds = rc.hot_queue_seconds;
  base.block_tokens = scenario_.kv_block_tokens;
  base.fetch_bytes_per_s = NicFetchBytesPerS(scenario_);
  auto parsed = policy::ParsePolicyName(rc.policy, base);
  if (!parsed.ok()) return parsed.status();
  policy_name_ = policy::FormatPolicyName(parsed->options, parsed->fair);
  const bool prefix_aware = parsed->options.policy == policy::RoutingPolicy::kPrefixOnly ||
                            parsed->options.policy == policy::RoutingPolicy::kKvAware;
  if (prefix_aware) {
    index_ = std::make_unique<policy::PrefixIndex>(policy::PrefixIndexOptions{
        .max_entries = static_cast<size_t>(rc.index_max_entries), .index_every = 1, .provisional_ttl = rc.provisional_ttl});
    bus_ = std::make_unique<CacheEventBus>(events_, *index_, rc.event_delay, rc.event_loss,
                                           Rng(scenario_.seed).Fork(0x6576656e7473),  // "events"
                                           rc.event_replay);
  }
  router_ = std::make_unique<policy::Router>(parsed->options, index_.get());
  tenants_ = std::make_unique<policy::TenantPolicy>(
      scenario_.tenants, policy::TenantOptions{.fairness = parsed->fair, .contention = rc.contention});
  for (const policy::TenantConfig& t : scenario_.tenants) fill_tenant_.push_back(policy::IsFill(t.priority));
  // Fill admission's decode signal, kept only where a fill tenant reads it.
  if (std::find(fill_tenant_.begin(), fill_tenant_.end(), true) != fill_tenant_.end()) {
    decode_pressure_ = std::make_unique<policy::DecodePressure>(scenario_.slo.tpot);
  }
  const perf::Fabric fabric{.gpus_per_node = scenario_.hardware.gpus_per_node,
                            .nic_gbps = scenario_.hardware.nic_gbps};
  transfer_.gpu = *gpu;
  transfer_.fabric = fabric;
  transfer_.spine_oversubscription = scenario_.hardware.spine_oversubscription;

  for (size_t p = 0; p < scenario_.pools.size(); ++p) {
    const PoolConfig& pool = scenario_.pools[p];
    auto pool_gpu = perf::FindGpu(scenario_.PoolGpu(p));
    if (!pool_gpu.ok()) return pool_gpu.status();
    auto step = perf::StepModel::Create(*pool_gpu, *model, pool.layout, fabric, scenario_.calibration);
    if (!step.ok()) {
      return absl::InvalidArgumentError(
          fmt::format("pools[{}] ({}): {}", p, pool.name, std::string(step.status().message())));
    }
    pool_models_.push_back(std::make_unique<perf::StepModel>(std::move(*step)));
    pool_costs_.emplace_back(*pool_models_.back(), pool.max_batch_tokens);
    if (rc.learn_cost) pool_learned_.push_back(std::make_unique<policy::BackendCostModel>(pool_costs_.back()));
    auto moe = BuildMoe(p);
    if (!moe.ok()) return moe.status();
    pool_moe_.push_back(std::move(*moe));
    for (int i = 0; i < pool.count; ++i) {
      auto place = topology_.Place(pool.layout.gpus(), pool.layout.nodes);
      if (!place.ok()) {
        return absl::InvalidArgumentError(fmt::format("pools[{}] ({}) unit {}: {}", p, pool.name, i,
                                                      std::string(place.status().message())));
      }
      const int id = static_cast<int>(units_.size());
      UnitConfig cfg{.id = id,
                     .pool = static_cast<int>(p),
                     .role = pool.role,
                     .max_batch_tokens_per_rank = pool.max_batch_tokens,
                     .max_seqs_per_rank = pool.max_seqs,
                     .block_tokens = scenario_.kv_block_tokens,
                     .moe = pool_moe_.back().get()};
      units_.push_back(std::make_unique<Unit>(cfg, *pool_models_.back(), events_, table_, *this));
      placements_.push_back(*place);
      nic_free_.emplace_back(static_cast<size_t>(pool.layout.dp), 0);
      nic_next_.push_back(0);
      if (pool.role == Role::kDecode) decode_units_.push_back(id);
      else entry_units_.push_back(id);
      max_prompt_tokens_ = std::max(max_prompt_tokens_, units_.back()->kv_capacity());
    }
  }
  if (scenario_.store.enabled) {
    if (absl::Status st = BuildStore(); !st.ok()) return st;
    // kv-aware routing prices loading from the store as the gateway prices an engine's store
    // tier (policy/tier_pricing.h), each unit over its own path.
    for (const PoolConfig& pool : scenario_.pools) pool_store_paths_.push_back(store_->PathFor(pool.layout.tp));
    router_->UseSharedStore(store_.get());
  }
  FillCandidates();
  if (scenario_.elastic.enabled) {
    elastic_ = std::make_unique<ElasticDriver>(scenario_, events_, units_, metrics_, scenario_.elastic.act);
    elastic_->Init();
    if (scenario_.elastic.rollout.enabled) BuildRollout();
  }
  if (scenario_.faults.enabled) {
    if (absl::Status st = BuildFailures(); !st.ok()) return st;
  }
  admission_ = std::make_unique<policy::AdmissionPipeline>(router_.get(), tenants_.get(), index_.get(), limiter_.get());
  if (entry_units_.empty()) {
    return absl::InvalidArgumentError("pools: no prefill or colocated pool to receive requests");
  }
  bool has_prefill = false;
  for (const auto& p : scenario_.pools) has_prefill |= p.role == Role::kPrefill && p.count > 0;
  if (has_prefill && decode_units_.empty()) {
    return absl::InvalidArgumentError("pools: a prefill pool needs a decode pool to hand off to");
  }
  return absl::OkStatus();
}

void Cluster::ScheduleNextArrival() {
  std::optional<Request> next = workload_->Next();
  if (!next || next->arrival >= scenario_.duration) {
    arrivals_done_ = true;
    return;
  }
  const Nanos at = next->arrival;
  // One arrival is pending at a time: it waits here, and the queue's stream (whose action
  // takes it) holds its turn.
  pending_arrival_ = std::move(*next);
  events_.ScheduleStream(at);
}

void Cluster::OnArrival(Request r) {
  const Nanos now = events_.now();
  if (limiter_ && !(rollout_ && rollout_->split())) {
    // Admit will read the chosen unit's cache for this prompt: when the router's choice is
    // known already, start those reads now, behind the next arrival's generation.
    if (const int e = router_->LikelyEntry(); e >= 0) {
      units_[static_cast<size_t>(entry_units_[static_cast<size_t>(e)])]->PrefetchCachedPrefix(r.blocks);
    }
  }
  metrics_.OnArrival(now, r);
  ScheduleNextArrival();
  if (int64_t{r.input_tokens} + r.output_tokens > max_prompt_tokens_) {
    metrics_.OnReject(now, r, "exceeds_kv_capacity");
    return;
  }
  Admit(table_.Add(std::move(r)), false);
}

void Cluster::Reject(uint32_t slot, const std::string& reason) {
  // Output already streamed before a failure counts as produced, not as lost silently.
  metrics_.unfinished_output_tokens += table_[slot].generated;
  metrics_.OnReject(events_.now(), table_[slot].req, reason);
  table_.Release(slot);
}

int Cluster::UnitOf(const policy::RouteDecision& d) const {
  return d.entry < 0 ? decode_units_[decode_off_ + static_cast<size_t>(d.decode)]
                     : entry_units_[entry_off_ + static_cast<size_t>(d.entry)];
}

std::string_view Cluster::Refuses(const policy::AdmissionRequest& req, const policy::RouteDecision& d) {
  const Unit& u = *units_[static_cast<size_t>(UnitOf(d))];
  const PoolConfig& pool = scenario_.pools[static_cast<size_t>(u.config().pool)];
  if (pool.max_waiting > 0 && u.Load().waiting >= pool.max_waiting) return "queue_full";
  if (req.input_tokens + req.output_tokens > u.kv_capacity()) return "exceeds_kv_capacity";
  return {};
}

int64_t Cluster::CachedTokens(const policy::AdmissionRequest& req, const policy::RouteDecision& d) {
  // What the chosen unit holds plus what the store tier can load back into it.
  return static_cast<int64_t>(CachedBlocks(*units_[static_cast<size_t>(UnitOf(d))], req.blocks, req.input_tokens)) *
         scenario_.kv_block_tokens;
}

void Cluster::Admit(uint32_t slot, bool retry) {
  const ReqState& st = table_[slot];
  const Request& r = st.req;
  for (auto& m : pool_learned_) m->Age(events_.now());  // a pool left unchosen is tried again
  // The rollout's split picks the version; the request routes among that version's units.
  const auto [entry, decode] = UseGroup(rollout_ && rollout_->PicksCanary(r.id));
  const policy::Admission a = admission_->Admit(
      policy::AdmissionRequest{.blocks = r.blocks,
                               .input_tokens = int64_t{r.input_tokens} + st.generated,
                               .output_tokens = r.output_tokens - st.generated,
                               .tenant = r.tenant,
                               .tenant_tokens = int64_t{r.input_tokens} + r.output_tokens,
                               .decode_load = decode_pressure_ ? decode_pressure_->Load(events_.now()) : 0,
                               .now = events_.now(),
                               .retry = retry},
      entry, decode, rng_, this);
  // The reason string is built only on rejection, never on the admission path.
  if (!a.admitted()) return Reject(slot, a.ReasonText());
  const policy::RouteDecision& d = a.route;
  table_[slot].fill = r.tenant < fill_tenant_.size() && fill_tenant_[r.tenant];
  table_[slot].expected_cached = static_cast<int32_t>(std::clamp<int64_t>(d.expected_cached_tokens, 0, std::numeric_limits<int32_t>::max()));
  if (d.hot_spot) ++hot_spots_;
  if (d.entry < 0) ++prefill_on_decode_;
  if (!pool_learned_.empty()) {
    const policy::Candidate& c =
        d.entry >= 0 ? entry[static_cast<size_t>(d.entry)] : decode[static_cast<size_t>(d.decode)];
    if (cost_pending_.size() <= slot) cost_pending_.resize(table_.capacity());
    const int64_t input = int64_t{r.input_tokens} + st.generated;
    cost_pending_[slot] = PendingCost{policy::DispatchSample(d, c, input), events_.now(), UnitOf(d)};
  }
  const int copy_from = d.fetch_from >= 0 ? entry_units_[entry_off_ + static_cast<size_t>(d.fetch_from)] : -1;
  const int64_t copy_blocks = d.fetch_from >= 0 ? static_cast<int64_t>(d.expected_cached_tokens / scenario_.kv_block_tokens) : 0;
  Dispatch(slot, UnitOf(d), copy_from, copy_blocks);
}

void Cluster::ReleaseDecodeCharge(ReqState& r) {
  if (!r.decode_charged) return;
  r.decode_charged = false;
  units_[static_cast<size_t>(r.decode_unit)]->ChargeDecode(-1, int64_t{r.req.input_tokens} + r.req.output_tokens);
}

void Cluster::Retry(uint32_t slot) {
  ReqState& r = table_[slot];
  ReleaseDecodeCharge(r);
  ++retries_;
  ++r.epoch;
  r.decoding = false;
  r.kv_held = false;
  r.kv_reserved = 0;
  r.prefill_unit = r.decode_unit = -1;
  if (r.retries >= scenario_.faults.max_retries) return Reject(slot, "failed_after_retries");
  ++r.retries;
  retried_context_tokens_ += int64_t{r.req.input_tokens} + r.generated;
  Admit(slot, true);
}

void Cluster::EvacuateUnit(int unit) {
  evacuees_.clear();
  offload_paused_ = true;
  lost_kv_tokens_ += units_[static_cast<size_t>(unit)]->Evacuate(&evacuees_);
  offload_paused_ = false;
  evacuated_ += static_cast<int64_t>(evacuees_.size());
  // Retrying may route more work; take a copy of the list first.
  const std::vector<uint32_t> slots = evacuees_;
  for (uint32_t slot : slots) Retry(slot);
}

void Cluster::Dispatch(uint32_t slot, int unit, int copy_from, int64_t copy_blocks) {
  if (failures_ && failures_->RefusesWork(unit)) return Retry(slot);
  Unit& target = *units_[static_cast<size_t>(unit)];
  if (copy_from < 0 || copy_blocks <= 0) {
    if (!LoadFromStore(slot, unit)) target.EnqueuePrefill(slot);
    return;
  }
  // The index is a hint: copy what the source really holds beyond what the target has.
  const std::span<const BlockKey> blocks = table_[slot].req.blocks;
  const std::span<const BlockKey> wanted = blocks.first(std::min<size_t>(blocks.size(), static_cast<size_t>(copy_blocks)));
  const size_t have = target.CachedPrefix(wanted);
  const size_t there = units_[static_cast<size_t>(copy_from)]->CachedPrefix(wanted);
  if (there <= have) {
    if (!LoadFromStore(slot, unit)) target.EnqueuePrefill(slot);
    return;
  }
  const auto src = static_cast<size_t>(copy_from), dst = static_cast<size_t>(unit);
  const double bytes = static_cast<double>(there - have) * scenario_.kv_block_tokens * target.model().KvBytesPerToken();
  const Nanos duration = transfer_.Time(bytes / target.model().layout().tp, topology_.Link(placements_[src], placements_[dst]),
                                        topology_.CrossesSpine(placements_[src], placements_[dst]));
  ++kv_fetches_;
  kv_fetch_bytes_ += bytes;
  events_.After(duration, [this, slot, unit, there] {
    Unit& t = *units_[static_cast<size_t>(unit)];
    if (!t.routable()) return Retry(slot);
    t.AddToCache(std::span<const BlockKey>(table_[slot].req.blocks).first(there));
    t.EnqueuePrefill(slot);
  });
}

void Cluster::OnCacheStored(int unit, uint32_t first_position, std::span<const BlockKey> blocks) {
  if (bus_) bus_->Stored(unit, first_position, blocks);
}

void Cluster::OnCacheRemoved(int unit, std::span<const BlockKey> blocks) {
  if (bus_) bus_->Removed(unit, blocks);
  if (store_ && !offload_paused_) store_->Offload(placements_[static_cast<size_t>(unit)].rack, blocks);
}

void Cluster::ObserveFirstToken(int unit, uint32_t slot) {
  if (slot >= cost_pending_.size() || cost_pending_[slot].unit != unit) return;
  PendingCost& p = cost_pending_[slot];
  p.unit = -1;  // once per admission: a recompute after preemption is no first token
  p.sample.seconds = NanosToSeconds(events_.now() - p.start);
  pool_learned_[static_cast<size_t>(units_[static_cast<size_t>(unit)]->config().pool)]->Observe(p.sample, events_.now());
}

void Cluster::OnPrefillToken(int unit, uint32_t slot) { ObserveFirstToken(unit, slot); }

void Cluster::OnPrefillDone(int unit, uint32_t slot) {
  ObserveFirstToken(unit, slot);
  ReqState& r = table_[slot];
  if (failures_ && failures_->corrupt(unit)) r.corrupt = true;
  const Nanos delay = scenario_.router.handoff_delay;
  if (delay > 0) {
    // The proxy's second exchange (RouterConfig::handoff_delay): the decode unit is picked
    // when it ends, from the loads of that moment, as the gateway picks it. The KV stays on the
    // prefill unit meanwhile; a unit that died meanwhile has none to send.
    events_.After(delay, [this, unit, slot, epoch = r.epoch, inc = units_[static_cast<size_t>(unit)]->incarnation()] {
      const ReqState& s = table_[slot];
      if (!s.live || s.epoch != epoch) return;
      if (units_[static_cast<size_t>(unit)]->incarnation() != inc) {
        ++failed_transfers_;
        return Retry(slot);
      }
      HandOff(unit, slot);
    });
    return;
  }
  HandOff(unit, slot);
}

void Cluster::HandOff(int unit, uint32_t slot) {
  ReqState& r = table_[slot];
  // The KV goes to a decode unit of the version that computed it.
  const auto decode = UseGroup(rollout_ && rollout_->canary(unit)).second;
  const int pick = router_->PickDecode(decode, rng_);
  const int target = pick < 0 ? -1 : decode_units_[decode_off_ + static_cast<size_t>(pick)];
  const int64_t kv_tokens = r.kv_reserved;
  if (target < 0) {
    units_[static_cast<size_t>(unit)]->ReleaseKv(kv_tokens);
    if (rollout_) rollout_->OnError(unit);
    metrics_.OnReject(events_.now(), r.req, "no_decode_unit");
    table_.Release(slot);
    return;
  }
  // The sequence's KV sits on one DP rank of each side; each rank has its own NIC, busy with
  // one transfer at a time.
  const auto src = static_cast<size_t>(unit), dst = static_cast<size_t>(target);
  const perf::StepModel& m = units_[src]->model();
  const double bytes = static_cast<double>(kv_tokens) * m.KvBytesPerToken();
  const perf::LinkKind link = topology_.Link(placements_[src], placements_[dst]);
  Nanos duration = transfer_.Time(bytes / m.layout().tp, link,
                                  topology_.CrossesSpine(placements_[src], placements_[dst]));
  Nanos start = events_.now();
  Nanos* src_nic = nullptr;
  Nanos* dst_nic = nullptr;
  if (link == perf::LinkKind::kNic) {
    src_nic = &nic_free_[src][nic_next_[src]++ % nic_free_[src].size()];
    dst_nic = &nic_free_[dst][nic_next_[dst]++ % nic_free_[dst].size()];
    start = std::max({start, *src_nic, *dst_nic});
    *src_nic = *dst_nic = start + duration;
  }
  const Nanos done = start + duration;
  ++transfers_;
  transfer_bytes_ += bytes;
  transfer_s_.Add(NanosToSeconds(done - events_.now()));
  // The unit ids and the KV size live in the request's own state, so the event carries only
  // the slot (small enough for std::function's inline storage).
  r.prefill_unit = unit;
  r.decode_unit = target;
  r.src_incarnation = units_[src]->incarnation();
  r.decode_charged = true;
  units_[dst]->ChargeDecode(+1, int64_t{r.req.input_tokens} + r.req.output_tokens);
  events_.At(done, [this, slot] {
    ReqState& s = table_[slot];
    Unit& from = *units_[static_cast<size_t>(s.prefill_unit)];
    Unit& to = *units_[static_cast<size_t>(s.decode_unit)];
    // A source that died meanwhile sent nothing usable (and its KV accounting was reset).
    const bool sent = from.incarnation() == s.src_incarnation;
    if (sent) from.ReleaseKv(s.kv_reserved);
    if (!sent || !to.routable() || (failures_ && failures_->RefusesWork(s.decode_unit))) {
      ++failed_transfers_;
      return Retry(slot);
    }
    to.EnqueueDecode(slot);
  });
}

void Cluster::OnRequestDone(int unit, uint32_t slot) {
  if (failures_ && failures_->corrupt(unit)) table_[slot].corrupt = true;
  ReleaseDecodeCharge(table_[slot]);
  const uint64_t good = metrics_.good;
  metrics_.OnComplete(events_.now(), table_[slot]);
  if (decode_pressure_) {
    const ReqState& r = table_[slot];
    decode_pressure_->Observe(events_.now(), policy::TimePerOutputToken(events_.now() - r.first_token, r.req.output_tokens));
  }
  if (rollout_) rollout_->OnComplete(unit, metrics_.good > good);
  table_.Release(slot);
}

void Cluster::Every(Nanos interval, std::function<void()> act) {
  recurring_.push_back({interval, std::move(act)});
  const size_t i = recurring_.size() - 1;
  events_.After(interval, [this, i] { RunRecurring(i); });
}

void Cluster::RunRecurring(size_t i) {
  recurring_[i].act();
  // Each run schedules the next, up to the end of the run.
  if (events_.now() + recurring_[i].interval <= scenario_.duration + scenario_.drain) {
    events_.After(recurring_[i].interval, [this, i] { RunRecurring(i); });
  }
}

void Cluster::Run(const ProgressFn& progress) {
  events_.SetStreamAction([this] { OnArrival(std::move(pending_arrival_)); });
  ScheduleNextArrival();
  const Nanos horizon = scenario_.duration + scenario_.drain;
  for (auto& d : moe_dynamics_) {
    MoeDynamics* dp = d.get();
    const MoeConfig& cfg = scenario_.pools[dp->pool].moe;
    if (cfg.drift_interval > 0) Every(cfg.drift_interval, [this, dp] { DriftExperts(*dp); });
    if (dp->rebalancer) Every(cfg.rebalance_interval, [this, dp] { RebalanceExperts(*dp); });
  }
  if (failures_) failures_->Start(horizon);
  if (store_) store_->Start(horizon);
  if (elastic_) elastic_->Start(horizon);
  if (rollout_) rollout_->Start(horizon);
  const Nanos tick = std::max<Nanos>(horizon / 200, kSecond);
  for (Nanos until = tick;; until += tick) {
    if (sampler_) RunSampledUntil(std::min(until, horizon));
    else events_.RunUntil(std::min(until, horizon));
    if (progress) progress(std::min(1.0, static_cast<double>(until) / static_cast<double>(horizon)));
    const bool drained = arrivals_done_ && table_.live() == 0;
    if (drained || until >= horizon || events_.pending() == 0) break;
  }
  if (progress) progress(1.0);  // a run that drained early still completes its bar
  FinishRun();
}

void Cluster::FinishRun() {
  end_ = std::max(events_.now(), scenario_.duration);
  // Whatever is still in flight is reported with a reason, not dropped.
  for (uint32_t slot = 0; slot < table_.capacity() && table_.live() > 0; ++slot) {
    ReqState& r = table_[slot];
    if (!r.live) continue;
    if (r.decoding) r.generated = units_[static_cast<size_t>(r.decode_unit)]->Generated(r);
    metrics_.OnUnfinished(end_, r);
    table_.Release(slot);
  }
  if (sampler_) sampler_->Close(end_, ReadGauges());
}

namespace {

nlohmann::ordered_json SummaryJson(const Distribution& d) {
  const Summary s = d.Summarize();
  return {{"count", s.count}, {"mean", s.mean}, {"p50", s.p50}, {"p90", s.p90},
          {"p99", s.p99},     {"max", s.max}};
}

double Ratio(double a, double b) { return b > 0 ? a / b : 0.0; }

}  // namespace

nlohmann::ordered_json Cluster::RouterReport() const {
  nlohmann::ordered_json j = {{"policy", policy_name_},
                              {"hot_spots_spread", hot_spots_},
                              {"kv_fetches", kv_fetches_},
                              {"kv_fetch_gigabytes", kv_fetch_bytes_ / 1e9},
                              {"prefill_on_decode_unit", prefill_on_decode_}};
  if (!pool_learned_.empty()) {
    nlohmann::ordered_json learned = nlohmann::ordered_json::array();
    for (size_t p = 0; p < pool_learned_.size(); ++p) {
      const policy::BackendCostModel& m = *pool_learned_[p];
      auto terms = [](const policy::CostCoefficients& c) {
        return nlohmann::ordered_json{{"fixed_s", c.fixed_s}, {"per_uncached_token_s", c.per_uncached_s},
                                      {"per_cached_token_s", c.per_cached_s}, {"per_queued_token_s", c.per_queued_s}};
      };
      nlohmann::ordered_json pool = {{"pool", scenario_.pools[p].name}, {"samples", m.samples()},
                                     {"clipped", m.clipped()}};
      pool.update(terms(m.coefficients()));
      pool["prior"] = terms(m.prior());
      learned.push_back(std::move(pool));
    }
    j["learned_cost"] = std::move(learned);
  }
  if (index_) {
    const CacheEventStats& e = bus_->stats();
    j["index"] = {{"entries", index_->entries()},
                  {"blocks", index_->blocks()},
                  {"memory_mib", static_cast<double>(index_->memory_bytes()) / (1 << 20)}};
    j["events"] = {{"batches", e.batches}, {"lost", e.lost}, {"gaps_seen", e.gaps_seen},
                   {"replayed", e.replayed}, {"unrecoverable_gaps", e.unrecoverable},
                   {"blocks_stored", e.blocks_stored}, {"blocks_removed", e.blocks_removed}};
  }
  return j;
}

nlohmann::ordered_json Cluster::Report() const {
  using nlohmann::ordered_json;
  const RequestMetrics& m = metrics_;
  const double span_s = NanosToSeconds(end_);
  const double window_s = NanosToSeconds(scenario_.duration);
  // Rates and utilisations are over the measured span: from the first arrival to the last
  // completion, or to the end of the run when requests were still in flight then (the units
  // worked until it). Not the arrival window: completions in the drain would inflate them.
  const auto cut = m.rejected.find("unfinished_at_end");
  const Nanos measured_from = std::max<Nanos>(m.first_arrival, 0);
  const Nanos measured_to = cut != m.rejected.end() && cut->second > 0 ? end_
                            : std::max(m.last_completion, measured_from);
  const double measured_s = NanosToSeconds(measured_to - measured_from);
  const double gpus = scenario_.hardware.gpus();
  double gpu_hours = gpus * span_s / 3600.0;
  double dollars = gpu_hours * scenario_.gpu_hour_price;
  if (scenario_.PerPoolAccounting()) {
    // Each pool's units as allocated, at the pool's own price; GPUs in no unit are not held.
    gpu_hours = dollars = 0;
    for (size_t p = 0; p < scenario_.pools.size(); ++p) {
      const double h = elastic_ ? elastic_->PoolGpuHours(p, end_)
                                : static_cast<double>(scenario_.pools[p].count) * scenario_.pools[p].layout.gpus() * span_s / 3600.0;
      gpu_hours += h;
      dollars += h * scenario_.PoolPrice(p);
    }
  }
  const double good_tokens = static_cast<double>(m.good_input_tokens + m.good_output_tokens);

  ordered_json rejected = ordered_json::object();
  uint64_t rejected_total = 0;
  for (const auto& [reason, n] : m.rejected) {
    rejected[reason] = n;
    rejected_total += n;
  }

  int64_t prefilled = 0, recomputed = 0, decoded = 0, preemptions = 0;
  ordered_json pools = ordered_json::array();
  for (size_t p = 0; p < scenario_.pools.size(); ++p) {
    const PoolConfig& pool = scenario_.pools[p];
    Distribution stepping;
    double batch_sum = 0, steps = 0;
    int64_t pool_preempt = 0, kv_in_use = 0;
    // Capacity used against capacity held, over the measured span: seats, KV, FLOPs, bytes.
    double seq_s = 0, seat_s = 0, kv_s = 0, kv_cap_s = 0, flops = 0, peak_flops = 0, bytes = 0, peak_bytes = 0;
    for (const auto& u : units_) {
      if (u->config().pool != static_cast<int>(p)) continue;
      kv_in_use += u->kv_used();
      const UnitStats& st = u->stats();
      const perf::StepModel& model = u->model();
      const double gpu_s = model.layout().gpus() * measured_s;
      stepping.Add(Ratio(NanosToSeconds(st.busy), measured_s));
      seq_s += st.seq_seconds;
      seat_s += static_cast<double>(u->config().max_seqs_per_rank) * model.layout().dp * measured_s;
      kv_s += u->KvTokenSeconds(end_);
      kv_cap_s += static_cast<double>(model.KvCapacityTokens()) * measured_s;
      flops += st.flops;
      peak_flops += u->work_model().peak_flops_per_gpu() * gpu_s;
      bytes += st.hbm_bytes;
      peak_bytes += u->work_model().peak_hbm_bytes_per_gpu() * gpu_s;
      batch_sum += st.batch_seq_sum;
      steps += static_cast<double>(st.steps);
      prefilled += st.prefill_tokens;
      recomputed += st.recompute_tokens;
      decoded += st.decode_tokens;
      pool_preempt += st.preemptions;
    }
    preemptions += pool_preempt;
    // The straggler view: each rank's own compute as a fraction of the steps it was live for,
    // against the mean over the pool's ranks (time a rank was dead, or its unit down, is not
    // idleness: it would inflate the ratio).
    double rank_max = 0, rank_sum = 0, rank_n = 0;
    for (const auto& u : units_) {
      if (u->config().pool != static_cast<int>(p)) continue;
      const auto& busy = u->stats().rank_busy_s;
      const auto& live = u->stats().rank_live_s;
      for (size_t r = 0; r < busy.size() && r < live.size(); ++r) {
        if (live[r] <= 0) continue;
        const double f = busy[r] / live[r];
        rank_max = std::max(rank_max, f);
        rank_sum += f;
        rank_n += 1;
      }
    }
    const Summary us = stepping.Summarize();
    pools.push_back({{"name", pool.name},
                     {"role", RoleName(pool.role)},
                     {"units", pool.count},
                     {"gpus_per_unit", pool.layout.gpus()},
                     {"kv_capacity_tokens_per_unit", pool_models_[p]->KvCapacityTokens()},
                     {"stepping_fraction", {{"mean", us.mean}, {"min", us.min}, {"max", us.max}}},
                     {"batch_occupancy", Ratio(seq_s, seat_s)},
                     {"kv_in_use_fraction", Ratio(kv_s, kv_cap_s)},
                     {"model_flops_utilisation", Ratio(flops, peak_flops)},
                     {"hbm_bandwidth_utilisation", Ratio(bytes, peak_bytes)},
                     {"mean_decode_batch_per_gpu", Ratio(batch_sum, steps * pool.layout.gpus())},
                     {"steps", steps},
                     {"preemptions", pool_preempt},
                     // KV still reserved when the run ended: 0 once every request has left.
                     {"kv_tokens_in_use_at_end", kv_in_use}});
    if (!pool.gpu.empty()) pools.back()["gpu"] = pool.gpu;
    if (pool_moe_[p]) {
      nlohmann::ordered_json dyn = nullptr;
      for (const auto& d : moe_dynamics_) {
        if (d->pool != p || !(pool.moe.drift_interval > 0 || d->rebalancer)) continue;
        dyn = {{"drifts", d->drifts}, {"rebalances", d->rebalances}, {"moved_expert_slots", d->moved_slots},
               {"moved_gigabytes", d->moved_bytes / 1e9}, {"pause_s", NanosToSeconds(d->pause)}};
        if (d->rebalancer) {
          dyn["rebalance_mode"] = pool.moe.rebalance_mode;
          dyn["mean_imbalance_after_rebalance"] = Ratio(d->imbalance_after_sum, static_cast<double>(d->rebalances));
          dyn["mean_imbalance_of_fresh_eplb"] = Ratio(d->imbalance_fresh_sum, static_cast<double>(d->rebalances));
        }
      }
      pools.back()["moe"] = {{"placement", pool.moe.placement},
                             {"dynamics", dyn},
                             {"expert_skew", pool.moe.expert_skew},
                             {"expert_imbalance", pool_moe_[p]->load().mean_imbalance()},
                             {"two_batch_overlap", pool.moe.two_batch_overlap},
                             {"dp_padding", pool.moe.dp_padding},
                             {"rank_busy_max_over_mean", Ratio(rank_max, rank_n > 0 ? rank_sum / rank_n : 0)}};
    }
  }

  ordered_json j;
  j["scenario"] = {{"name", scenario_.name},
                   {"seed", scenario_.seed},
                   {"model", scenario_.model},
                   {"gpu", scenario_.hardware.gpu},
                   {"gpus", scenario_.hardware.gpus()},
                   {"gpus_in_units", topology_.used_gpus()},
                   {"router", policy_name_},
                   {"duration_s", window_s},
                   {"end_s", span_s},
                   {"measured_from_s", NanosToSeconds(measured_from)},
                   {"measured_to_s", NanosToSeconds(measured_to)},
                   {"measured_span_s", measured_s},
                   {"slo", {{"ttft_s", NanosToSeconds(scenario_.slo.ttft)},
                            {"tpot_s", NanosToSeconds(scenario_.slo.tpot)}}}};
  j["requests"] = {{"arrived", m.arrived},
                   {"completed", m.completed},
                   {"rejected", rejected_total},
                   {"rejected_by_reason", rejected},
                   {"within_slo", m.good},
                   {"slo_attainment", Ratio(static_cast<double>(m.good), static_cast<double>(m.arrived))},
                   {"preempted", m.preempted_requests}};
  j["latency_s"] = {{"ttft", SummaryJson(m.ttft_s)}, {"tpot", SummaryJson(m.tpot_s)},
                    {"e2e", SummaryJson(m.e2e_s)}};
  j["tokens"] = {{"arrived_input", m.arrived_input_tokens},
                 {"arrived_output", m.arrived_output_tokens},
                 {"completed_input", m.input_tokens},
                 {"completed_output", m.output_tokens},
                 {"rejected_input", m.rejected_input_tokens},
                 {"rejected_output", m.rejected_output_tokens},
                 {"unfinished_output_produced", m.unfinished_output_tokens},
                 {"prefix_cached", m.cached_tokens},
                 {"prefix_hit_rate", Ratio(static_cast<double>(m.cached_tokens), static_cast<double>(m.input_tokens))},
                 {"prefill_computed", prefilled},
                 {"recomputed_after_preemption", recomputed},
                 {"decoded", decoded},
                 {"preemptions", preemptions}};
  j["throughput"] = {{"input_tokens_per_s", Ratio(static_cast<double>(m.input_tokens), measured_s)},
                     {"output_tokens_per_s", Ratio(static_cast<double>(m.output_tokens), measured_s)},
                     {"requests_per_s", Ratio(static_cast<double>(m.completed), measured_s)},
                     {"goodput_tokens_per_s", Ratio(good_tokens, measured_s)},
                     {"goodput_output_tokens_per_s", Ratio(static_cast<double>(m.good_output_tokens), measured_s)}};
  j["cost"] = {{"gpu_hour_price", scenario_.gpu_hour_price},
               {"gpu_hours", gpu_hours},
               {"dollars", dollars},
               {"per_million_tokens_within_slo", Ratio(dollars, good_tokens / 1e6)},
               {"per_million_output_tokens_within_slo",
                Ratio(dollars, static_cast<double>(m.good_output_tokens) / 1e6)}};
  j["pools"] = pools;
  j["kv_transfer"] = {{"count", transfers_}, {"gigabytes", transfer_bytes_ / 1e9},
                      {"time_s", SummaryJson(transfer_s_)}};
  // Little's law: the time-average number in the system (from arrival and departure events)
  // against arrival rate times mean time in system (from each request's own timestamps).
  const double w = Ratio(m.e2e_s.sum(), static_cast<double>(m.completed));
  const double lambda_done = Ratio(static_cast<double>(m.completed), span_s);
  j["littles_law"] = {{"mean_in_system", m.in_system.Average(end_)},
                      {"completion_rate_per_s", lambda_done},
                      {"mean_time_in_system_s", w},
                      {"lambda_times_w", lambda_done * w}};
  j["router"] = RouterReport();
  j["tenants"] = metrics_.TenantReport(scenario_.tenants);
  if (failures_) {
    j["failures"] = FailureReport();
    j["requests"]["corrupted"] = m.corrupted;
  }
  if (store_) j["store"] = StoreReport();
  if (elastic_) j["elastic"] = elastic_->Report(end_);
  if (rollout_) j["elastic"]["rollout"] = rollout_->Report();
  j["simulator"] = {{"events", events_.executed()}, {"peak_requests_in_flight", table_.capacity()}};
  return j;
}

}  // namespace myriad::sim
