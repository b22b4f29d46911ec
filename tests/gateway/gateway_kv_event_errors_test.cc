// KV-event batches that fail: an engine (here a real ZMQ publisher the test drives) sending
// garbage is counted by reason on /metrics, its batches are not counted as applied, and the log
// gets at most one line per publisher per interval, the next line counting those held back.
#include "gateway_test_util.h"

#include "../test_util/promtool.h"
#include "net/kv_event_publisher.h"

namespace myriad::gateway {
namespace {

using namespace gwtest;

// The sample line of `sample` (name and labels), not its HELP or TYPE line.
std::string MetricLine(const std::string& text, const std::string& sample) {
  const size_t at = text.find("\n" + sample + " ");
  if (at == std::string::npos) return "(no " + sample + ")";
  return text.substr(at + 1, text.find('\n', at + 1) - at - 1);
}

TEST(GatewayKvEventErrors, CountedByReasonNotAppliedAndLoggedRateLimitedPerPublisher) {
  net::KvEventPublisherOptions po;
  po.endpoint = "tcp://127.0.0.1:*";
  po.replay_endpoint = "tcp://127.0.0.1:*";
  auto pub = net::KvEventPublisher::Create(po);
  ASSERT_TRUE(pub.ok()) << pub.status();
  GatewayConfig c = EventsOnlyConfig();
  c.kv_block_size = 16;
  BackendConfig b;
  b.name = "noisy";
  b.url = "http://127.0.0.1:9";  // never asked: the test reads metrics and the log only
  b.model = "emu-model";
  b.kv_events = (*pub)->endpoint();
  b.kv_replay = (*pub)->replay_endpoint();
  c.backends.push_back(b);
  auto clock = std::make_shared<ManualClock>();
  auto gw = Gateway::Create(c, clock);
  ASSERT_TRUE(gw.ok()) << gw.status();
  std::mutex mu;
  std::vector<json> errors;
  (*gw)->set_access_log([&](const std::string& line) {
    json j = json::parse(line);
    std::lock_guard l(mu);
    if (j.value("event", "") == "kv_event_error") errors.push_back(j);
  });
  ASSERT_TRUE((*gw)->Start().ok());
  auto wait_for = [&](auto done) {
    for (int i = 0; i < 1000 && !done((*gw)->kv_event_stats()); ++i) std::this_thread::sleep_for(5ms);
    return done((*gw)->kv_event_stats());
  };
  // One good batch first, so the subscriber is known to be connected.
  ASSERT_TRUE((*pub)->Publish(KvEventBatch{}).ok());
  ASSERT_TRUE(wait_for([](const policy::KvEventIndexerStats& s) { return s.batches == 1; }));

  const std::vector<uint8_t> garbage = {0xc1, 0xff, 0x00, 0x13};  // 0xc1: never valid msgpack
  for (int i = 0; i < 5; ++i) ASSERT_TRUE((*pub)->PublishPayload(garbage).ok());
  ASSERT_TRUE(wait_for([](const policy::KvEventIndexerStats& s) { return s.decode_errors == 5; }));
  clock->Advance(kKvEventLogInterval);
  // A batch that decodes but whose event the index cannot take (another block size).
  ASSERT_TRUE((*pub)->Publish(KvEventBatch{.events = {BlockStored{.block_hashes = {1},
                                                                  .token_ids = std::vector<uint32_t>(8, 1),
                                                                  .block_size = 8}}})
                  .ok());
  ASSERT_TRUE(wait_for([](const policy::KvEventIndexerStats& s) { return s.invalid_events == 1; }));
  ASSERT_TRUE((*pub)->PublishPayload(garbage).ok());  // within the interval: held back
  ASSERT_TRUE(wait_for([](const policy::KvEventIndexerStats& s) { return s.decode_errors == 6; }));
  // Events that decode but change nothing are no error (no log line), but are counted: a
  // block whose parent the index never saw, and a medium the backend has no holder for.
  ASSERT_TRUE((*pub)->Publish(KvEventBatch{.events = {BlockStored{.block_hashes = {2},
                                                                  .parent_block_hash = 77,
                                                                  .token_ids = std::vector<uint32_t>(16, 1),
                                                                  .block_size = 16},
                                                      BlockRemoved{.block_hashes = {3}, .medium = "DISK"}}})
                  .ok());
  ASSERT_TRUE(wait_for([](const policy::KvEventIndexerStats& s) { return s.orphans == 1 && s.unknown_medium == 1; }));

  {
    std::lock_guard l(mu);
    ASSERT_EQ(errors.size(), 2u) << ::testing::PrintToString(errors);
    EXPECT_EQ(errors[0]["source"], "noisy/dp0");
    EXPECT_EQ(errors[0]["reason"], "decode");
    EXPECT_EQ(errors[0]["seq"], 1);
    EXPECT_EQ(errors[0]["suppressed"], 0);
    EXPECT_FALSE(errors[0]["error"].get<std::string>().empty());
    EXPECT_EQ(errors[1]["reason"], "invalid_event");
    EXPECT_NE(errors[1]["error"].get<std::string>().find("block_size"), std::string::npos) << errors[1];
    EXPECT_EQ(errors[1]["suppressed"], 4);  // the four garbage batches after the first
  }
  auto m = net::HttpClient(net::HostPort{"127.0.0.1", (*gw)->port()}).Get("/metrics");
  ASSERT_TRUE(m.ok());
  const std::string& text = m->body;
  EXPECT_EQ(MetricLine(text, R"(myriad_gateway_kv_event_errors_total{reason="decode"})"),
            R"(myriad_gateway_kv_event_errors_total{reason="decode"} 6)");
  EXPECT_EQ(MetricLine(text, R"(myriad_gateway_kv_event_errors_total{reason="invalid_event"})"),
            R"(myriad_gateway_kv_event_errors_total{reason="invalid_event"} 1)");
  EXPECT_EQ(MetricLine(text, R"(myriad_gateway_kv_event_errors_total{reason="unknown_event"})"),
            R"(myriad_gateway_kv_event_errors_total{reason="unknown_event"} 0)");
  EXPECT_EQ(MetricLine(text, R"(myriad_gateway_kv_event_dropped_total{reason="orphan"})"),
            R"(myriad_gateway_kv_event_dropped_total{reason="orphan"} 1)");
  EXPECT_EQ(MetricLine(text, R"(myriad_gateway_kv_event_dropped_total{reason="unknown_medium"})"),
            R"(myriad_gateway_kv_event_dropped_total{reason="unknown_medium"} 1)");
  EXPECT_EQ(MetricLine(text, R"(myriad_gateway_kv_event_dropped_total{reason="other_group"})"),
            R"(myriad_gateway_kv_event_dropped_total{reason="other_group"} 0)");
  EXPECT_EQ(MetricLine(text, "myriad_gateway_kv_event_recalled_parents_total"),
            "myriad_gateway_kv_event_recalled_parents_total 0");
  // Applied: the empty batch, the one with the refused event and the one whose events were
  // dropped; not the six lost ones.
  EXPECT_EQ(MetricLine(text, "myriad_gateway_kv_event_batches_total"), "myriad_gateway_kv_event_batches_total 3");
  const std::vector<std::string> complaints = myriad::testing::PromtoolComplaints(text);
  EXPECT_TRUE(complaints.empty()) << ::testing::PrintToString(complaints);
  (*gw)->Stop();
}

}  // namespace
}  // namespace myriad::gateway
