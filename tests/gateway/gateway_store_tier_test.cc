// The gateway routes by the engines' store tier: KV events of medium "CPU" (vLLM's CPU
// offload, an engine on Myriad's KV store) put a backend's store-tier blocks in the index, the
// router prices loading them against recomputing (policy/tier_pricing.h), the access log names
// the tier, and their removal (a store node lost) is seen at once and throttled by the
// recompute limiter. The events come from fake publishers speaking vLLM's wire format.
#include <gtest/gtest.h>

#include <numeric>

#include "gateway_test_util.h"
#include "net/kv_event_publisher.h"
#include "perf/step_model.h"
#include "policy/prefill_cost.h"

namespace myriad::gateway {
namespace {

using namespace gwtest;

constexpr uint32_t kBs = 16;
constexpr int kPromptTokens = 336;  // 21 full blocks

std::vector<uint32_t> PromptIds(int seed) {
  std::vector<uint32_t> ids(kPromptTokens);
  std::iota(ids.begin(), ids.end(), 20000 + 1000 * static_cast<uint32_t>(seed));
  return ids;
}

// A stand-in for an engine's KV-event stream.
struct FakeEngineEvents {
  std::unique_ptr<net::KvEventPublisher> pub;
  int base = 0;  // engine hashes it hands out

  FakeEngineEvents() {
    net::KvEventPublisherOptions o;
    o.endpoint = "tcp://127.0.0.1:*";
    o.replay_endpoint = "tcp://127.0.0.1:*";
    auto p = net::KvEventPublisher::Create(o);
    EXPECT_TRUE(p.ok()) << p.status();
    pub = *std::move(p);
  }
  uint64_t Hash(int prompt, int block) const {
    return 0xD000000000000000ULL + static_cast<uint64_t>(prompt) * 1000 + static_cast<uint64_t>(block);
  }
  void Publish(KvEvent e) {
    KvEventBatch b;
    b.events.push_back(std::move(e));
    ASSERT_TRUE(pub->Publish(b).ok());
  }
  // The whole prompt `seed` in the engine's store tier.
  void StoreAll(int seed, const char* medium = "CPU") {
    std::vector<EngineBlockHash> hashes;
    for (int b = 0; b < kPromptTokens / static_cast<int>(kBs); ++b) hashes.push_back(Hash(seed, b));
    Publish(BlockStored{.block_hashes = hashes, .token_ids = PromptIds(seed), .block_size = kBs, .medium = medium});
  }
  // The store drops the prompt's blocks from `first_block` on.
  void RemoveFrom(int seed, int first_block, const char* medium = "CPU") {
    std::vector<EngineBlockHash> hashes;
    for (int b = first_block; b < kPromptTokens / static_cast<int>(kBs); ++b) hashes.push_back(Hash(seed, b));
    Publish(BlockRemoved{.block_hashes = hashes, .medium = medium});
  }
};

// Publishes empty batches on each engine's stream until the gateway takes one (a ZMQ
// subscriber joins late), then lets the rest arrive.
void WaitConnected(Gateway& gw, std::vector<FakeEngineEvents*> engines) {
  for (FakeEngineEvents* e : engines) {
    const uint64_t before = gw.kv_event_stats().batches;
    for (int t = 0; t < 400 && gw.kv_event_stats().batches == before; ++t) {
      ASSERT_TRUE(e->pub->Publish(KvEventBatch{}).ok());
      std::this_thread::sleep_for(5ms);
    }
    ASSERT_GT(gw.kv_event_stats().batches, before);
    std::this_thread::sleep_for(50ms);
  }
}

uint64_t WaitStored(Gateway& gw, uint64_t blocks) { return WaitBlocksStored(gw, blocks); }
uint64_t WaitRemoved(Gateway& gw, uint64_t blocks) {
  for (int i = 0; i < 400 && gw.kv_event_stats().blocks_removed < blocks; ++i) std::this_thread::sleep_for(5ms);
  return gw.kv_event_stats().blocks_removed;
}

std::string IdsCompletion(int seed) {
  json ids = json::array();
  for (uint32_t t : PromptIds(seed)) ids.push_back(t);
  return json({{"model", "emu-model"}, {"prompt", ids}, {"max_tokens", 2}}).dump();
}

GatewayConfig StoreConfig() {
  GatewayConfig c = EventsOnlyConfig();
  c.learn_cost = false;           // priced by the performance model alone: no drift between requests
  c.store_load_gbps = 1000;       // 125 GB/s: 320 tokens of Llama-3.1-8B KV in well under 1 ms
  c.store_load_latency = 0;
  return c;
}

TEST(GatewayStoreTier, RoutesToTheStoreHitAndForgetsItWhenTheStoreDropsIt) {
  FakeEngineEvents ev0, ev1;
  GatewayConfig c = StoreConfig();
  c.admin_token = "admin";
  std::vector<std::unique_ptr<emu::EmuServer>> emus;
  for (int i = 0; i < 2; ++i) {
    emus.push_back(StartEmu());
    BackendConfig b = EmuBackend(fmt::format("b{}", i), emus.back()->port());
    b.kv_events = (i == 0 ? ev0 : ev1).pub->endpoint();
    b.kv_replay = (i == 0 ? ev0 : ev1).pub->replay_endpoint();
    c.backends.push_back(b);
  }
  auto gw = Gateway::Create(c);
  ASSERT_TRUE(gw.ok()) << gw.status();
  LogLines log;
  log.Attach(**gw);
  ASSERT_TRUE((*gw)->Start().ok());
  WaitConnected(**gw, {&ev0, &ev1});
  net::HttpClient cl(net::HostPort{"127.0.0.1", (*gw)->port()});
  size_t sent = 0;
  auto route = [&](int seed) {
    auto r = cl.Post("/v1/completions", IdsCompletion(seed));
    ++sent;
    EXPECT_TRUE(r.ok());
    EXPECT_EQ(r->status, 200) << r->body;
    const std::string* b = r.ok() ? net::FindHeader(r->headers, "X-Myriad-Backend") : nullptr;
    return b ? *b : std::string();
  };
  auto decision = [&] { return log.Line(sent).value("decision", std::string("no log line")); };

  // b1's store tier holds the prompt, b0 has nothing: loading beats recomputing.
  ev1.StoreAll(1);
  ASSERT_GE(WaitStored(**gw, 21), 21u);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(route(1), "b1");
    EXPECT_NE(decision().find("hit=hbm:0,store:335"), std::string::npos) << decision();
  }
  // b1's store node is lost: its removals take the blocks out at once (no TTL), and the
  // prompt, now only in b0's store tier, goes there.
  ev1.RemoveFrom(1, 0);
  ASSERT_GE(WaitRemoved(**gw, 21), 21u);
  route(1);
  EXPECT_NE(decision().find("hit=hbm:0,store:0"), std::string::npos) << decision();
  ev0.StoreAll(1);
  ASSERT_GE(WaitStored(**gw, 42), 42u);
  EXPECT_EQ(route(1), "b0");
  EXPECT_NE(decision().find("hit=hbm:0,store:335"), std::string::npos) << decision();
  EXPECT_EQ((*gw)->kv_event_stats().unknown_medium, 0u);

  // The metrics count decisions by tier.
  auto m = cl.Get("/metrics");
  ASSERT_TRUE(m.ok());
  EXPECT_NE(m->body.find("myriad_gateway_route_decisions_total{tier=\"store\"} 4"), std::string::npos) << m->body;
  EXPECT_NE(m->body.find("myriad_gateway_route_decisions_total{tier=\"none\"} 1"), std::string::npos) << m->body;
  EXPECT_NE(m->body.find("myriad_gateway_route_prefix_tokens_total{tier=\"store\"} 1340"), std::string::npos)
      << m->body;
  (*gw)->Stop();
  for (auto& e : emus) e->Stop();
}

// A slow store path is worth nothing: the same store hit is priced as recompute.
TEST(GatewayStoreTier, AStorePathSlowerThanRecomputeIsNotTaken) {
  FakeEngineEvents ev;
  GatewayConfig c = StoreConfig();
  c.store_load_gbps = 0.001;  // 1 Mb/s
  auto emu = StartEmu();
  BackendConfig b = EmuBackend("b0", emu->port());
  b.kv_events = ev.pub->endpoint();
  b.kv_replay = ev.pub->replay_endpoint();
  c.backends.push_back(b);
  auto gw = Gateway::Create(c);
  ASSERT_TRUE(gw.ok()) << gw.status();
  LogLines log;
  log.Attach(**gw);
  ASSERT_TRUE((*gw)->Start().ok());
  WaitConnected(**gw, {&ev});
  ev.StoreAll(2);
  ASSERT_GE(WaitStored(**gw, 21), 21u);
  net::HttpClient cl(net::HostPort{"127.0.0.1", (*gw)->port()});
  auto r = cl.Post("/v1/completions", IdsCompletion(2));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->status, 200) << r->body;
  EXPECT_NE(log.Line(1).value("decision", std::string()).find("hit=hbm:0,store:0"), std::string::npos)
      << log.Line(1).dump();
  (*gw)->Stop();
  emu->Stop();
}

// A store node lost under load: what it held must now be recomputed, and the recompute limiter
// (the simulator's, in the simulator's unit) sheds the low-priority tenant's recompute with a
// 429 while the high-priority tenant's goes through.
TEST(GatewayStoreTier, RecomputeAfterAStoreLossIsShedLowPriorityFirst) {
  FakeEngineEvents ev;
  GatewayConfig c = StoreConfig();
  // A bucket of 400 prompt tokens (5 s at 80 tokens/s): room for every store-tier hit (one
  // token each to compute) and for one full recompute of a 336-token prompt, but only above
  // the 25% a tenant one class below the top must leave.
  auto step = perf::StepModel::Create(*perf::FindGpu(c.perf_gpu), *perf::FindModel(c.perf_model),
                                      perf::UnitLayout{.tp = c.perf_tp}, {});
  ASSERT_TRUE(step.ok()) << step.status();
  c.recompute_limit = 80 / policy::PrefillCost(*step, 8192).ThroughputTokensPerSecond();
  TenantEntry gold, bronze;
  gold.config = policy::TenantConfig{.name = "gold", .priority = 1};
  gold.api_keys = {"key-gold"};
  bronze.config = policy::TenantConfig{.name = "bronze", .priority = 0};
  bronze.api_keys = {"key-bronze"};
  c.tenants = {gold, bronze};
  auto emu = StartEmu();
  BackendConfig b = EmuBackend("b0", emu->port());
  b.kv_events = ev.pub->endpoint();
  b.kv_replay = ev.pub->replay_endpoint();
  c.backends.push_back(b);
  auto gw = Gateway::Create(c);
  ASSERT_TRUE(gw.ok()) << gw.status();
  ASSERT_TRUE((*gw)->Start().ok());
  WaitConnected(**gw, {&ev});
  ev.StoreAll(3);
  ASSERT_GE(WaitStored(**gw, 21), 21u);
  net::AsyncHttpClient ac;
  auto send = [&](const char* key) { return Send(ac, (*gw)->port(), "POST", "/v1/completions", IdsCompletion(3), key); };
  // Served from the store tier: next to nothing to recompute, so both tenants flow.
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(send("key-bronze").status, 200);
    EXPECT_EQ(send("key-gold").status, 200);
  }
  // The node holding the blocks dies; its removals reach the index at once.
  ev.RemoveFrom(3, 0);
  ASSERT_GE(WaitRemoved(**gw, 21), 21u);
  const CallResult shed = send("key-bronze");
  EXPECT_EQ(shed.status, 429) << shed.body;
  EXPECT_NE(shed.body.find("recompute_limited"), std::string::npos) << shed.body;
  EXPECT_NE(net::FindHeader(shed.headers, "Retry-After"), nullptr);
  const CallResult kept = send("key-gold");
  EXPECT_EQ(kept.status, 200) << kept.body;
  (*gw)->Stop();
  emu->Stop();
}

}  // namespace
}  // namespace myriad::gateway
