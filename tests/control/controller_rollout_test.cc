// The controller judging a gateway rollout (config `rollout:`): emulated engines of two versions
// behind a real gateway, the controller's rounds run by the test. A canary that answers the
// known-answer probe wrongly (the emulator's wrong_answer fault) is rolled back in the round
// that sees it; a healthy canary climbs the ladder with traffic and is promoted.
#include <gtest/gtest.h>

#include "../gateway/gateway_test_util.h"
#include "control/controller.h"

namespace myriad::control {
namespace {

using gateway::gwtest::Harness;
using json = nlohmann::json;

constexpr const char* kToken = "rollout-token";

struct RolloutFleet {
  std::vector<std::unique_ptr<emu::EmuServer>> emus;
  std::unique_ptr<Harness> h;
  std::unique_ptr<Controller> ctl;
  std::vector<json> log;

  explicit RolloutFleet(bool dry_run = false, const std::string& extra = "") {
    gateway::GatewayConfig g;
    g.admin_token = kToken;
    for (const char* v : {"v1", "v2"}) {
      emus.push_back(gateway::gwtest::StartEmu());
      gateway::BackendConfig b = gateway::gwtest::EmuBackend(std::string(v) == "v1" ? "s0" : "c0", emus.back()->port());
      b.version = v;
      g.backends.push_back(b);
    }
    g.rollouts.push_back({.model = "emu-model", .stable = "v1", .canary = "v2", .share = 0.25});
    h = std::make_unique<Harness>(0, g);
    // The fleet controller watches the stable engine only: the canary is the rollout's.
    auto c = ParseControlConfig(
        fmt::format("listen: 127.0.0.1:0\ndry_run: {}\n"
                    "gateway: {{url: 'http://127.0.0.1:{}', admin_token: {}}}\n"
                    "engines:\n  - {{name: s0, url: '{}'}}\n"
                    "rollout:\n  model: emu-model\n  ladder: [0.25, 0.5, 1]\n  min_requests: 5\n{}",
                    dry_run, h->gw->port(), kToken, g.backends[0].url, extra),
        "control.yaml");
    EXPECT_TRUE(c.ok()) << c.status();
    auto made = Controller::Create(*c, std::make_shared<ManualClock>());
    EXPECT_TRUE(made.ok()) << made.status();
    ctl = *std::move(made);
    ctl->set_log([this](const std::string& line) { log.push_back(json::parse(line)); });
  }
  ~RolloutFleet() {
    ctl.reset();
    h.reset();
    for (auto& e : emus) e->Stop();
  }
  json Rollout() {
    net::HttpClient c = h->Client();
    auto r = c.Request("GET", "/admin/rollouts", "", {}, {{"Authorization", std::string("Bearer ") + kToken}});
    EXPECT_TRUE(r.ok() && r->status == 200);
    return r.ok() ? json::parse(r->body)["rollouts"][0] : json();
  }
  void Traffic(int users, int offset) {
    net::HttpClient c = h->Client();
    for (int i = 0; i < users; ++i) {
      json body = {{"model", "emu-model"}, {"prompt", "hello"}, {"max_tokens", 1}, {"user", fmt::format("u{}", offset + i)}};
      auto r = c.Post("/v1/completions", body.dump());
      ASSERT_TRUE(r.ok() && r->status == 200) << (r.ok() ? r->body : r.status().ToString());
    }
  }
  std::vector<json> RolloutLines() const {
    std::vector<json> out;
    for (const json& l : log) {
      if (l.value("action", "").starts_with("rollout_")) out.push_back(l);
    }
    return out;
  }
};

TEST(ControllerRollout, ACanaryThatAnswersTheKnownAnswerWronglyIsRolledBackInOneRound) {
  RolloutFleet f;
  f.emus[1]->SetFault(emu::Fault{.kind = emu::Fault::Kind::kWrongAnswer});
  f.ctl->RunRound();
  const std::vector<json> lines = f.RolloutLines();
  ASSERT_EQ(lines.size(), 1u) << json(f.log).dump();
  EXPECT_EQ(lines[0]["action"], "rollout_rollback");
  EXPECT_EQ(lines[0]["from_share"].get<double>(), 0.25);
  EXPECT_TRUE(lines[0]["ok"].get<bool>()) << lines[0].dump();
  EXPECT_NE(lines[0]["reason"].get<std::string>().find("1 of 1 known-answer probes answered wrongly"),
            std::string::npos)
      << lines[0].dump();
  EXPECT_EQ(f.Rollout()["share"].get<double>(), 0.0);
  // Rolled back: nothing left to judge, nothing more logged.
  f.ctl->RunRound();
  EXPECT_EQ(f.RolloutLines().size(), 1u);
}

TEST(ControllerRollout, ADryRunLogsTheRollbackAndLeavesTheShare) {
  RolloutFleet f(/*dry_run=*/true);
  f.emus[1]->SetFault(emu::Fault{.kind = emu::Fault::Kind::kWrongAnswer});
  f.ctl->RunRound();
  const std::vector<json> lines = f.RolloutLines();
  ASSERT_EQ(lines.size(), 1u) << json(f.log).dump();
  EXPECT_EQ(lines[0]["action"], "rollout_rollback");
  EXPECT_TRUE(lines[0]["dry_run"].get<bool>());
  EXPECT_EQ(f.Rollout()["share"].get<double>(), 0.25);
}

TEST(ControllerRollout, AHealthyCanaryIsSteppedUpTheLadderAndPromoted) {
  RolloutFleet f;
  f.ctl->RunRound();  // no traffic yet: the judge waits for its samples
  EXPECT_TRUE(f.RolloutLines().empty()) << json(f.log).dump();
  f.Traffic(60, 0);
  f.ctl->RunRound();
  ASSERT_EQ(f.RolloutLines().size(), 1u) << json(f.log).dump();
  EXPECT_EQ(f.RolloutLines()[0]["action"], "rollout_step");
  EXPECT_EQ(f.Rollout()["share"].get<double>(), 0.5);
  // The new rung's window starts empty: no second step on the first one's traffic.
  f.ctl->RunRound();
  EXPECT_EQ(f.RolloutLines().size(), 1u);
  f.Traffic(60, 1000);
  f.ctl->RunRound();
  ASSERT_EQ(f.RolloutLines().size(), 2u) << json(f.log).dump();
  EXPECT_EQ(f.RolloutLines()[1]["action"], "rollout_promote");
  const json ro = f.Rollout();
  EXPECT_EQ(ro["stable"], "v2");
  EXPECT_TRUE(ro["promoted"].get<bool>());
}

TEST(ControllerRollout, ConfigErrorsNameTheKeyAndBound) {
  auto ladder = ParseControlConfig(
      "gateway: {url: 'http://127.0.0.1:1'}\nrollout:\n  model: m\n  ladder: [0.5, 0.25, 1]\n", "control.yaml");
  EXPECT_NE(ladder.status().message().find("rollout.ladder[1]"), std::string::npos) << ladder.status();
  auto drop = ParseControlConfig("gateway: {url: 'http://127.0.0.1:1'}\nrollout: {model: m, max_slo_drop: 2}\n",
                                 "control.yaml");
  EXPECT_NE(drop.status().message().find("control.yaml:2: rollout.max_slo_drop: 2 is not in [0, 1]"),
            std::string::npos)
      << drop.status();
  auto no_gateway = ParseControlConfig(
      "engines:\n  - {name: e, url: 'http://127.0.0.1:1'}\nrollout: {model: m}\n", "control.yaml");
  EXPECT_NE(no_gateway.status().message().find("rollout: needs gateway.url"), std::string::npos)
      << no_gateway.status();
  auto no_model = ParseControlConfig("gateway: {url: 'http://127.0.0.1:1'}\nrollout: {min_requests: 5}\n",
                                     "control.yaml");
  EXPECT_NE(no_model.status().message().find("rollout.model"), std::string::npos) << no_model.status();
}

}  // namespace
}  // namespace myriad::control
