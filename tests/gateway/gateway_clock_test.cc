// The gateway's time-driven decisions stepped in virtual time (core/clock.h's ManualClock):
// no sleeping, and the outcome at each instant is exact.
#include "gateway_test_util.h"

namespace myriad::gateway {
namespace {

using namespace gwtest;

// Without KV events the gateway trusts its own routing decisions (provisional entries) for
// approx_ttl: a prompt sharing a prefix follows the first one until then, and is routed as
// uncached from the TTL on.
TEST(GatewayClockTest, ProvisionalEntriesExpireAtApproxTtlOfTheGatewaysClock) {
  GatewayConfig c;
  c.approx_ttl = 30 * kSecond;
  auto clock = std::make_shared<ManualClock>();
  Harness h(2, c, {}, clock);
  auto cl = h.Client();
  const std::string prefix = Words(120, 7);
  size_t sent = 0;
  auto cached = [&](int suffix) {
    auto r = cl.Post("/v1/completions", Completion(prefix + Words(4, 100 + suffix)));
    EXPECT_TRUE(r.ok());
    EXPECT_EQ(r->status, 200) << r->body;
    const std::string decision = h.RequestLog(++sent).value("decision", std::string("no log line"));
    const size_t at = decision.find("cached ~");
    EXPECT_NE(at, std::string::npos) << decision;
    return at == std::string::npos ? -1 : std::stoi(decision.substr(at + 8));
  };
  EXPECT_EQ(cached(0), 0);
  const int hit = cached(1);
  EXPECT_GT(hit, 0);
  clock->Advance(c.approx_ttl - 1);
  EXPECT_GT(cached(2), 0);  // 1 ns before the TTL: still trusted
  clock->Advance(c.approx_ttl);  // a TTL past every entry so far, the last request's included
  EXPECT_EQ(cached(3), 0);
}

}  // namespace
}  // namespace myriad::gateway
