// The local actuator of `myriad up --control` (cli/local_engines.h): a change of role restarts
// the engine on its port with the other role and registers it anew.
#include "cli/local_engines.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "net/http_client.h"

namespace myriad::cli {
namespace {

bool Healthy(uint16_t port) {
  net::HttpClient c(net::HostPort{"127.0.0.1", port}, net::HttpClientOptions{.timeout = 2 * kSecond});
  auto r = c.Get("/health");
  return r.ok() && r->status == 200;
}

TEST(LocalEnginesActuator, ChangeRoleRestartsTheEngineWithTheOtherRoleAndRegistersItAnew) {
  LocalEngineOptions o;
  o.roles = LocalRoles(2, 0, 0);
  o.speed = 100;
  auto engines = StartLocalEngines(o);
  ASSERT_TRUE(engines.ok()) << engines.status();
  const uint16_t port = engines->servers[1]->port();
  const emu::EmuServer* before = engines->servers[1].get();
  std::vector<gateway::BackendConfig> registered;
  LocalEnginesActuator actuator(*engines, [&](const gateway::BackendConfig& b) {
    registered.push_back(b);
    return absl::OkStatus();
  });
  ASSERT_TRUE(actuator.ChangeRole("engine-1", "decode", 5 * kSecond).ok());
  EXPECT_NE(engines->servers[1].get(), before) << "a new engine";
  EXPECT_EQ(engines->servers[1]->port(), port) << "restarted on its port";
  EXPECT_TRUE(Healthy(port));
  ASSERT_EQ(registered.size(), 1u);
  EXPECT_EQ(registered[0].name, "engine-1");
  EXPECT_EQ(registered[0].role, gateway::BackendRole::kDecode);
  EXPECT_EQ(engines->backends[1].role, gateway::BackendRole::kDecode);
  EXPECT_EQ(engines->backends[0].role, gateway::BackendRole::kColocated) << "the other engine is untouched";
  // A later restart starts it with the new role.
  EXPECT_EQ(engines->options.roles[1], gateway::BackendRole::kDecode);
  ASSERT_TRUE(actuator.Restart("engine-1", 5 * kSecond).ok());
  EXPECT_TRUE(Healthy(port));

  const absl::Status bad = actuator.ChangeRole("engine-1", "verifier", kSecond);
  EXPECT_TRUE(absl::IsInvalidArgument(bad)) << bad;
  EXPECT_NE(bad.message().find("'verifier' is not prefill, decode or colocated"), std::string::npos) << bad;
  EXPECT_TRUE(absl::IsNotFound(actuator.ChangeRole("engine-9", "decode", kSecond)));
  EXPECT_EQ(registered.size(), 1u);
}

// A scale-out starts engine-N (the next index) with the pool's role and registers it once its
// /health answers; a stop removes it from the gateway first, then stops it; names are not reused.
TEST(LocalEnginesActuator, AddEngineStartsTheNextEngineAndRegistersItStopEngineRemovesAndStopsIt) {
  LocalEngineOptions o;
  o.roles = LocalRoles(1, 0, 0);
  o.speed = 100;
  auto engines = StartLocalEngines(o);
  ASSERT_TRUE(engines.ok()) << engines.status();
  std::vector<std::string> events;
  LocalEnginesActuator actuator(
      *engines,
      [&](const gateway::BackendConfig& b) {
        events.push_back("register " + b.name + " " + std::string(gateway::RoleName(b.role)));
        return absl::OkStatus();
      },
      [&](const std::string& name) { events.push_back("deregister " + name); });
  auto added = actuator.AddEngine("decode", 5 * kSecond);
  ASSERT_TRUE(added.ok()) << added.status();
  EXPECT_EQ(added->name, "engine-1");
  EXPECT_EQ(added->role, "decode");
  ASSERT_EQ(engines->servers.size(), 2u);
  EXPECT_EQ(added->url, fmt::format("http://127.0.0.1:{}", engines->servers[1]->port()));
  EXPECT_TRUE(Healthy(engines->servers[1]->port()));
  EXPECT_EQ(engines->backends[1].role, gateway::BackendRole::kDecode);
  const uint16_t port = engines->servers[1]->port();
  ASSERT_TRUE(actuator.StopEngine("engine-1").ok());
  EXPECT_FALSE(Healthy(port));
  EXPECT_TRUE(Healthy(engines->servers[0]->port())) << "the other engine is untouched";
  auto again = actuator.AddEngine("colocated", 5 * kSecond);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->name, "engine-2") << "a stopped engine's name is not reused";
  EXPECT_EQ(events, (std::vector<std::string>{"register engine-1 decode", "deregister engine-1",
                                              "register engine-2 colocated"}));
  EXPECT_TRUE(absl::IsInvalidArgument(actuator.AddEngine("verifier", kSecond).status()));
  EXPECT_TRUE(absl::IsNotFound(actuator.StopEngine("engine-9")));
  EXPECT_EQ(engines->servers.size(), 3u);
}

}  // namespace
}  // namespace myriad::cli
