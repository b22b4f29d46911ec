// The emulator's /metrics as Prometheus and vLLM's consumers read it: promtool accepts it, and
// it carries vLLM's names, types and labels.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "../test_util/promtool.h"
#include "emu/emu_server.h"
#include "net/http_client.h"

namespace myriad::emu {
namespace {

using json = nlohmann::json;

// vLLM's own names break two of promtool's style rules; the emulator keeps them because the
// gateway, the controller and every vLLM dashboard read them.
const std::vector<testing::PromtoolWaiver> kVllmWaivers = {
    {"vllm:", "metric names should not contain ':'"},
    {"vllm:iteration_tokens_total", "non-counter metrics should not have \"_total\" suffix"},
};

std::string Scrape(EmuServer& emu) {
  net::HttpClient c(net::HostPort{"127.0.0.1", emu.port()});
  auto m = c.Get("/metrics");
  EXPECT_TRUE(m.ok()) << m.status();
  return m.ok() ? m->body : "";
}

TEST(EmuMetricsTest, ExpositionPassesPromtoolWithVllmNamesTypesAndLabels) {
  EmuOptions o;
  o.engine.speed = 50;
  o.served_model_name = "emu-model";
  o.dp_ranks = 2;
  auto emu = EmuServer::Create(o);
  ASSERT_TRUE(emu.ok()) << emu.status();
  ASSERT_TRUE((*emu)->Start().ok());
  net::HttpClient c(net::HostPort{"127.0.0.1", (*emu)->port()});
  // Traffic on both ranks, streamed and not, completions and chat: every family gets samples.
  for (int rank = 0; rank < 2; ++rank) {
    for (bool stream : {false, true}) {
      const net::Headers h = {{"X-data-parallel-rank", std::to_string(rank)}};
      auto a = c.Request("POST", "/v1/completions",
                      json({{"model", "emu-model"}, {"prompt", "one two three four"}, {"max_tokens", 3},
                            {"stream", stream}}).dump(),
                      "application/json", h);
      ASSERT_TRUE(a.ok()) << a.status();
      ASSERT_EQ(a->status, 200) << a->body;
      auto b = c.Request("POST", "/v1/chat/completions",
                      json({{"model", "emu-model"}, {"messages", {{{"role", "user"}, {"content", "hi there"}}}},
                            {"max_tokens", 2}, {"stream", stream}}).dump(),
                      "application/json", h);
      ASSERT_TRUE(b.ok()) << b.status();
      ASSERT_EQ(b->status, 200) << b->body;
    }
  }
  const std::string text = Scrape(**emu);
  const std::vector<std::string> complaints = testing::PromtoolComplaints(text, kVllmWaivers);
  EXPECT_TRUE(complaints.empty()) << ::testing::PrintToString(complaints) << "\n" << text;

  for (const char* type_line : {
           "# TYPE vllm:num_requests_running gauge",
           "# TYPE vllm:num_requests_waiting gauge",
           "# TYPE vllm:kv_cache_usage_perc gauge",
           "# TYPE vllm:gpu_cache_usage_perc gauge",
           "# TYPE vllm:prefix_cache_queries_total counter",
           "# TYPE vllm:prefix_cache_hits_total counter",
           "# TYPE vllm:num_preemptions_total counter",
           "# TYPE vllm:prompt_tokens_total counter",
           "# TYPE vllm:generation_tokens_total counter",
           "# TYPE vllm:request_success_total counter",
           "# TYPE vllm:iteration_tokens_total histogram",
           "# TYPE vllm:time_to_first_token_seconds histogram",
           "# TYPE vllm:inter_token_latency_seconds histogram",
           "# TYPE vllm:time_per_output_token_seconds histogram",
           "# TYPE vllm:e2e_request_latency_seconds histogram",
           "# TYPE vllm:cache_config_info gauge",
       }) {
    EXPECT_NE(text.find(std::string(type_line) + "\n"), std::string::npos) << type_line;
  }
  // Each rank's requests are counted under its own engine label.
  for (const char* sample : {
           "vllm:request_success_total{model_name=\"emu-model\",engine=\"0\",finished_reason=\"length\"} 4\n",
           "vllm:request_success_total{model_name=\"emu-model\",engine=\"1\",finished_reason=\"length\"} 4\n",
           "vllm:time_to_first_token_seconds_count{model_name=\"emu-model\",engine=\"1\"} 4\n",
           "vllm:e2e_request_latency_seconds_count{model_name=\"emu-model\",engine=\"0\"} 4\n",
           "vllm:generation_tokens_total{model_name=\"emu-model\",engine=\"0\"} 10\n",
       }) {
    EXPECT_NE(text.find(sample), std::string::npos) << sample << text;
  }
  // Every sample but the info gauge names the model and the engine; the label values are
  // bounded (one model, the ranks).
  std::set<std::string> engines;
  size_t at = 0;
  while (at < text.size()) {
    const size_t end = text.find('\n', at);
    const std::string line = text.substr(at, end - at);
    at = end + 1;
    if (line.empty() || line[0] == '#') continue;
    EXPECT_EQ(line.rfind("vllm:", 0), 0u) << line;
    if (line.rfind("vllm:cache_config_info", 0) == 0) continue;
    EXPECT_NE(line.find("{model_name=\"emu-model\",engine=\""), std::string::npos) << line;
    const size_t e = line.find("engine=\"") + 8;
    engines.insert(line.substr(e, line.find('"', e) - e));
  }
  EXPECT_EQ(engines, (std::set<std::string>{"0", "1"}));
  (*emu)->Stop();
}

}  // namespace
}  // namespace myriad::emu
