// A rollout's changes survive a gateway restart (config `rollout_state`): the file written by
// the admin API is read back over the config by LoadGatewayConfig, as `myriad gateway` does.
#include <gtest/gtest.h>

#include <fstream>

#include "../test_util/read_file.h"
#include "../test_util/temp_dir.h"
#include "gateway/rollout_state.h"
#include "gateway_test_util.h"

namespace myriad::gateway {
namespace {

using namespace gwtest;

// A config in the test's directory whose state file is `<name>.state.json`.
std::string WriteConfig(const std::string& name, const std::string& canary) {
  const auto dir = myriad::testing::TestTempDir();
  const std::string path = (dir / name).string();
  std::ofstream(path) << fmt::format(
      "admin_token: admin\nrollout_state: {}\nrollouts:\n  - {{model: emu-model, stable: v1, canary: {}, share: 0.1}}\n",
      (dir / (name + ".state.json")).string(), canary);
  return path;
}

json RolloutOf(Harness& h) {
  net::Headers auth{{"Authorization", "Bearer admin"}};
  auto r = h.Client().Request("GET", "/admin/rollouts", "", {}, auth);
  EXPECT_TRUE(r.ok() && r->status == 200);
  return json::parse(r->body)["rollouts"][0];
}

int Post(Harness& h, const std::string& body) {
  net::Headers auth{{"Authorization", "Bearer admin"}};
  auto r = h.Client().Request("POST", "/admin/rollouts/emu-model", body, "application/json", auth);
  EXPECT_TRUE(r.ok());
  return r.ok() ? r->status : 0;
}

TEST(GatewayRolloutState, ARollbackAndAPromotionSurviveARestart) {
  const std::string config_path = WriteConfig("gateway.yaml", "v2");
  {
    auto c = LoadGatewayConfig(config_path);
    ASSERT_TRUE(c.ok()) << c.status();
    Harness h(0, *c);
    EXPECT_EQ(RolloutOf(h)["share"].get<double>(), 0.1);
    ASSERT_EQ(Post(h, R"({"share":0.5})"), 200);
    ASSERT_EQ(Post(h, R"({"action":"rollback"})"), 200);
  }
  {
    auto c = LoadGatewayConfig(config_path);
    ASSERT_TRUE(c.ok()) << c.status();
    Harness h(0, *c);
    EXPECT_EQ(RolloutOf(h)["share"].get<double>(), 0.0) << "the rolled-back canary got its config share again";
    ASSERT_EQ(Post(h, R"({"action":"promote"})"), 200);
  }
  auto c = LoadGatewayConfig(config_path);
  ASSERT_TRUE(c.ok()) << c.status();
  Harness h(0, *c);
  const json ro = RolloutOf(h);
  EXPECT_EQ(ro["stable"], "v2");
  EXPECT_TRUE(ro["promoted"].get<bool>());
}

TEST(GatewayRolloutState, ANewCanaryInTheConfigStartsAnew) {
  std::vector<RolloutConfig> saved{{.model = "emu-model", .stable = "v1", .canary = "v2", .share = 0}};
  const std::string config_path = WriteConfig("gateway_v3.yaml", "v3");
  ASSERT_TRUE(SaveRolloutState((myriad::testing::TestTempDir() / "gateway_v3.yaml.state.json").string(), saved).ok());
  auto c = LoadGatewayConfig(config_path);
  ASSERT_TRUE(c.ok()) << c.status();
  ASSERT_EQ(c->rollouts.size(), 1u);
  EXPECT_EQ(c->rollouts[0].canary, "v3");
  EXPECT_EQ(c->rollouts[0].share, 0.1);
}

TEST(GatewayRolloutState, ABadStateFileIsRefusedByFileAndField) {
  const std::string config_path = WriteConfig("gateway_bad.yaml", "v2");
  const std::string state = (myriad::testing::TestTempDir() / "gateway_bad.yaml.state.json").string();
  std::ofstream(state) << R"({"rollouts":[{"model":"emu-model","stable":"v1","canary":"v2","share":"half"}]})";
  auto c = LoadGatewayConfig(config_path);
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find(state + ": rollouts[0].share: expected a number"), std::string::npos)
      << c.status();
  std::ofstream(state) << R"({"rollouts":[{"model":"emu-model","stable":"v1","canary":"v2","share":3}]})";
  c = LoadGatewayConfig(config_path);
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("rollouts[0]: share: 3 is not in [0, 1]"), std::string::npos) << c.status();
  std::ofstream(state) << "not json";
  c = LoadGatewayConfig(config_path);
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find(state), std::string::npos) << c.status();
}

}  // namespace
}  // namespace myriad::gateway
