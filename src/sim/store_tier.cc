#include "sim/store_tier.h"

#include <fmt/format.h>

#include <algorithm>

#include "core/rng.h"
#include "policy/store_load.h"

namespace myriad::sim {
namespace {

// Repair copies the master may hand out per tick; its byte-rate cap binds long before this.
constexpr size_t kMaxRepairTasksPerTick = 4096;

kvstore::KvMasterOptions MasterOptions(const StoreConfig& c, uint64_t seed) {
  kvstore::KvMasterOptions o;
  o.dead_after = c.detection;
  o.repair_bytes_per_second = c.repair_gbps * 1e9 / 8;
  // The tier plans repairs once a tick (at most a second): a burst below a second of the rate
  // would cap the rate at the burst per tick instead.
  o.repair_burst_bytes = std::max(o.repair_burst_bytes, static_cast<uint64_t>(2 * o.repair_bytes_per_second));
  o.seed = seed;
  // Every node joins at time zero: no ramp-up to wait for.
  o.ramp = 0;
  return o;
}

}  // namespace

StoreTier::StoreTier(const StoreConfig& config, EventQueue& events, const perf::TransferModel& transfer, int racks,
                     uint64_t block_bytes, uint64_t seed)
    : config_(config),
      events_(events),
      transfer_(transfer),
      block_bytes_(block_bytes),
      master_(MasterOptions(config, Rng(seed).Fork(0x73746f7265).Next())) {  // "store"
  ns_ = *master_.CreateNamespace("sim");
  const int domains = std::max(1, config.fault_domains);
  const auto capacity = static_cast<uint64_t>(config.capacity_gb * 1e9);
  for (int i = 0; i < config.nodes; ++i) {
    Node n;
    n.domain = i % domains;
    n.rack = racks > 0 ? n.domain * racks / domains : 0;
    nodes_.push_back(n);
    // Ids and bounds were checked with the scenario (store_config.cc): this cannot fail.
    (void)master_.AddNode(static_cast<kvstore::NodeId>(i), fmt::format("domain{}", n.domain), capacity, 0);
  }
  // Ticks often enough that a silent node is noticed within a tick of `detection`.
  tick_ = std::clamp<Nanos>(config.detection / 2, kMillisecond, kSecond);
}

void StoreTier::Start(Nanos horizon) {
  horizon_ = horizon;
  for (const StoreNodeLoss& l : config_.node_loss) {
    events_.At(l.at, [this, node = l.node] { KillNode(node); });
  }
  ScheduleTick();
}

void StoreTier::ScheduleTick() {
  if (events_.now() + tick_ > horizon_) return;
  events_.After(tick_, [this] {
    Tick();
    ScheduleTick();
  });
}

double StoreTier::LinkRate(bool crosses_spine) const {
  double rate = config_.node_gbps * 1e9 / 8 * transfer_.nic_efficiency;
  if (crosses_spine) rate /= std::max(1.0, transfer_.spine_oversubscription);
  return rate;
}

Nanos StoreTier::Occupy(Node& node, double bytes, bool crosses_spine) {
  const Nanos start = std::max(events_.now(), node.link_free);
  node.link_free = start + SecondsToNanos(bytes / LinkRate(crosses_spine));
  return node.link_free;
}

void StoreTier::Offload(int rack, std::span<const BlockKey> blocks) {
  std::vector<Write> writes;
  Nanos done = events_.now();
  const Nanos now = events_.now();
  for (const BlockKey key : blocks) {
    ++stats_.offered_blocks;
    if (writing_.contains(key) || master_.Exists(ns_, key)) {
      ++stats_.already_stored;
      continue;
    }
    // A full store refuses without asking for a placement (and an error message) per block.
    const kvstore::NodeRegistry& reg = master_.nodes();
    if (reg.total_used() + block_bytes_ * static_cast<uint64_t>(config_.replicas) > reg.total_capacity()) {
      ++stats_.no_room;
      continue;
    }
    const kvstore::PutRequest put{.keys = &key, .blocks = 1, .size = block_bytes_, .replicas = config_.replicas};
    absl::StatusOr<kvstore::ReplicaList> placed = master_.PutStart(ns_, put, now);
    if (!placed.ok()) {
      ++stats_.no_room;
      continue;
    }
    for (uint8_t r = 0; r < placed->count; ++r) {
      Node& n = nodes_[placed->nodes[r]];
      done = std::max(done, Occupy(n, static_cast<double>(block_bytes_), n.rack != rack));
    }
    writing_.insert(key);
    writes.push_back({key, *placed});
    stats_.offload_bytes += static_cast<double>(block_bytes_) * placed->count;
  }
  if (writes.empty()) return;
  // One event per eviction batch: its blocks become readable together, when the last is written.
  events_.At(done + transfer_.setup_latency, [this, w = std::move(writes)] { FinishWrites(w); });
}

void StoreTier::FinishWrites(const std::vector<Write>& writes) {
  for (const Write& w : writes) {
    writing_.erase(w.key);
    bool lost = false;
    for (uint8_t r = 0; r < w.replicas.count; ++r) lost |= nodes_[w.replicas.nodes[r]].dead;
    // A node that died mid-write leaves a put the writer cannot finish; if the master has
    // noticed already it revoked the put itself, and both calls just find nothing.
    if (lost) {
      (void)master_.PutRevoke(ns_, w.key);
      ++stats_.revoked_writes;
    } else if (master_.PutEnd(ns_, w.key).ok()) {
      ++stats_.stored_blocks;
    }
  }
}

size_t StoreTier::Covered(std::span<const BlockKey> blocks) const {
  size_t n = 0;
  while (n < blocks.size() && master_.Exists(ns_, blocks[n])) ++n;
  return n;
}

policy::StorePath StoreTier::PathFor(int tp) const {
  return {.bytes_per_s = std::max(tp, 1) * transfer_.fabric.nic_bytes_per_s() * transfer_.nic_efficiency,
          .latency = transfer_.setup_latency};
}

StoreTier::LoadPlan StoreTier::PlanLoad(std::span<const BlockKey> blocks, size_t have, int tp,
                                        const Prefill& prefill) const {
  LoadPlan plan;
  if (have >= blocks.size()) return plan;
  plan.held = Covered(blocks.subspan(have));
  const policy::StoreLoad decision = policy::DecideStoreLoad(
      prefill.cost, PathFor(tp),
      {.input_tokens = prefill.input_tokens, .hbm_blocks = static_cast<int64_t>(have),
       .store_blocks = static_cast<int64_t>(plan.held), .block_tokens = prefill.block_tokens,
       .block_bytes = static_cast<double>(block_bytes_)});
  plan.take = static_cast<size_t>(decision.load_blocks);
  return plan;
}

StoreTier::Load StoreTier::LoadBack(std::span<const BlockKey> blocks, size_t have, int rack, int tp,
                                    const Prefill& prefill) {
  const Nanos now = events_.now();
  Load out{0, now};
  if (have >= blocks.size()) return out;
  ++stats_.probed_requests;
  stats_.probed_blocks += static_cast<int64_t>(blocks.size() - have);
  const auto [held, take] = PlanLoad(blocks, have, tp, prefill);
  if (take < held) {
    ++stats_.declined_requests;
    stats_.declined_blocks += static_cast<int64_t>(held - take);
  }
  Nanos links_done = now;
  for (size_t i = have; i < have + take; ++i) {
    const kvstore::GetResult g = master_.Get(ns_, blocks[i], now);
    if (g.code != absl::StatusCode::kOk) break;
    // The live replica whose link frees first; none: the master has not noticed the death yet.
    Node* from = nullptr;
    for (uint8_t r = 0; r < g.replicas.count; ++r) {
      Node& n = nodes_[g.replicas.nodes[r]];
      if (!n.dead && (from == nullptr || n.link_free < from->link_free)) from = &n;
    }
    if (from == nullptr) {
      ++stats_.dead_reads;
      break;
    }
    links_done = std::max(links_done, Occupy(*from, static_cast<double>(g.size), from->rack != rack));
    ++out.blocks;
  }
  const int64_t missed = static_cast<int64_t>(blocks.size() - have - out.blocks);
  (losses_.empty() ? stats_.missed_blocks_before_loss : stats_.missed_blocks_after_loss) += missed;
  if (out.blocks == 0) return out;
  ++stats_.hit_requests;
  stats_.loaded_blocks += static_cast<int64_t>(out.blocks);
  const double bytes = static_cast<double>(out.blocks * block_bytes_);
  stats_.load_bytes += bytes;
  // The unit's side: the KV is split over its TP ranks, each receiving on its own NIC.
  const Nanos gpu_side = transfer_.Time(bytes / std::max(tp, 1), perf::LinkKind::kNic, true);
  out.ready_at = std::max(links_done + transfer_.setup_latency, now + gpu_side);
  return out;
}

void StoreTier::KillNode(int node) {
  Node& n = nodes_[static_cast<size_t>(node)];
  if (n.dead) return;
  n.dead = true;
  losses_.push_back({node, events_.now()});
  if (losses_.size() == 1 && on_first_loss_) on_first_loss_();
}

void StoreTier::Tick() {
  const Nanos now = events_.now();
  // Live nodes heartbeat; a dead one falls silent and the master declares it dead in time.
  for (size_t i = 0; i < nodes_.size(); ++i) {
    if (!nodes_[i].dead) (void)master_.Heartbeat(static_cast<kvstore::NodeId>(i), now);
  }
  const kvstore::TickReport report = master_.Tick(now);
  if (report.nodes_declared_dead > 0) {
    for (NodeLoss& l : losses_) {
      if (l.detected < 0 && master_.nodes().Find(static_cast<kvstore::NodeId>(l.node)) == nullptr) l.detected = now;
    }
  }
  for (const kvstore::RepairTask& t : master_.PlanRepairs(now, kMaxRepairTasksPerTick)) StartRepair(t);
  stats_.log_bytes += master_.TakeLog().size();
}

void StoreTier::StartRepair(const kvstore::RepairTask& task) {
  ++stats_.repairs;
  stats_.repair_bytes += static_cast<double>(task.bytes);
  Node& src = nodes_[task.source];
  Node& dst = nodes_[task.destination];
  const bool cross = src.rack != dst.rack;
  // Both ends' links carry the copy: it starts when both are free.
  const Nanos start = std::max({events_.now(), src.link_free, dst.link_free});
  const Nanos done = start + transfer_.setup_latency +
                     SecondsToNanos(static_cast<double>(task.bytes) / LinkRate(cross));
  src.link_free = dst.link_free = done;
  events_.At(done, [this, task] {
    const bool ok = !nodes_[task.source].dead && !nodes_[task.destination].dead;
    // The master may have dropped the destination's replica already (declared dead): then
    // either call finds no repair in progress, which is the same outcome.
    const absl::Status st = ok ? master_.RepairDone(task) : master_.RepairFailed(task);
    if (ok && st.ok()) {
      ++stats_.repairs_done;
    } else {
      ++stats_.repairs_failed;
    }
    stats_.last_repair_end = events_.now();
  });
}

nlohmann::ordered_json StoreTier::Report(Nanos end, int block_tokens) const {
  using nlohmann::ordered_json;
  const kvstore::KvMasterStats m = master_.stats();
  const kvstore::NodeRegistry& reg = master_.nodes();
  auto ratio = [](double a, double b) { return b > 0 ? a / b : 0.0; };
  ordered_json losses = ordered_json::array();
  for (const NodeLoss& l : losses_) {
    losses.push_back({{"node", l.node},
                      {"domain", nodes_[static_cast<size_t>(l.node)].domain},
                      {"at_s", NanosToSeconds(l.at)},
                      {"detected_s", l.detected >= 0 ? ordered_json(NanosToSeconds(l.detected)) : ordered_json()}});
  }
  const Nanos first_loss = losses_.empty() ? -1 : losses_.front().at;
  const double before_s = NanosToSeconds(first_loss >= 0 ? first_loss : end);
  const double after_s = first_loss >= 0 ? NanosToSeconds(end - first_loss) : 0.0;
  ordered_json j;
  j["nodes"] = config_.nodes;
  j["replicas"] = config_.replicas;
  j["fault_domains"] = config_.fault_domains;
  j["capacity_gigabytes"] = static_cast<double>(reg.total_capacity()) / 1e9;
  j["used_gigabytes_at_end"] = static_cast<double>(reg.total_used()) / 1e9;
  j["offload"] = {{"blocks_offered", stats_.offered_blocks}, {"blocks_stored", stats_.stored_blocks},
                  {"already_stored", stats_.already_stored}, {"refused_no_room", stats_.no_room},
                  {"revoked_writes", stats_.revoked_writes}, {"gigabytes", stats_.offload_bytes / 1e9}};
  j["load_back"] = {{"requests_probed", stats_.probed_requests}, {"requests_hit", stats_.hit_requests},
                    {"blocks_probed", stats_.probed_blocks}, {"blocks_loaded", stats_.loaded_blocks},
                    {"hit_rate", ratio(static_cast<double>(stats_.loaded_blocks), static_cast<double>(stats_.probed_blocks))},
                    {"reads_of_dead_replicas", stats_.dead_reads}, {"gigabytes", stats_.load_bytes / 1e9},
                    {"requests_recomputed_cheaper", stats_.declined_requests},
                    {"blocks_recomputed_cheaper", stats_.declined_blocks}};
  j["objects"] = {{"at_end", m.objects}, {"evicted", m.objects_evicted}, {"lost", m.objects_lost}};
  // Prompt tokens past the units' HBM prefixes that the store did not supply: recomputed.
  const double tokens_before = static_cast<double>(stats_.missed_blocks_before_loss * block_tokens);
  const double tokens_after = static_cast<double>(stats_.missed_blocks_after_loss * block_tokens);
  j["recompute_tokens_per_s"] = {
      {"before_first_loss", ratio(tokens_before, before_s)},
      {"after_first_loss", first_loss >= 0 ? ordered_json(ratio(tokens_after, after_s)) : ordered_json()}};
  j["node_losses"] = losses;
  const bool repaired = stats_.last_repair_end >= 0 && first_loss >= 0;
  j["repair"] = {{"copies", stats_.repairs}, {"done", stats_.repairs_done}, {"failed", stats_.repairs_failed},
                 {"gigabytes", stats_.repair_bytes / 1e9},
                 // From the first loss to the last copy's end.
                 {"time_s", repaired ? ordered_json(NanosToSeconds(stats_.last_repair_end - first_loss)) : ordered_json()},
                 // The master's queue counts entries that turned stale (object gone since).
                 {"queued_or_in_flight_at_end", m.repair_queue + m.repairs_in_flight}};
  // Not the master's memory_bytes(): it counts hash-table capacity, which after erasures
  // depends on absl's per-process hash seed, and the report must be the same bytes every run.
  j["metadata"] = {{"log_megabytes", static_cast<double>(stats_.log_bytes) / 1e6}};
  return j;
}

}  // namespace myriad::sim
