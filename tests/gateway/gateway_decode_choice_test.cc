// P/D: the gateway picks the decode engine from its own hand-offs (policy/decode_load.h), the
// information the simulator ranks decode units by too: sequences handed over and not finished,
// then their KV (prompt + output tokens). Not from the engines' scraped metrics.
#include <algorithm>
#include <string>
#include <vector>

#include "gateway_test_util.h"

namespace myriad::gateway {
namespace {

using namespace gwtest;

TEST(GatewayDecodeChoice, ATieOnSequencesGoesToTheEngineHandedTheLeastKv) {
  Harness h(3, GatewayConfig{}, {BackendRole::kPrefill, BackendRole::kDecode, BackendRole::kDecode});
  // The decode engines hold what they are handed: nothing finishes while the gateway hands out.
  h.emus[1]->engine().SetHung(true);
  h.emus[2]->engine().SetHung(true);
  net::AsyncHttpClient client;
  std::mutex mu;
  std::condition_variable cv;
  int done = 0;
  auto send = [&](const std::string& body) {
    net::CallRequest req;
    req.server = net::HostPort{"127.0.0.1", h.gw->port()};
    req.target = "/v1/completions";
    req.body = body;
    client.Start(req, {.on_header = nullptr, .on_data = nullptr, .on_done = [&](absl::Status, net::CallStage) {
                         std::lock_guard l(mu);
                         ++done;
                         cv.notify_all();
                       }});
  };
  // Waits (boundedly) for the gateway's n-th hand-off.
  auto handed = [&](uint64_t n) {
    for (int i = 0; i < 2000 && h.gw->stats().pd_requests < n; ++i) std::this_thread::sleep_for(5ms);
    return h.gw->stats().pd_requests;
  };
  send(Completion(Words(300, 1), 1000, true));  // much KV: a long prompt and a long answer
  ASSERT_EQ(handed(1), 1u);
  send(Completion(Words(20, 2), 4, true));  // little KV, to the other engine (no sequence yet)
  ASSERT_EQ(handed(2), 2u);
  send(Completion(Words(30, 3), 4, true));  // one sequence on each: to the one with less KV
  ASSERT_EQ(handed(3), 3u);
  h.emus[1]->engine().SetHung(false);
  h.emus[2]->engine().SetHung(false);
  {
    std::unique_lock l(mu);
    ASSERT_TRUE(cv.wait_for(l, 30s, [&] { return done == 3; }));
  }
  // The access log's lines come in the order the answers ended: tell them by prompt size.
  std::vector<json> lines;
  for (size_t n = 1; n <= 3; ++n) lines.push_back(h.RequestLog(n));
  std::sort(lines.begin(), lines.end(), [](const json& a, const json& b) {
    return a["input_tokens_est"].get<int64_t>() > b["input_tokens_est"].get<int64_t>();
  });
  for (const json& j : lines) ASSERT_EQ(j["status"], 200) << j;
  const std::string longest = lines[0]["decode_backend"], short_first = lines[2]["decode_backend"],
                    short_second = lines[1]["decode_backend"];
  EXPECT_NE(longest, short_first);
  EXPECT_EQ(short_second, short_first) << lines[0] << lines[1] << lines[2];
}

}  // namespace
}  // namespace myriad::gateway
