// vLLM's exposition as the controller reads it: current and older names, per-rank values by
// the `engine` label, the inter-token histogram's sum and count.
#include "net/vllm_metrics.h"

#include <gtest/gtest.h>

namespace myriad::net {
namespace {

TEST(VllmMetrics, ReadsCurrentAndOlderNamesPerRank) {
  const std::string text =
      "# HELP vllm:num_requests_running Number of requests in model execution batches.\n"
      "# TYPE vllm:num_requests_running gauge\n"
      "vllm:num_requests_running{engine=\"0\",model_name=\"m\"} 3.0\n"
      "vllm:num_requests_running{engine=\"1\",model_name=\"m\"} 1.0\n"
      "vllm:num_requests_waiting{engine=\"0\",model_name=\"m\"} 2.0\n"
      "vllm:gpu_cache_usage_perc{engine=\"0\",model_name=\"m\"} 0.25\n"
      "vllm:kv_cache_usage_perc{engine=\"1\",model_name=\"m\"} 0.5\n"
      "vllm:generation_tokens_total{engine=\"0\",model_name=\"m\"} 100.0\n"
      "vllm:generation_tokens_total{engine=\"1\",model_name=\"m\"} 50.0\n"
      "vllm:num_preemptions_total{engine=\"0\",model_name=\"m\"} 7\n"
      "vllm:inter_token_latency_seconds_sum{engine=\"0\",model_name=\"m\"} 2.0\n"
      "vllm:inter_token_latency_seconds_count{engine=\"0\",model_name=\"m\"} 100\n"
      "vllm:time_per_output_token_seconds_sum{engine=\"1\",model_name=\"m\"} 3.0\n"
      "vllm:time_per_output_token_seconds_count{engine=\"1\",model_name=\"m\"} 50\n"
      "vllm:num_requests_running{engine=\"x\"} 10\n"        // not a rank: summed only
      "vllm:num_requests_waiting{engine=\"0\"} NaN\n"       // not a number: skipped
      "vllm:num_requests_waiting{engine=\"99999\"} 1\n"     // beyond any rank: summed only
      "vllm:request_success_total{engine=\"0\",finished_reason=\"stop\"} 4\n"
      "vllm:request_success_total{engine=\"1\",finished_reason=\"length\"} 6\n"
      "vllm:unknown_metric 5\n"
      "garbage line\n";
  const VllmScrape s = ParseVllmMetrics(text);
  EXPECT_TRUE(s.any);
  EXPECT_EQ(s.running, 14);
  EXPECT_EQ(s.waiting, 3);
  EXPECT_EQ(s.kv_usage, 0.5);
  EXPECT_EQ(s.generation_tokens, 150);
  EXPECT_EQ(s.preemptions, 7);
  EXPECT_EQ(s.finished, 10) << "every finished_reason, every rank";
  ASSERT_EQ(s.ranks.size(), 2u);
  EXPECT_EQ(s.ranks[0].running, 3);
  EXPECT_EQ(s.ranks[0].generation_tokens, 100);
  EXPECT_EQ(s.ranks[0].step_seconds_sum, 2.0);
  EXPECT_EQ(s.ranks[0].step_count, 100);
  EXPECT_EQ(s.ranks[1].step_seconds_sum, 3.0);
  EXPECT_EQ(s.ranks[1].step_count, 50);
  EXPECT_FALSE(ParseVllmMetrics("# nothing\n").any);
}

}  // namespace
}  // namespace myriad::net
