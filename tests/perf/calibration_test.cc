// The step model against DeepSeek's published production throughput (PUBLIC_DATA.md,
// "Serving-unit throughput"): ~32.2k input tok/s per prefill node without cache hits and
// ~14.8k output tok/s per decode node at batch 128 per GPU and 4,989 average KV length.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>

#include "perf/calibration.h"

namespace myriad::perf {
namespace {

TEST(Calibration, DeepSeekPrefillNodeThroughputWithin15Percent) {
  auto tput = DeepSeekPrefillTokensPerNode();
  ASSERT_TRUE(tput.ok()) << tput.status();
  RecordProperty("prefill_tokens_per_node", std::to_string(*tput));
  std::printf("DeepSeek-V3 prefill unit (4 x 8 H800, EP32): %.0f input tok/s per node (target 32,200)\n", *tput);
  EXPECT_NEAR(*tput, 32'200, 0.15 * 32'200) << "input tok/s per H800 node";
}

TEST(Calibration, DeepSeekDecodeNodeThroughputWithin15Percent) {
  auto tput = DeepSeekDecodeTokensPerNode();
  ASSERT_TRUE(tput.ok()) << tput.status();
  RecordProperty("decode_tokens_per_node", std::to_string(*tput));
  std::printf("DeepSeek-V3 decode unit (18 x 8 H800, EP144): %.0f output tok/s per node (target 14,800)\n", *tput);
  EXPECT_NEAR(*tput, 14'800, 0.15 * 14'800) << "output tok/s per H800 node";
}

}  // namespace
}  // namespace myriad::perf
