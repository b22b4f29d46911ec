// The step model against DeepSeek's published production throughput (PUBLIC_DATA.md,
// "Serving-unit throughput"): ~32.2k input tok/s per prefill node without cache hits and
// ~14.8k output tok/s per decode node at batch 128 per GPU and 4,989 average KV length.
#include <gtest/gtest.h>

#include "perf/calibration.h"

namespace myriad::perf {
namespace {

TEST(Calibration, DeepSeekPrefillNodeThroughputWithin15Percent) {
  auto tput = DeepSeekPrefillTokensPerNode();
  ASSERT_TRUE(tput.ok()) << tput.status();
  EXPECT_NEAR(*tput, 32'200, 0.15 * 32'200) << "input tok/s per H800 node";
}

TEST(Calibration, DeepSeekDecodeNodeThroughputWithin15Percent) {
  auto tput = DeepSeekDecodeTokensPerNode();
  ASSERT_TRUE(tput.ok()) << tput.status();
  EXPECT_NEAR(*tput, 14'800, 0.15 * 14'800) << "output tok/s per H800 node";
}

}  // namespace
}  // namespace myriad::perf
