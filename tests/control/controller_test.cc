// The controller over loopback: emulated engines behind a real gateway, the controller's
// rounds on a ManualClock. A hang (the emulator's fault endpoint) and a crash are detected
// within their thresholds, drained in the gateway, and the exec hooks see their target.
#include "control/controller.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <sstream>
#include <thread>

#include "../gateway/gateway_test_util.h"
#include "../test_util/promtool.h"
#include "../test_util/temp_dir.h"
#include "../test_util/wait_for.h"

namespace myriad::control {
namespace {

using myriad::test::ReadFile;

using gateway::gwtest::Harness;
using json = nlohmann::json;
using namespace std::chrono_literals;

constexpr const char* kToken = "ctl-test-token";

gateway::GatewayConfig WithAdmin() {
  gateway::GatewayConfig c;
  c.admin_token = kToken;
  return c;
}

bool Draining(Harness& h, const std::string& name) {
  net::HttpClient c = h.Client();
  auto r = c.Request("GET", "/admin/backends", "", {}, {{"Authorization", std::string("Bearer ") + kToken}});
  if (!r.ok() || r->status != 200) {
    ADD_FAILURE() << (r.ok() ? r->body : r.status().ToString());
    return false;
  }
  const json list = json::parse(r->body);
  for (const json& b : list["backends"]) {
    if (b["name"] == name) return b["draining"].get<bool>();
  }
  ADD_FAILURE() << "no backend " << name << " in " << r->body;
  return false;
}

struct Fixture {
  Harness h;
  std::shared_ptr<ManualClock> clock = std::make_shared<ManualClock>();
  std::filesystem::path dir = myriad::testing::TestTempDir() / ::testing::UnitTest::GetInstance()->current_test_info()->name();
  std::unique_ptr<Controller> ctl;
  std::mutex mu;
  std::vector<json> log;

  // `gateway_clock`: the gateway's; a ManualClock nobody advances runs none of its health rounds.
  explicit Fixture(ControlConfig c = {}, int engines = 2, std::shared_ptr<Clock> gateway_clock = nullptr)
      : h(engines, WithAdmin(), {}, std::move(gateway_clock)) {
    std::filesystem::create_directories(dir);
    c.listen = "127.0.0.1:0";
    c.gateway_url = fmt::format("http://127.0.0.1:{}", h.gw->port());
    c.gateway_admin_token = kToken;  // the engines come from the gateway's backend list
    c.scrape_interval = kSecond;
    c.scrape_timeout = 500 * kMillisecond;
    c.probe_timeout = 2 * kSecond;
    c.policy.hang_after = 3 * kSecond;
    c.policy.crash_after_failed_probes = 2;
    for (const char* a : {"drain", "restart"}) {
      c.exec[a] = fmt::format("env | grep -E '^MYRIAD_(ACTION|COUNT|REASON|ROLE|TARGET|TARGET_URL)=' | sort > '{}'/{}_$MYRIAD_TARGET", dir.string(), a);
    }
    auto made = Controller::Create(c, clock);
    EXPECT_TRUE(made.ok()) << made.status();
    ctl = *std::move(made);
    ctl->set_log([this](const std::string& line) {
      std::lock_guard l(mu);
      log.push_back(json::parse(line));
    });
    EXPECT_TRUE(ctl->Start().ok());
    EXPECT_TRUE(clock->AwaitSleepers(1));  // the first round: both engines admitted
  }
  ~Fixture() { ctl->Stop(); }
  // One scrape period of virtual time, and the round it starts.
  void Step() {
    clock->Advance(kSecond);
    EXPECT_TRUE(clock->AwaitSleepers(1));
  }
  std::string Log() {
    std::lock_guard l(mu);
    std::string out;
    for (const json& j : log) out += j.dump() + "\n";
    return out;
  }
  std::vector<std::string> Actions(const std::string& target) {
    std::lock_guard l(mu);
    std::vector<std::string> out;
    for (const json& j : log) {
      if (j["target"] == target) out.push_back(j["action"].get<std::string>() + ":" + j["reason"].get<std::string>());
    }
    return out;
  }
};

TEST(Controller, HangIsDrainedInTheGatewayWithinHangAfterAndTheHookSeesItsTarget) {
  Fixture f;
  ASSERT_EQ(f.ctl->StateOf("b0"), "serving");
  ASSERT_EQ(f.ctl->StateOf("b1"), "serving");
  // A long request in flight on b1, then b1 hangs: its /metrics still answer, its tokens stop.
  emu::EmuServer& e1 = *f.h.emus[1];
  std::thread client([&] {
    net::HttpClient c(net::HostPort{"127.0.0.1", e1.port()}, {.timeout = 30 * kSecond});
    (void)c.Post("/v1/completions", gateway::gwtest::Completion("hold on", 100000));
  });
  // However the test ends: the engine stops, which ends the request, before the thread is joined.
  struct Joiner {
    emu::EmuServer& e;
    std::thread& t;
    ~Joiner() {
      e.SetFault({});
      e.Stop();
      t.join();
    }
  } joiner{e1, client};
  for (int i = 0; i < 400 && e1.engine().stats().running == 0; ++i) std::this_thread::sleep_for(5ms);
  ASSERT_GT(e1.engine().stats().running, 0u);
  e1.SetFault({.kind = emu::Fault::Kind::kHang});
  const Nanos hung_at = f.clock->Now();
  Nanos detected = -1;
  for (int i = 0; i < 10 && detected < 0; ++i) {
    f.Step();
    if (f.ctl->StateOf("b1") == "recovering") detected = f.clock->Now();
  }
  // Within hang_after plus one scrape period (the last progress may have landed just before).
  ASSERT_GE(detected, 0) << "never detected";
  EXPECT_LE(detected - hung_at, 3 * kSecond + kSecond);
  EXPECT_TRUE(Draining(f.h, "b1")) << f.Log();
  EXPECT_FALSE(Draining(f.h, "b0"));
  EXPECT_EQ(f.ctl->StateOf("b0"), "serving");
  const std::vector<std::string> b1 = f.Actions("b1");
  EXPECT_EQ(std::count(b1.begin(), b1.end(), "drain:hang"), 1) << ::testing::PrintToString(b1);
  EXPECT_EQ(std::count(b1.begin(), b1.end(), "restart:hang"), 1);
  const std::string env = ReadFile(f.dir / "drain_b1");
  EXPECT_NE(env.find("MYRIAD_ACTION=drain\n"), std::string::npos) << env;
  EXPECT_NE(env.find("MYRIAD_TARGET=b1\n"), std::string::npos) << env;
  EXPECT_NE(env.find(fmt::format("MYRIAD_TARGET_URL=http://127.0.0.1:{}\n", e1.port())), std::string::npos) << env;
  EXPECT_NE(env.find("MYRIAD_REASON=hang\n"), std::string::npos) << env;
  EXPECT_NE(ReadFile(f.dir / "restart_b1").find("MYRIAD_ACTION=restart\n"), std::string::npos);
  // The controller's own endpoints show it.
  net::HttpClient admin(net::HostPort{"127.0.0.1", f.ctl->port()});
  auto engines = admin.Get("/admin/engines");
  ASSERT_TRUE(engines.ok());
  const json j = json::parse(engines->body);
  ASSERT_EQ(j["engines"].size(), 2u);
  EXPECT_EQ(j["engines"][1]["state"], "recovering");
  EXPECT_TRUE(j["radar"].is_array());
  auto metrics = admin.Get("/metrics");
  ASSERT_TRUE(metrics.ok());
  EXPECT_NE(metrics->body.find("myriad_control_actions_total{action=\"drain\"} 1"), std::string::npos)
      << metrics->body;
  EXPECT_NE(metrics->body.find("myriad_control_engines{state=\"recovering\"} 1"), std::string::npos);
}

TEST(Controller, CrashIsDrainedAfterFailedProbesInARow) {
  // The gateway runs no health checks and gets no traffic: it never takes b0 out, so only the
  // controller's own failed scrapes count (TheGatewaysVerdictActsAtTheFirstFailedScrape).
  Fixture f({}, 2, std::make_shared<ManualClock>());
  f.h.emus[0]->Crash();
  f.Step();  // one failed scrape: not yet
  EXPECT_EQ(f.ctl->StateOf("b0"), "serving");
  f.Step();
  EXPECT_EQ(f.ctl->StateOf("b0"), "recovering");
  EXPECT_TRUE(Draining(f.h, "b0")) << f.Log();
  EXPECT_EQ(f.Actions("b0"), (std::vector<std::string>{"record_answer:admission", "drain:crash", "restart:crash"}));
  EXPECT_NE(ReadFile(f.dir / "restart_b0").find("MYRIAD_REASON=crash\n"), std::string::npos);
  EXPECT_EQ(f.ctl->StateOf("b1"), "serving");
  // The restart, as a hook would do it: a new engine on the same port. It answers the probe as
  // at admission and completes its warmups: re-admitted, undrained in the gateway.
  const uint16_t port = f.h.emus[0]->port();
  f.h.emus[0]->Stop();
  emu::EmuOptions o;
  o.engine.speed = 50;
  o.http.port = port;
  auto again = emu::EmuServer::Create(o);
  ASSERT_TRUE(again.ok()) << again.status();
  ASSERT_TRUE((*again)->Start().ok());
  f.h.emus[0] = *std::move(again);
  f.Step();
  EXPECT_EQ(f.ctl->StateOf("b0"), "serving") << f.Log();
  EXPECT_FALSE(Draining(f.h, "b0"));
  EXPECT_EQ(f.Actions("b0"), (std::vector<std::string>{"record_answer:admission", "drain:crash", "restart:crash",
                                                       "warmup:back after restart", "readmit:warmup passed"}));
}

// The controller's own /metrics as a Prometheus operator would lint it, with every family
// holding samples (actions by kind, engines by state, the leader gauge).
TEST(Controller, MetricsPassPromtool) {
  Fixture f;
  f.h.emus[0]->Crash();
  f.Step();
  f.Step();
  ASSERT_EQ(f.ctl->StateOf("b0"), "recovering") << f.Log();
  net::HttpClient admin(net::HostPort{"127.0.0.1", f.ctl->port()});
  auto metrics = admin.Get("/metrics");
  ASSERT_TRUE(metrics.ok());
  EXPECT_NE(metrics->body.find("myriad_control_actions_total{action=\"restart\"} 1"), std::string::npos)
      << metrics->body;
  EXPECT_NE(metrics->body.find("\nmyriad_control_leader 1\n"), std::string::npos) << metrics->body;
  EXPECT_EQ(myriad::testing::PromtoolComplaints(metrics->body), std::vector<std::string>{}) << metrics->body;
}

// The known-answer probe sends only fields both vLLM and llama.cpp's llama-server read on
// /v1/completions (docs/controller.md): greedy, a fixed seed, max_tokens, not streamed.
TEST(Controller, ProbeSendsTheFieldsVllmAndLlamaServerRead) {
  std::mutex mu;
  json seen;
  net::HttpServer engine(net::HttpServerOptions{}, [&](const net::HttpRequest& r) -> net::HttpResponse {
    if (r.path() == "/metrics") return {200, "text/plain", "vllm:num_requests_running 0\n", {}};
    std::lock_guard l(mu);
    seen = json::parse(r.body, nullptr, false);
    return {200, "application/json", R"({"choices":[{"index":0,"text":" Paris"}]})", {}};
  });
  ASSERT_TRUE(engine.Start().ok());
  ControlConfig c;
  c.listen = "127.0.0.1:0";
  c.probe_max_tokens = 5;
  c.probe_model = "served-name";
  c.engines.push_back({"e0", fmt::format("http://127.0.0.1:{}", engine.port())});
  auto ctl = Controller::Create(c, std::make_shared<ManualClock>());
  ASSERT_TRUE(ctl.ok());
  (*ctl)->RunRound();
  EXPECT_EQ((*ctl)->StateOf("e0"), "serving");
  std::lock_guard l(mu);
  EXPECT_EQ(seen, json({{"prompt", c.probe_prompt}, {"max_tokens", 5}, {"temperature", 0}, {"seed", 0},
                        {"stream", false}, {"model", "served-name"}}))
      << seen.dump();
  engine.Stop();
}

// An engine that starts answering wrong while serving is cordoned within one probe period.
TEST(Controller, ServingEngineThatAnswersWrongIsCordonedWithinOneProbePeriod) {
  std::atomic<bool> wrong{false};
  net::HttpServer engine(net::HttpServerOptions{}, [&](const net::HttpRequest& r) -> net::HttpResponse {
    if (r.path() == "/metrics") return {200, "text/plain", "vllm:num_requests_running 0\n", {}};
    return {200, "application/json",
            wrong ? R"({"choices":[{"index":0,"text":" Lyon"}]})" : R"({"choices":[{"index":0,"text":" Paris"}]})",
            {}};
  });
  ASSERT_TRUE(engine.Start().ok());
  auto made = ParseControlConfig(fmt::format("listen: 127.0.0.1:0\ngate: {{probe_period: 5s}}\n"
                                             "engines:\n  - {{name: e0, url: 'http://127.0.0.1:{}'}}\n",
                                             engine.port()),
                                 "control.yaml");
  ASSERT_TRUE(made.ok()) << made.status();
  auto clock = std::make_shared<ManualClock>();
  auto ctl = Controller::Create(*made, clock);
  ASSERT_TRUE(ctl.ok());
  std::vector<json> log;
  (*ctl)->set_log([&](const std::string& line) { log.push_back(json::parse(line)); });
  (*ctl)->RunRound();  // admitted: " Paris" recorded
  wrong = true;
  const Nanos wrong_at = clock->Now();
  Nanos cordoned = -1;
  for (int i = 0; i < 10 && cordoned < 0; ++i) {
    clock->Advance(kSecond);
    (*ctl)->RunRound();
    if ((*ctl)->StateOf("e0") == "cordoned") cordoned = clock->Now();
  }
  ASSERT_GE(cordoned, 0) << "never cordoned";
  EXPECT_LE(cordoned - wrong_at, 5 * kSecond);
  ASSERT_GE(log.size(), 3u);
  EXPECT_EQ(log[log.size() - 3]["action"], "probe");
  EXPECT_EQ(log[log.size() - 3]["probe"], "mismatch");
  EXPECT_EQ(log[log.size() - 2]["action"], "drain");
  EXPECT_EQ(log.back()["action"], "cordon");
  engine.Stop();
}

// A change of role (what the elasticity policy will ask for): the engine is drained, the
// change_role hook runs with the role in MYRIAD_ROLE, and the engine comes back through the
// warmup gate. In a dry run it is only logged.
TEST(Controller, RoleChangeDrainsRunsTheHookWithTheRoleAndReadmitsThroughTheGate) {
  for (const bool dry : {false, true}) {
    SCOPED_TRACE(dry ? "dry run" : "live");
    ControlConfig c;
    c.dry_run = dry;
    const std::filesystem::path out = myriad::testing::TestTempDir() / (dry ? "role_dry" : "role_live");
    c.exec["change_role"] = fmt::format("env | grep -E '^MYRIAD_(ACTION|COUNT|REASON|ROLE|TARGET|TARGET_URL)=' | sort > '{}'", out.string());
    Fixture f(c);
    ASSERT_EQ(f.ctl->StateOf("b1"), "serving");
    EXPECT_TRUE(absl::IsInvalidArgument(f.ctl->RequestRoleChange("b1", "verifier")));
    EXPECT_TRUE(absl::IsNotFound(f.ctl->RequestRoleChange("b9", "decode")));
    ASSERT_TRUE(f.ctl->RequestRoleChange("b1", "decode").ok());
    f.Step();
    for (int i = 0; i < 3 && f.ctl->StateOf("b1") != "serving"; ++i) f.Step();
    EXPECT_EQ(f.Actions("b1"), (std::vector<std::string>{"record_answer:admission", "drain:change role to decode",
                                                         "change_role:change role to decode",
                                                         "warmup:back after restart", "readmit:warmup passed"}))
        << f.Log();
    EXPECT_EQ(f.Actions("b0"), std::vector<std::string>{"record_answer:admission"}) << f.Log();
    EXPECT_FALSE(Draining(f.h, "b1"));
    if (dry) {
      EXPECT_FALSE(std::filesystem::exists(out)) << "a dry run runs no hook";
      EXPECT_NE(f.Log().find("\"action\":\"change_role\",\"dry_run\":true"), std::string::npos) << f.Log();
    } else {
      EXPECT_EQ(ReadFile(out), fmt::format("MYRIAD_ACTION=change_role\nMYRIAD_REASON=change role to decode\n"
                                           "MYRIAD_ROLE=decode\nMYRIAD_TARGET=b1\nMYRIAD_TARGET_URL=http://127.0.0.1:{}\n",
                                           f.h.emus[1]->port()));
    }
  }
}

// An operator's requests over the controller's HTTP API: planned maintenance drains, restarts
// and re-admits through the gate; a cordoned engine reported repaired goes through the gate
// again. Without the admin token nothing is queued.
TEST(Controller, OperatorMaintenanceAndRepairOverTheAdminApi) {
  ControlConfig c;
  c.admin_token = "op-token";
  c.policy.probe_period = 2 * kSecond;
  Fixture f(c);
  ASSERT_EQ(f.ctl->StateOf("b1"), "serving");
  net::HttpClient api(net::HostPort{"127.0.0.1", f.ctl->port()});
  const net::Headers op{{"Authorization", "Bearer op-token"}};
  const auto post = [&](const std::string& target, const net::Headers& h, const std::string& body = "") {
    auto r = api.Request("POST", target, body, "application/json", h);
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? r->status : 0;
  };
  EXPECT_EQ(post("/admin/engines/b1/maintain", {}), 401);
  EXPECT_EQ(post("/admin/engines/b1/maintain", {{"Authorization", "Bearer nope"}}), 401);
  EXPECT_EQ(post("/admin/engines/b9/maintain", op), 404);
  EXPECT_EQ(post("/admin/engines/b1/reboot", op), 404);
  EXPECT_EQ(post("/admin/engines/b1/role", op, R"({"role":"verifier"})"), 400);
  f.Step();
  EXPECT_EQ(f.ctl->StateOf("b1"), "serving") << "a refused request was queued: " << f.Log();

  ASSERT_EQ(post("/admin/engines/b1/maintain", op), 202);
  f.Step();
  for (int i = 0; i < 3 && f.ctl->StateOf("b1") != "serving"; ++i) f.Step();
  std::vector<std::string> b1 = f.Actions("b1");
  std::erase_if(b1, [](const std::string& a) { return a.starts_with("probe:"); });  // the periodic probes
  EXPECT_EQ(b1, (std::vector<std::string>{"record_answer:admission", "drain:maintenance",
                                                       "restart:maintenance", "warmup:back after restart",
                                                       "readmit:warmup passed"}))
      << f.Log();
  EXPECT_FALSE(Draining(f.h, "b1"));

  // A wrong answer cordons b0; the operator replaces the part and says so.
  emu::Fault wrong;
  wrong.kind = emu::Fault::Kind::kWrongAnswer;
  f.h.emus[0]->SetFault(wrong);
  for (int i = 0; i < 5 && f.ctl->StateOf("b0") != "cordoned"; ++i) f.Step();
  ASSERT_EQ(f.ctl->StateOf("b0"), "cordoned") << f.Log();
  f.Step();
  EXPECT_EQ(f.ctl->StateOf("b0"), "cordoned") << "a cordoned engine stays out until repaired";
  f.h.emus[0]->SetFault({});
  ASSERT_EQ(post("/admin/engines/b0/repair", op), 202);
  for (int i = 0; i < 4 && f.ctl->StateOf("b0") != "serving"; ++i) f.Step();
  EXPECT_EQ(f.ctl->StateOf("b0"), "serving") << f.Log();
  EXPECT_FALSE(Draining(f.h, "b0"));
}

// A rolling restart of a pool over the admin API (policy::NextToRestart, the simulator's
// elastic.restarts too): every engine is drained, restarted and re-admitted through the gate,
// and never more than the buffer allows are out at once: 4 engines with 70% kept serving
// leave room for one, whatever max_out says.
TEST(Controller, RollingRestartOfAPoolKeepsTheCapacityBuffer) {
  ControlConfig c;
  c.admin_token = "op-token";
  Fixture f(c, 4);
  net::HttpClient api(net::HostPort{"127.0.0.1", f.ctl->port()});
  const net::Headers op{{"Authorization", "Bearer op-token"}};
  const auto post = [&](const std::string& target, const net::Headers& h, const std::string& body = "") {
    auto r = api.Request("POST", target, body, "application/json", h);
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? std::pair(r->status, r->body) : std::pair(0, std::string());
  };
  EXPECT_EQ(post("/admin/pools/colocated/restart", {}).first, 401);
  EXPECT_EQ(post("/admin/pools/decode/restart", op).first, 404) << "no serving engine in that pool";
  EXPECT_EQ(post("/admin/pools/verifier/restart", op).first, 400);
  const auto bad = post("/admin/pools/colocated/restart", op, R"({"min_serving_fraction": 1.5})");
  EXPECT_EQ(bad.first, 400);
  EXPECT_NE(bad.second.find("min_serving_fraction: 1.5 is not in [0, 1)"), std::string::npos) << bad.second;
  EXPECT_EQ(post("/admin/pools/colocated/restart", op, R"({"max_out": 0})").first, 400);
  EXPECT_EQ(post("/admin/pools/colocated/restart", op, R"({"surge": 1})").first, 400);
  const auto asked = post("/admin/pools/colocated/restart", op, R"({"max_out": 3, "min_serving_fraction": 0.7})");
  ASSERT_EQ(asked.first, 202) << asked.second;
  EXPECT_EQ(json::parse(asked.second)["engines"].size(), 4u) << asked.second;
  EXPECT_EQ(post("/admin/pools/colocated/restart", op).first, 409) << "one restart of a pool at a time";

  int most_down = 0;
  for (int i = 0; i < 20; ++i) {
    f.Step();
    int down = 0;
    for (const char* e : {"b0", "b1", "b2", "b3"}) down += f.ctl->StateOf(e) != "serving";
    most_down = std::max(most_down, down);
    if (f.Log().find("\"event\":\"done\"") != std::string::npos) break;
  }
  EXPECT_EQ(most_down, 1) << f.Log();
  ASSERT_NE(f.Log().find("\"event\":\"done\""), std::string::npos) << "the restart finished: " << f.Log();
  // From the action log alone: each engine drained, restarted and re-admitted once, and
  // never two between a drain and its re-admission.
  std::map<std::string, int> restarts;
  int out = 0, most_out = 0;
  {
    std::lock_guard l(f.mu);
    for (const json& j : f.log) {
      const std::string action = j["action"].get<std::string>();
      if (action == "drain") most_out = std::max(most_out, ++out);
      if (action == "readmit") --out;
      if (action == "restart") ++restarts[j["target"].get<std::string>()];
    }
  }
  EXPECT_EQ(most_out, 1) << f.Log();
  EXPECT_EQ(restarts, (std::map<std::string, int>{{"b0", 1}, {"b1", 1}, {"b2", 1}, {"b3", 1}})) << f.Log();
  for (const char* e : {"b0", "b1", "b2", "b3"}) {
    EXPECT_EQ(f.ctl->StateOf(e), "serving");
    EXPECT_FALSE(Draining(f.h, e));
  }
  auto engines = api.Request("GET", "/admin/engines", "", "", {});
  ASSERT_TRUE(engines.ok());
  const json restart = json::parse(engines->body)["restarts"][0];
  EXPECT_GE(restart["done_s"].get<double>(), 0) << restart.dump();
  for (const json& e : restart["engines"]) EXPECT_EQ(e["state"], "done") << restart.dump();
  // A buffer that leaves no engine free to go is refused, not left hanging.
  const auto stuck = post("/admin/pools/colocated/restart", op, R"({"min_serving_fraction": 0.9})");
  EXPECT_EQ(stuck.first, 400) << stuck.second;
}

TEST(Controller, OperatorRequestsAreRefusedWithoutAnAdminToken) {
  Fixture f;
  net::HttpClient api(net::HostPort{"127.0.0.1", f.ctl->port()});
  auto r = api.Request("POST", "/admin/engines/b1/maintain", "", "", {{"Authorization", "Bearer x"}});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->status, 403);
  EXPECT_NE(r->body.find("no admin_token set"), std::string::npos) << r->body;
}

// The gateway is a second witness of a crash: with it the controller acts at the first failed
// scrape instead of after crash_after_failed_probes of them. The gateway's active checks (every
// 50 ms in the harness) mark the crashed backend unhealthy before real traffic could eject it
// (it then gets no requests to fail): either counts.
TEST(Controller, TheGatewaysVerdictActsAtTheFirstFailedScrape) {
  ControlConfig c;
  Fixture f(c);
  ASSERT_EQ(f.ctl->StateOf("b0"), "serving");
  f.h.emus[0]->Crash();
  net::HttpClient client = f.h.Client();
  const auto out_in_gateway = [&] {
    (void)client.Post("/v1/completions", R"({"model":"emu-model","prompt":"hello","max_tokens":1})");
    auto r = client.Request("GET", "/admin/backends", "", {}, {{"Authorization", std::string("Bearer ") + kToken}});
    if (!r.ok() || r->status != 200) return false;
    const json j = json::parse(r->body);  // named: a range-for over a temporary's member dangles
    for (const json& b : j["backends"]) {
      if (b["name"] == "b0") return b["ejected"].get<bool>() || !b["healthy"].get<bool>();
    }
    return false;
  };
  ASSERT_TRUE(myriad::test::WaitFor(out_in_gateway, std::chrono::seconds(10)))
      << "the gateway never took b0 out: "
      << client.Request("GET", "/admin/backends", "", {}, {{"Authorization", std::string("Bearer ") + kToken}})->body;
  f.Step();  // one failed scrape (crash_after_failed_probes is 2 in the fixture)
  EXPECT_EQ(f.ctl->StateOf("b0"), "recovering") << f.Log();
  EXPECT_EQ(f.Actions("b0"), (std::vector<std::string>{"record_answer:admission", "drain:crash", "restart:crash"}));
  EXPECT_EQ(f.ctl->StateOf("b1"), "serving");
}

// `myriad up --control` without --control-config builds its config in code: it must get the
// documented defaults too, the periodic known-answer probe every minute included.
TEST(ControlConfig, ACodeBuiltConfigHasTheDocumentedDefaults) {
  auto parsed = ParseControlConfig("", "empty.yaml", /*fleet_given=*/true);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  const ControlConfig built;
  EXPECT_EQ(parsed->policy.probe_period, kMinute);
  EXPECT_EQ(built.policy.probe_period, kMinute);
  EXPECT_EQ(built.policy.hang_after, parsed->policy.hang_after);
  EXPECT_EQ(built.scrape_interval, parsed->scrape_interval);
}

}  // namespace
}  // namespace myriad::control
