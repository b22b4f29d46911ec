// The controller's elasticity actions through the exec hooks (a Kubernetes-style integration:
// no local actuator), over loopback with emulated engines behind a real gateway and the rounds
// on a ManualClock: a pool above its max drains its newest engine in the gateway, runs the drain
// hook, and once the engine is idle runs the stop hook; a pool below its min runs the scale_out
// hook with the role and the count, once (the engine asked for counts as starting).
#include "control/controller.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "../gateway/gateway_test_util.h"
#include "../test_util/temp_dir.h"
#include "../test_util/wait_for.h"

namespace myriad::control {
namespace {

using gateway::gwtest::Harness;
using json = nlohmann::json;
using myriad::test::ReadFile;

constexpr const char* kToken = "ctl-elastic-token";

struct Fixture {
  Harness h;
  std::shared_ptr<ManualClock> clock = std::make_shared<ManualClock>();
  std::filesystem::path dir =
      myriad::testing::TestTempDir() / ::testing::UnitTest::GetInstance()->current_test_info()->name();
  std::unique_ptr<Controller> ctl;
  std::mutex mu;
  std::vector<json> log;

  static gateway::GatewayConfig WithAdmin() {
    gateway::GatewayConfig c;
    c.admin_token = kToken;
    return c;
  }
  explicit Fixture(int min, int max) : h(2, WithAdmin()) {
    std::filesystem::create_directories(dir);
    ControlConfig c;
    c.listen = "127.0.0.1:0";
    c.gateway_url = fmt::format("http://127.0.0.1:{}", h.gw->port());
    c.gateway_admin_token = kToken;
    c.probe_timeout = 2 * kSecond;
    c.autoscale.pools["colocated"] = {.min = min, .max = max};
    c.autoscale.scaler.scale_in_dwell = 0;
    c.autoscale.scaler.lead_time = 10 * kSecond;
    for (const char* a : {"scale_out", "drain", "stop"}) {
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
    EXPECT_TRUE(clock->AwaitSleepers(1));
  }
  ~Fixture() { ctl->Stop(); }
  void Step() {
    clock->Advance(kSecond);
    EXPECT_TRUE(clock->AwaitSleepers(1));
  }
  std::vector<std::string> Actions() {
    std::lock_guard l(mu);
    std::vector<std::string> out;
    for (const json& j : log) {
      if (j["action"] != "record_answer") out.push_back(j["action"].get<std::string>() + ":" + j.value("target", ""));
    }
    return out;
  }
  bool Draining(const std::string& name) {
    net::HttpClient c = h.Client();
    auto r = c.Request("GET", "/admin/backends", "", {}, {{"Authorization", std::string("Bearer ") + kToken}});
    if (!r.ok() || r->status != 200) return false;
    const json list = json::parse(r->body);
    for (const json& b : list["backends"]) {
      if (b["name"] == name) return b["draining"].get<bool>();
    }
    return false;
  }
};

TEST(ControllerElastic, PoolAboveItsMaxDrainsTheNewestEngineThenRunsTheStopHookOnceIdle) {
  Fixture f(/*min=*/1, /*max=*/1);
  ASSERT_EQ(f.ctl->StateOf("b1"), "serving");
  f.Step();  // the scaler's first decision: 2 engines, max 1
  EXPECT_EQ(f.ctl->StateOf("b1"), "retiring");
  EXPECT_TRUE(f.Draining("b1"));
  EXPECT_FALSE(f.Draining("b0"));
  f.Step();  // idle: stopped
  EXPECT_EQ(f.ctl->StateOf("b1"), "stopped");
  EXPECT_EQ(f.ctl->StateOf("b0"), "serving");
  EXPECT_EQ(f.Actions(), (std::vector<std::string>{"scale_in:b1", "stop:b1"}));
  const std::string url = fmt::format("http://127.0.0.1:{}", f.h.emus[1]->port());
  const std::string drain = ReadFile((f.dir / "drain_b1").string());
  EXPECT_NE(drain.find("MYRIAD_ACTION=drain\n"), std::string::npos) << drain;
  EXPECT_NE(drain.find("MYRIAD_REASON=scale in: need 1 < 2 units"), std::string::npos) << drain;
  EXPECT_EQ(ReadFile((f.dir / "stop_b1").string()),
            "MYRIAD_ACTION=stop\nMYRIAD_REASON=drained for scale-in\nMYRIAD_TARGET=b1\nMYRIAD_TARGET_URL=" + url + "\n");
  f.Step();
  EXPECT_EQ(f.Actions().size(), 2u) << "at min, nothing more";
}

TEST(ControllerElastic, PoolBelowItsMinRunsTheScaleOutHookOnceWithTheRoleAndTheCount) {
  Fixture f(/*min=*/3, /*max=*/4);
  f.Step();
  f.Step();
  f.Step();
  EXPECT_EQ(f.Actions(), std::vector<std::string>{"scale_out:"}) << "the engine asked for is starting";
  EXPECT_EQ(ReadFile((f.dir / "scale_out_").string()),
            "MYRIAD_ACTION=scale_out\nMYRIAD_COUNT=1\nMYRIAD_REASON=below min_units\nMYRIAD_ROLE=colocated\n"
            "MYRIAD_TARGET=\nMYRIAD_TARGET_URL=\n");
}

TEST(ControlConfigElastic, ReadsTheSectionsAndRefusesOutOfBoundsValuesNamingKeyAndLine) {
  auto ok = ParseControlConfig("signals: {engine_concurrency: 6, smoothing: 2s}\n"
                               "autoscale:\n"
                               "  pools: {colocated: {min: 2, max: 5}}\n"
                               "  lead_time: 30s\n"
                               "  scale_in_dwell: 1m\n"
                               "pd_ratio: {confirm: 10s, min_engines: 2}\n",
                               "c.yaml", /*fleet_given=*/true);
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ(ok->signals.engine_concurrency, 6);
  EXPECT_EQ(ok->signals.smoothing, 2 * kSecond);
  EXPECT_EQ(ok->autoscale.pools.at("colocated").min, 2);
  EXPECT_EQ(ok->autoscale.pools.at("colocated").max, 5);
  EXPECT_EQ(ok->autoscale.scaler.lead_time, 30 * kSecond);
  EXPECT_EQ(ok->autoscale.scaler.scale_in_dwell, kMinute);
  EXPECT_TRUE(ok->pd_ratio.enabled);
  EXPECT_EQ(ok->pd_ratio.options.confirm, 10 * kSecond);
  EXPECT_EQ(ok->pd_ratio.options.min_units, 2);
  struct Case {
    std::string yaml, error;
  };
  const Case cases[] = {
      {"autoscale:\n  lead_time: 1s\n", "c.yaml:2: autoscale.pools: required"},
      {"autoscale:\n  pools: {colocated: {min: 3, max: 2}}\n",
       "c.yaml:2: autoscale.pools.colocated.min: must be in [1, 2] (got 3)"},
      {"autoscale:\n  pools: {decode: {max: 10001}}\n",
       "c.yaml:2: autoscale.pools.decode.max: must be in [1, 10000] (got 10001)"},
      {"autoscale:\n  pools: {decode: {min: 1}}\n", "autoscale.pools.decode.max: required"},
      {"autoscale:\n  pools: {verifier: {max: 2}}\n", "c.yaml:2: autoscale.pools.verifier: unknown key"},
      {"autoscale:\n  pools: {colocated: {max: 2}}\n  lead_time: 2h\n",
       "c.yaml:3: autoscale.lead_time: must be in [0s, 1h] (got 2h)"},
      {"autoscale:\n  pools: {colocated: {max: 2}}\n  target_utilisation: 0\n",
       "c.yaml:3: autoscale.target_utilisation: must be in [0.05, 1] (got 0)"},
      {"signals: {engine_concurrency: 1e6}\n", "c.yaml:1: signals.engine_concurrency: must be in [0.01, 100000]"},
      {"pd_ratio: {high: 0.5, low: 0.6}\n", "c.yaml:1: pd_ratio.low: must be below high (0.5) (got 0.6)"},
      {"pd_ratio: {min_engines: 0}\n", "c.yaml:1: pd_ratio.min_engines: must be in [1, 10000] (got 0)"},
      {"autoscale:\n  pools: {prefill: {max: 2}}\npd_ratio: {}\n",
       "c.yaml:3: pd_ratio: the prefill pool is autoscaled too"},
      {"actuators: {exec: {grow: x}}\n", "actuators.exec.grow: unknown key"},
  };
  for (const Case& c : cases) {
    const auto parsed = ParseControlConfig(c.yaml, "c.yaml", /*fleet_given=*/true);
    ASSERT_FALSE(parsed.ok()) << c.yaml;
    EXPECT_NE(parsed.status().message().find(c.error), std::string::npos) << c.yaml << "\n" << parsed.status();
  }
  const auto role = ParseControlConfig("engines:\n  - {name: a, url: 'http://127.0.0.1:1', role: verifier}\n", "e.yaml");
  ASSERT_FALSE(role.ok());
  EXPECT_NE(role.status().message().find("e.yaml:2: engines[0].role: must be prefill, decode or colocated (got verifier)"),
            std::string::npos)
      << role.status();
}

}  // namespace
}  // namespace myriad::control
