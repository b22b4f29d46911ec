// DeepEP's normal (prefill) kernels against the step model's dispatch and combine.
//
// PUBLIC_DATA.md: H800 with CX7 400 Gb/s, 4,096 tokens per GPU, hidden 7,168, top-8, FP8
// dispatch and BF16 combine; bandwidth dispatch / combine: EP8 (intranode) 153 / 158 GB/s,
// EP16 43 / 43, EP32 58 / 57, EP64 51 / 50 GB/s (the last three are "RDMA" figures).
//
// DeepEP's bandwidth is its own byte count over the kernel's time (deepseek-ai/DeepEP,
// tests/test_internode.py and tests/test_intranode.py), not bytes on a link:
//  - internode ("RDMA"): every (token, node) pair the rank's top-k reaches, its own node
//    included, times hidden x 2 bytes, times (1 + 4/128) / 2 for FP8 (values plus one FP32
//    scale per 128); the combine counts the same pairs at BF16 (hidden x 2 bytes). With the
//    test's group-limited routing (groups = nodes, min(nodes, 4) groups per token) each token
//    reaches exactly min(nodes, 4) nodes.
//  - intranode ("NVL"): the tokens the rank receives (once per destination rank, from all 8
//    ranks, its own included), at the same per-token sizes. The intranode test routes top-8
//    of 256 experts without a group limit, so a token reaches a given rank with probability
//    1 - C(224, 8) / C(256, 8).
// The check below puts those byte counts over the model's own dispatch and combine times
// (StepModel::DispatchCombineSeconds with dedup_per_node = true, the prefill path).

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "perf/step_model.h"

namespace myriad::perf {
namespace {

constexpr double kTokens = 4096;
constexpr double kFp8TokenBytesPerValue = 1.0 + 4.0 / 128;  // FP8 values plus FP32 scales
constexpr double kBf16BytesPerValue = 2.0;

struct DeepEpPoint {
  int ep;
  double dispatch_gbs;
  double combine_gbs;
};

// Probability that one token's top-8 of 256 experts includes one of a given rank's 32.
double IntranodeReachProbability() {
  double miss = 1.0;
  for (int i = 0; i < 8; ++i) miss *= (224.0 - i) / (256.0 - i);
  return 1.0 - miss;
}

TEST(StepModel, DeepEpNormalBandwidthByEpSize) {
  const DeepEpPoint points[] = {{8, 153, 158}, {16, 43, 43}, {32, 58, 57}, {64, 51, 50}};
  // DeepSeek-V3 does not fit on 8 H800, but one MoE layer's dispatch and combine depend only
  // on hidden, top-k and the group limit: EP8 uses the same model cut to one MoE layer.
  ModelSpec one_layer = *FindModel("DeepSeek-V3");
  one_layer.layers = one_layer.dense_layers + 1;
  const double tolerance = 0.25;
  std::printf("| EP | dispatch, model / DeepEP (GB/s) | combine, model / DeepEP (GB/s) | model's copies per token: NIC, NVLink; bound |\n");
  std::printf("|---:|---:|---:|---|\n");
  for (const DeepEpPoint& p : points) {
    const int gpn = 8;
    const int nodes = (p.ep + gpn - 1) / gpn;
    const ModelSpec model = p.ep <= gpn ? one_layer : *FindModel("DeepSeek-V3");
    auto m = StepModel::Create(*FindGpu("H800"), model, {.tp = 1, .dp = p.ep, .ep = p.ep, .nodes = nodes},
                               Fabric{.gpus_per_node = gpn, .nic_gbps = 400});
    ASSERT_TRUE(m.ok()) << m.status();
    const auto [dispatch_s, combine_s] = m->DispatchCombineSeconds(kTokens, /*dedup_per_node=*/true);
    const auto [nic_copies, nvl_copies] = m->AllToAllCopies(/*dedup_per_node=*/true);
    const double nic_rate = m->fabric().nic_bytes_per_s() * m->calibration().comm_efficiency;
    const bool nic_bound = nic_copies / nic_rate >= nvl_copies / m->gpu().nvlink_usable_bytes_per_s();
    // Tokens DeepEP counts per rank.
    double counted_tokens;
    if (p.ep <= gpn) {
      counted_tokens = p.ep * kTokens * IntranodeReachProbability();
    } else {
      counted_tokens = kTokens * std::min(nodes, 4);
    }
    const double dispatch_gbs = counted_tokens * model.hidden * kFp8TokenBytesPerValue / dispatch_s / 1e9;
    const double combine_gbs = counted_tokens * model.hidden * kBf16BytesPerValue / combine_s / 1e9;
    std::printf("| %d%s | %.0f / %.0f (%+.0f%%) | %.0f / %.0f (%+.0f%%) | %.2f, %.2f; %s |\n", p.ep,
                p.ep <= gpn ? " (NVLink)" : " (RDMA)", dispatch_gbs, p.dispatch_gbs,
                100 * (dispatch_gbs / p.dispatch_gbs - 1), combine_gbs, p.combine_gbs,
                100 * (combine_gbs / p.combine_gbs - 1), nic_copies, nvl_copies, nic_bound ? "NIC" : "NVLink");
    EXPECT_NEAR(dispatch_gbs, p.dispatch_gbs, tolerance * p.dispatch_gbs) << "EP" << p.ep;
    EXPECT_NEAR(combine_gbs, p.combine_gbs, tolerance * p.combine_gbs) << "EP" << p.ep;
  }
}

}  // namespace
}  // namespace myriad::perf
