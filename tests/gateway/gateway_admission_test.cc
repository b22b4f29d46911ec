// The gateway's admission through a client's eyes: the pipeline the simulator runs
// (policy/admission.h) in the order it runs it, the recompute limiter when configured, and the
// reasons in the 429 bodies as the simulator's report names them.
#include <gtest/gtest.h>

#include "gateway_test_util.h"
#include "perf/step_model.h"
#include "policy/prefill_cost.h"
#include "policy/tenant_fill.h"

namespace myriad::gateway {
namespace {

using namespace gwtest;

std::string ErrorMessage(const CallResult& r) {
  const json j = json::parse(r.body, nullptr, false);
  return j.is_object() && j.contains("error") ? j["error"].value("message", "") : r.body;
}

TEST(GatewayAdmission, ARequestNoBackendCanServeDoesNotSpendItsTenantsQuota) {
  GatewayConfig c;
  c.admin_token = "admin";
  TenantEntry small;
  small.config.name = "small";
  // Room for one request: a 39-byte prompt (~9 tokens) plus 4 tokens of output.
  small.config.quota_tokens_per_s = 1e-3;
  small.config.burst_tokens = 13;
  small.api_keys = {"key-small"};
  c.tenants.push_back(small);
  Harness h(1, c);
  net::AsyncHttpClient ac;
  const std::string prompt = Completion("one two three four five six seven eight", 4);
  ASSERT_EQ(Send(ac, h.gw->port(), "POST", "/admin/backends/b0/drain", "", "admin").status, 200);
  const CallResult unserved = Send(ac, h.gw->port(), "POST", "/v1/completions", prompt, "key-small");
  EXPECT_EQ(unserved.status, 503) << unserved.body;
  ASSERT_EQ(Send(ac, h.gw->port(), "POST", "/admin/backends/b0/undrain", "", "admin").status, 200);
  // Routing comes before the tenant: the refused request left the quota whole.
  const CallResult served = Send(ac, h.gw->port(), "POST", "/v1/completions", prompt, "key-small");
  EXPECT_EQ(served.status, 200) << served.body;
  const CallResult over = Send(ac, h.gw->port(), "POST", "/v1/completions", prompt, "key-small");
  EXPECT_EQ(over.status, 429) << over.body;
  EXPECT_NE(ErrorMessage(over).find("tenant_quota"), std::string::npos) << over.body;
  EXPECT_NE(ErrorMessage(over).find("'small'"), std::string::npos) << over.body;
  EXPECT_EQ(h.gw->stats().rejected, 2u);
}

TEST(GatewayAdmission, AFillTenantIsServedOnlyIntoHeadroom) {
  // policy/tenant_fill.h's class, fairness off: `batch` may only take a request whose TTFT
  // estimate is at most the contention threshold (half the SLO). With a TTFT SLO of 1 us no
  // estimate is, and the router rejects nothing (reject_factor 0): the interactive tenant is
  // served where the fill tenant is refused.
  auto config = ParseGatewayConfig(R"(
routing:
  ttft_slo: 1us
  reject_factor: 0
tenants:
  - {name: chat, api_keys: [key-chat]}
  - {name: batch, api_keys: [key-batch], fill: true}
)",
                                   "gw.yaml");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->tenants[1].config.priority, policy::kFillPriority);
  Harness h(1, *config);
  net::AsyncHttpClient ac;
  const std::string prompt = Completion("one two three four five six seven eight", 4);
  const CallResult batch = Send(ac, h.gw->port(), "POST", "/v1/completions", prompt, "key-batch");
  EXPECT_EQ(batch.status, 429) << batch.body;
  EXPECT_NE(ErrorMessage(batch).find("tenant_no_headroom"), std::string::npos) << batch.body;
  EXPECT_EQ(Send(ac, h.gw->port(), "POST", "/v1/completions", prompt, "key-chat").status, 200);
  // With the default SLO (2 s) the idle backend is all headroom: fill is served.
  auto roomy = ParseGatewayConfig("tenants:\n  - {name: batch, api_keys: [key-batch], fill: true}\n", "gw.yaml");
  ASSERT_TRUE(roomy.ok()) << roomy.status();
  Harness h2(1, *roomy);
  EXPECT_EQ(Send(ac, h2.gw->port(), "POST", "/v1/completions", prompt, "key-batch").status, 200);
}

TEST(GatewayAdmission, FillAndPriorityAreBounded) {
  auto both = ParseGatewayConfig("tenants:\n  - {name: b, api_keys: [k], fill: true, priority: 3}\n", "gw.yaml");
  ASSERT_FALSE(both.ok());
  EXPECT_NE(both.status().message().find("gw.yaml:2: tenants[0].priority: a fill tenant has no priority"),
            std::string::npos)
      << both.status();
  auto low = ParseGatewayConfig("tenants:\n  - {name: b, api_keys: [k], priority: -1000000}\n", "gw.yaml");
  ASSERT_FALSE(low.ok());
  EXPECT_NE(low.status().message().find("tenants[0].priority: must be in [-999999, 1000000]"), std::string::npos)
      << low.status();
  auto word = ParseGatewayConfig("tenants:\n  - {name: b, api_keys: [k], fill: maybe}\n", "gw.yaml");
  ASSERT_FALSE(word.ok());
  EXPECT_NE(word.status().message().find("tenants[0].fill"), std::string::npos) << word.status();
}

TEST(GatewayAdmission, RecomputeLimiterShedsNewRequestsWith429) {
  GatewayConfig c;
  // One prompt token per second over the one backend: a bucket of 5 prompt tokens. The limit is
  // a fraction of the backends' nominal prefill throughput, the simulator's unit.
  auto step = perf::StepModel::Create(*perf::FindGpu(c.perf_gpu), *perf::FindModel(c.perf_model),
                                      perf::UnitLayout{.tp = c.perf_tp}, {});
  ASSERT_TRUE(step.ok()) << step.status();
  c.recompute_limit = 1 / policy::PrefillCost(*step, 8192).ThroughputTokensPerSecond();
  Harness h(1, c);
  auto cl = h.Client();
  // The first goes through on a full bucket (one larger than the bucket is never starved) and
  // leaves it in debt; the next new request is shed.
  auto first = cl.Post("/v1/completions", Completion("alpha beta gamma delta epsilon zeta eta theta", 4));
  ASSERT_TRUE(first.ok());
  EXPECT_EQ(first->status, 200) << first->body;
  auto second = cl.Post("/v1/completions", Completion("iota kappa lambda mu nu xi omicron pi rho", 4));
  ASSERT_TRUE(second.ok());
  EXPECT_EQ(second->status, 429) << second->body;
  EXPECT_NE(second->body.find("recompute_limited"), std::string::npos) << second->body;
  EXPECT_NE(net::FindHeader(second->headers, "Retry-After"), nullptr);
}

TEST(GatewayAdmission, RecomputeLimitIsBounded) {
  auto big = ParseGatewayConfig("routing:\n  recompute_limit: 101\n", "gw.yaml");
  ASSERT_FALSE(big.ok());
  EXPECT_NE(big.status().message().find("gw.yaml:2: routing.recompute_limit"), std::string::npos)
      << big.status();
  EXPECT_NE(big.status().message().find("[0, 100]"), std::string::npos) << big.status();
  auto negative = ParseGatewayConfig("routing:\n  recompute_limit: -1\n", "gw.yaml");
  EXPECT_FALSE(negative.ok());
  auto good = ParseGatewayConfig("routing:\n  recompute_limit: 0.5\n", "gw.yaml");
  ASSERT_TRUE(good.ok()) << good.status();
  EXPECT_EQ(good->recompute_limit, 0.5);
  // The old key, in tokens per second, is refused by name rather than ignored.
  auto old = ParseGatewayConfig("routing:\n  recompute_tokens_per_s: 50000\n", "gw.yaml");
  ASSERT_FALSE(old.ok());
  EXPECT_NE(old.status().message().find("recompute_tokens_per_s"), std::string::npos) << old.status();

  // The store path's bandwidth and latency are bounded too.
  auto fast = ParseGatewayConfig("routing:\n  store_load_gbps: 20000\n", "gw.yaml");
  ASSERT_FALSE(fast.ok());
  EXPECT_NE(fast.status().message().find("gw.yaml:2: routing.store_load_gbps"), std::string::npos) << fast.status();
  EXPECT_NE(fast.status().message().find("[0, 10000]"), std::string::npos) << fast.status();
  auto slow = ParseGatewayConfig("routing:\n  store_load_latency: 11s\n", "gw.yaml");
  ASSERT_FALSE(slow.ok());
  EXPECT_NE(slow.status().message().find("routing.store_load_latency"), std::string::npos) << slow.status();
  auto store = ParseGatewayConfig("routing:\n  store_load_gbps: 200\n  store_load_latency: 2ms\n", "gw.yaml");
  ASSERT_TRUE(store.ok()) << store.status();
  EXPECT_EQ(store->store_load_gbps, 200);
  EXPECT_EQ(store->store_load_latency, 2 * kMillisecond);
}

TEST(GatewayAdmission, BackendHealthDefaultsAreTheSimulatorsAndBounded) {
  auto d = ParseGatewayConfig("listen: 127.0.0.1:8000\n", "gw.yaml");
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->backend_health.eject_after_errors, policy::BackendHealthOptions{}.eject_after_errors);
  auto set = ParseGatewayConfig("health: {eject_after_errors: 7, readmit_after_successes: 4}\n", "gw.yaml");
  ASSERT_TRUE(set.ok()) << set.status();
  EXPECT_EQ(set->backend_health.eject_after_errors, 7);
  EXPECT_EQ(set->backend_health.readmit_after_passing_checks, 4);
  auto big = ParseGatewayConfig("health:\n  eject_after_errors: 1001\n", "gw.yaml");
  ASSERT_FALSE(big.ok());
  EXPECT_NE(big.status().message().find("gw.yaml:2: health.eject_after_errors"), std::string::npos) << big.status();
}

}  // namespace
}  // namespace myriad::gateway

namespace myriad::gateway {
namespace {

TEST(GatewayAdmission, ShortUncachedPromptIsServedWholeByTheDecodeBackend) {
  GatewayConfig c;
  c.disagg_min_uncached = 100000;  // every prompt is too short to be worth a hand-off
  Harness h(2, c, {BackendRole::kPrefill, BackendRole::kDecode});
  auto r = h.Client().Post("/v1/completions", Completion("short", 4));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(*net::FindHeader(r->headers, "X-Myriad-Backend"), "b1");
  EXPECT_EQ(h.gw->stats().pd_requests, 0u);
}

}  // namespace
}  // namespace myriad::gateway
