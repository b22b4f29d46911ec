// The simulator's KV store tier: the store's own metadata core (kvstore::KvMaster) driven by
// simulated store nodes, links and losses; then whole scenarios with and without it.
#include "sim/store_tier.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "perf/hardware.h"
#include "sim/runner.h"
#include "sim/scenario.h"

namespace myriad::sim {
namespace {

constexpr uint64_t kBlockBytes = uint64_t{8} << 20;
constexpr int kBlockTokens = 16;

// A prefill of 1 ms per token: loading 8 MiB blocks over the units' NICs is far cheaper.
const policy::PrefillCost kSlowPrefill = policy::PrefillCost::Linear(0.01, 1e-3, 0, 0, 0);

StoreTier::Prefill Prompt(size_t blocks, const policy::PrefillCost& cost = kSlowPrefill) {
  return {.cost = cost, .input_tokens = static_cast<int64_t>(blocks) * kBlockTokens + 1, .block_tokens = kBlockTokens};
}

struct World {
  EventQueue events;
  perf::TransferModel transfer;
  StoreTier tier;

  static perf::TransferModel Transfer() {
    perf::TransferModel t;
    t.gpu = *perf::FindGpu("H200");
    return t;
  }
  explicit World(const StoreConfig& c) : transfer(Transfer()), tier(c, events, transfer, 4, kBlockBytes, 1) {}
  // The queue's clock moves only with events: one marks the end of the stretch.
  void RunFor(Nanos d) {
    const Nanos end = events.now() + d;
    events.At(end, [] {});
    events.RunUntil(end);
  }
  // Runs the tier's housekeeping every second for `d` (what Start schedules in a cluster).
  void TickFor(Nanos d) {
    for (Nanos end = events.now() + d; events.now() < end;) {
      RunFor(kSecond);
      tier.Tick();
    }
  }
};

StoreConfig Config(int nodes, int domains, int replicas) {
  StoreConfig c;
  c.enabled = true;
  c.nodes = nodes;
  c.fault_domains = domains;
  c.replicas = replicas;
  c.capacity_gb = 100;
  c.detection = 5 * kSecond;
  c.repair_gbps = 100;
  return c;
}

std::vector<BlockKey> Keys(BlockKey first, int n) {
  std::vector<BlockKey> keys;
  for (int i = 0; i < n; ++i) keys.push_back(first + 0x9e3779b97f4a7c15ULL * static_cast<BlockKey>(i + 1));
  return keys;
}

// The nodes holding a replica of `key`, as the master places them (without leasing it).
std::vector<int> Holders(const StoreTier& tier, BlockKey key, int nodes) {
  const kvstore::NamespaceId ns = *tier.master().FindNamespace("sim");
  std::vector<int> out;
  for (int n = 0; n < nodes; ++n) {
    const kvstore::HeldObject o{ns, key};
    std::vector<uint8_t> keep;
    tier.master().HeldBy(static_cast<kvstore::NodeId>(n), std::span<const kvstore::HeldObject>(&o, 1), &keep);
    if (keep[0]) out.push_back(n);
  }
  return out;
}

// Objects whose every replica is on `node`, and those with one replica there among others.
std::pair<int, int> OnNode(const StoreTier& tier, std::span<const BlockKey> keys, int node, int nodes) {
  int only = 0, some = 0;
  for (BlockKey k : keys) {
    const std::vector<int> h = Holders(tier, k, nodes);
    const bool there = std::find(h.begin(), h.end(), node) != h.end();
    only += there && h.size() == 1;
    some += there && h.size() > 1;
  }
  return {only, some};
}

TEST(StoreTier, EvictedBlocksAreReadableOnceWrittenAndLoadBack) {
  World w(Config(4, 4, 1));
  const std::vector<BlockKey> keys = Keys(1, 10);
  w.tier.Offload(0, keys);
  // The write is in flight: nothing to load yet, and offering the blocks again writes nothing.
  EXPECT_EQ(w.tier.LoadBack(keys, 0, 0, 1, Prompt(keys.size())).blocks, 0u);
  w.tier.Offload(0, keys);
  EXPECT_EQ(w.tier.stats().already_stored, 10);
  w.RunFor(kSecond);
  EXPECT_EQ(w.tier.stats().stored_blocks, 10);
  EXPECT_EQ(w.tier.Covered(keys), 10u);
  // A unit holding the first 3 blocks loads the other 7, over the store nodes' links.
  const Nanos now = w.events.now();
  const StoreTier::Load got = w.tier.LoadBack(keys, 3, 1, 2, Prompt(keys.size()));
  EXPECT_EQ(got.blocks, 7u);
  EXPECT_GT(got.ready_at, now);
  EXPECT_EQ(w.tier.stats().loaded_blocks, 7);
  EXPECT_DOUBLE_EQ(w.tier.stats().load_bytes, 7.0 * kBlockBytes);
  // A prompt that diverges after block 5 loads only the shared part.
  std::vector<BlockKey> other(keys.begin(), keys.begin() + 5);
  other.push_back(12345);
  other.push_back(keys[6]);
  EXPECT_EQ(w.tier.LoadBack(other, 0, 1, 2, Prompt(other.size())).blocks, 5u);
}

// A prefill faster than the bytes over the unit's NICs (a microsecond per 16-token block,
// against 8 MiB over one 400 Gb/s NIC): the run is left to recompute, and counted as such.
TEST(StoreTier, RecomputesWhenThatIsCheaperThanLoading) {
  World w(Config(4, 4, 1));
  const std::vector<BlockKey> keys = Keys(1, 10);
  w.tier.Offload(0, keys);
  w.RunFor(kSecond);
  ASSERT_EQ(w.tier.Covered(keys), 10u);
  const policy::PrefillCost fast = policy::PrefillCost::Linear(0, 1e-7, 0, 0, 0);
  const StoreTier::Load got = w.tier.LoadBack(keys, 2, 1, 1, Prompt(keys.size(), fast));
  EXPECT_EQ(got.blocks, 0u);
  EXPECT_EQ(got.ready_at, w.events.now());
  EXPECT_EQ(w.tier.stats().loaded_blocks, 0);
  EXPECT_EQ(w.tier.stats().declined_requests, 1);
  EXPECT_EQ(w.tier.stats().declined_blocks, 8);
  EXPECT_EQ(w.tier.stats().missed_blocks_before_loss, 8);
  // The same run with a slow prefill is loaded.
  EXPECT_EQ(w.tier.LoadBack(keys, 2, 1, 1, Prompt(keys.size())).blocks, 8u);
}

TEST(StoreTier, NodeLossLosesExactlyTheObjectsOnlyOnIt) {
  World w(Config(4, 4, 1));
  const std::vector<BlockKey> keys = Keys(7, 400);
  w.tier.Offload(0, keys);
  w.RunFor(kSecond);
  const auto [only, some] = OnNode(w.tier, keys, 2, 4);
  ASSERT_GT(only, 0);
  EXPECT_EQ(some, 0);
  w.tier.KillNode(2);
  // Until the master notices, reads of its replicas fail and fall back to recompute.
  size_t dead_read = 0;
  for (BlockKey k : keys) {
    if (w.tier.LoadBack(std::span<const BlockKey>(&k, 1), 0, 0, 1, Prompt(1)).blocks == 0) ++dead_read;
  }
  EXPECT_EQ(dead_read, static_cast<size_t>(only));
  EXPECT_EQ(w.tier.stats().dead_reads, only);
  w.TickFor(10 * kSecond);
  EXPECT_EQ(w.tier.master().stats().objects_lost, static_cast<uint64_t>(only));
  EXPECT_EQ(w.tier.master().stats().objects, keys.size() - static_cast<size_t>(only));
  size_t covered = 0;
  for (BlockKey k : keys) covered += w.tier.Covered(std::span<const BlockKey>(&k, 1));
  EXPECT_EQ(covered, keys.size() - static_cast<size_t>(only));
  EXPECT_EQ(w.tier.stats().repairs, 0);
  const auto report = w.tier.Report(w.events.now(), 64);
  EXPECT_EQ(report["objects"]["lost"], only);
  EXPECT_EQ(report["node_losses"].size(), 1u);
  EXPECT_FALSE(report["node_losses"][0]["detected_s"].is_null());
}

TEST(StoreTier, TwoReplicasAcrossDomainsLoseNothingAndAreRepaired) {
  World w(Config(4, 2, 2));
  const std::vector<BlockKey> keys = Keys(3, 300);
  w.tier.Offload(0, keys);
  w.RunFor(kSecond);
  const auto [only, some] = OnNode(w.tier, keys, 1, 4);
  EXPECT_EQ(only, 0);
  ASSERT_GT(some, 0);
  w.tier.KillNode(1);
  w.TickFor(60 * kSecond);
  const kvstore::KvMasterStats m = w.tier.master().stats();
  EXPECT_EQ(m.objects_lost, 0u);
  EXPECT_EQ(m.objects, keys.size());
  // Every object that had a replica on the dead node got a new one, in another domain than
  // its survivor: the repair copied exactly those objects' bytes.
  EXPECT_EQ(w.tier.stats().repairs_done, some);
  EXPECT_DOUBLE_EQ(w.tier.stats().repair_bytes, static_cast<double>(some) * kBlockBytes);
  for (BlockKey k : keys) {
    const std::vector<int> h = Holders(w.tier, k, 4);
    ASSERT_EQ(h.size(), 2u);
    EXPECT_NE(h[0], 1);
    EXPECT_NE(h[1], 1);
    EXPECT_NE(w.tier.node_domain(h[0]), w.tier.node_domain(h[1]));
  }
  // At the repair cap (100 Gb/s) the ~2.4 GB take a fraction of a second once the master has
  // declared the node dead (5 s): the copies are not throttled below the cap.
  const auto report = w.tier.Report(w.events.now(), 64);
  EXPECT_GT(report["repair"]["time_s"].get<double>(), 0);
  EXPECT_LT(report["repair"]["time_s"].get<double>(), 8);
  EXPECT_EQ(report["repair"]["gigabytes"].get<double>(), static_cast<double>(some) * kBlockBytes / 1e9);
}

TEST(StoreTier, FullStoreEvictsByTheMastersPolicy) {
  StoreConfig c = Config(2, 2, 1);
  c.capacity_gb = 0.5;  // about 60 blocks per node
  World w(c);
  const std::vector<BlockKey> keys = Keys(11, 400);
  for (size_t i = 0; i < keys.size(); i += 20) {
    w.tier.Offload(0, std::span<const BlockKey>(keys).subspan(i, 20));
    w.TickFor(kSecond);
  }
  const kvstore::KvMasterStats m = w.tier.master().stats();
  EXPECT_GT(m.objects_evicted, 0u);
  EXPECT_LE(m.objects * kBlockBytes, 2 * 500'000'000u);
  EXPECT_EQ(w.tier.stats().stored_blocks, static_cast<int64_t>(m.objects + m.objects_evicted));
}

// 2 racks of 2 nodes, 8 colocated Llama-3.1-70B units whose HBM prefix caches are far smaller
// than the prompts' distinct prefixes; sessions come back after their prefix was evicted.
std::string ScenarioText(const std::string& store) {
  return R"(
seed: 5
duration: 90s
drain: 5m
hardware: {gpu: H100, nodes: 4, gpus_per_node: 8, nodes_per_rack: 2}
model: Llama-3.1-70B
pools:
  - {name: u, role: colocated, count: 8, layout: {tp: 4, dp: 1, ep: 1}}
workload:
  type: synthetic
  rate: 6
  input: {mean: 6000, cv: 0.5, min: 16, max: 30000}
  output: {mean: 200, cv: 1.0, min: 1, max: 2000}
  system_prompts: {count: 400, zipf: 0.6, tokens: 8000, fraction: 0.9}
  sessions: {fraction: 0.5, turns_mean: 4, think_time: 20s}
router: least-loaded
kv_block_tokens: 256
)" + store;
}

nlohmann::ordered_json Simulate(const std::string& yaml) {
  auto s = ParseScenario(yaml, "store.yaml");
  EXPECT_TRUE(s.ok()) << s.status();
  auto r = RunScenario(*s);
  EXPECT_TRUE(r.ok()) << r.status();
  return *r;
}

TEST(StoreTier, ClusterLoadsEvictedPrefixesBackInsteadOfRecomputing) {
  const auto without = Simulate(ScenarioText(""));
  const auto with = Simulate(ScenarioText("store: {nodes: 4, capacity_gb: 2000, replicas: 1}\n"));
  EXPECT_FALSE(without.contains("store"));
  ASSERT_TRUE(with.contains("store"));
  const auto& st = with["store"];
  EXPECT_GT(st["offload"]["blocks_stored"].get<int64_t>(), 0);
  EXPECT_GT(st["load_back"]["blocks_loaded"].get<int64_t>(), 0);
  EXPECT_GT(st["load_back"]["hit_rate"].get<double>(), 0);
  EXPECT_EQ(with["requests"]["completed"], without["requests"]["completed"]);
  EXPECT_LT(with["tokens"]["prefill_computed"].get<int64_t>(), without["tokens"]["prefill_computed"].get<int64_t>());
  EXPECT_GT(with["tokens"]["prefix_hit_rate"].get<double>(), without["tokens"]["prefix_hit_rate"].get<double>());
}

// The recompute limiter counts what the store supplies as cached: with a store, the same
// limit sheds far fewer arrivals (counting only the units' HBM prefixes, it sheds 43 of 55).
// Since least-loaded takes turns among idle units instead of filling the first one, the store
// saves a little less of the shedding here (27 vs 44 arrivals shed): the bound is two thirds.
TEST(StoreTier, RecomputeLimiterCountsStoreHitsAsCached) {
  const std::string faults = "faults: {rates: none, recompute_limit: 0.5}\n";
  const auto without = Simulate(ScenarioText(faults));
  const auto with = Simulate(ScenarioText(faults + "store: {nodes: 4, capacity_gb: 2000, replicas: 1}\n"));
  const int64_t shed_without = without["failures"]["recompute_limiter"]["shed"].get<int64_t>();
  const int64_t shed_with = with["store"]["recompute_limiter"]["shed"].get<int64_t>();
  EXPECT_GT(shed_without, 0);
  EXPECT_LT(shed_with * 3, shed_without * 2) << shed_with << " vs " << shed_without;
}

// The limiter counts as cached only what the unit will load (policy::DecideStoreLoad, the
// decision LoadBack takes): over NICs too slow for any load to beat recompute, the store
// supplies nothing, and the limiter sheds exactly what it sheds without a store. Counting
// every block the store held as cached, it shed fewer arrivals with the store than without,
// whose prompts were then recomputed in full.
TEST(StoreTier, RecomputeLimiterCountsOnlyWhatTheUnitWillLoad) {
  auto slow_nics = [](std::string yaml) {
    const std::string at = "nodes_per_rack: 2}";
    yaml.replace(yaml.find(at), at.size(), "nodes_per_rack: 2, nic_gbps: 0.1}");
    return yaml;
  };
  const std::string faults = "faults: {rates: none, recompute_limit: 0.5}\n";
  const auto without = Simulate(slow_nics(ScenarioText(faults)));
  const auto with = Simulate(slow_nics(ScenarioText(faults + "store: {nodes: 4, capacity_gb: 2000, replicas: 1}\n")));
  const auto& lb = with["store"]["load_back"];
  EXPECT_EQ(lb["blocks_loaded"].get<int64_t>(), 0);
  EXPECT_GT(lb["blocks_recomputed_cheaper"].get<int64_t>(), 0);
  const int64_t shed_without = without["failures"]["recompute_limiter"]["shed"].get<int64_t>();
  EXPECT_GT(shed_without, 0);
  EXPECT_EQ(with["store"]["recompute_limiter"]["shed"].get<int64_t>(), shed_without);
  EXPECT_EQ(with["requests"]["completed"], without["requests"]["completed"]);
}

TEST(StoreTier, ScenarioWithNodeLossIsDeterministic) {
  const std::string yaml = ScenarioText(R"(faults: {rates: none, recompute_limit: 0.5}
store: {nodes: 4, capacity_gb: 2000, replicas: 2, node_loss: [{at: 45s, node: 1}]}
)");
  const auto a = Simulate(yaml);
  const auto b = Simulate(yaml);
  EXPECT_EQ(a.dump(), b.dump());
  const auto& st = a["store"];
  EXPECT_EQ(st["objects"]["lost"], 0);
  EXPECT_GT(st["repair"]["copies"].get<int64_t>(), 0);
  EXPECT_GT(st["repair"]["gigabytes"].get<double>(), 0);
  EXPECT_TRUE(st["recompute_limiter"]["enabled"].get<bool>());
  EXPECT_FALSE(st["recompute_limiter"]["shed_after_first_loss"].is_null());
}

TEST(StoreTier, ScenarioErrorsNameTheKeyAndBound) {
  auto err = [](const std::string& store) {
    auto s = ParseScenario(ScenarioText(store), "store.yaml");
    EXPECT_FALSE(s.ok());
    return std::string(s.status().message());
  };
  // hardware: 4 nodes of 2 per rack, so 2 racks.
  EXPECT_NE(err("store: {nodes: 4, fault_domains: 3}\n").find("store.fault_domains: must be between 1 and 2"),
            std::string::npos);
  EXPECT_NE(err("store: {nodes: 4, replicas: 3}\n").find("store.replicas: replicas go to distinct fault domains"),
            std::string::npos);
  EXPECT_NE(err("store: {nodes: 5000}\n").find("store.nodes: must be between 1 and 4096"), std::string::npos);
  EXPECT_NE(err("store: {capacity_gb: 0}\n").find("store.capacity_gb: must be positive and at most 1000000"),
            std::string::npos);
  EXPECT_NE(err("store: {node_gbps: 1e9}\n").find("store.node_gbps: must be positive and at most 10000"),
            std::string::npos);
  EXPECT_NE(err("store: {nodes: 2, node_loss: [{at: 10s, node: 2}]}\n").find("store.node_loss[0].node: must name a store node, 0 to 1"),
            std::string::npos);
  EXPECT_NE(err("store: {node_loss: [{at: 2h, node: 0}]}\n").find("store.node_loss[0].at: must be within duration + drain"),
            std::string::npos);
  EXPECT_NE(err("store: {nodes: 2, colour: red}\n").find("store.colour: unknown key"), std::string::npos);
  // The line is the store section's (the 18th of the text).
  EXPECT_NE(err("store: {nodes: 0}\n").find("store.yaml:18: store.nodes"), std::string::npos);
}

TEST(StoreTier, NoStoreSectionNoStoreTier) {
  auto s = LoadScenario(std::string(MYRIAD_SOURCE_DIR) + "/scenarios/default.yaml");
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_FALSE(s->store.enabled);
}

}  // namespace
}  // namespace myriad::sim
