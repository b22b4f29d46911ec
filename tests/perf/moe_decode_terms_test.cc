// The decode step of DeepSeek-V3 at SGLang's published operating point (96 H100 blog,
// LMSYS 2025-05-05: 9 nodes EP72, 256 sequences per GPU, 2,000-token prompts), term by term,
// as docs/calibration.md tabulates it. Prints; asserts only what the pipeline must satisfy.
#include <gtest/gtest.h>

#include <cstdio>
#include <vector>

#include "perf/moe_step.h"
#include "perf/two_batch_pipeline.h"
#include "policy/eplb.h"

namespace myriad::perf {
namespace {

TEST(MoeDecodeTerms, SglangOperatingPoint) {
  auto unit = StepModel::Create(*FindGpu("H100"), *FindModel("DeepSeek-V3"),
                                {.tp = 1, .dp = 72, .ep = 72, .nodes = 9, .redundant_experts = 32},
                                Fabric{.gpus_per_node = 8, .nic_gbps = 400});
  ASSERT_TRUE(unit.ok()) << unit.status();
  const auto pop = ExpertPopularity::Zipf(58, 256, 1.0, 7);
  std::vector<double> w(pop.p.begin(), pop.p.end());
  for (double& x : w) x *= 1e6;
  auto placement = policy::RebalanceExperts(w, pop.layers, pop.experts, 288, 8, 9, 72);
  ASSERT_TRUE(placement.ok()) << placement.status();
  auto eplb = ExpertLoad::FromPlacement(pop, placement->phy2log, 288, 72);
  ASSERT_TRUE(eplb.ok()) << eplb.status();
  const ExpertLoad balanced = ExpertLoad::Balanced(58, 72);
  std::printf("EPLB over Zipf(1.0): hottest GPU %.3fx the mean (balanced 1.000x)\n", eplb->mean_imbalance());
  const ExpertLoad* loads[] = {&balanced, &*eplb};
  for (const ExpertLoad* load : loads) {
    for (int seqs : {128, 256}) {
      BatchShape b;
      b.decode_seqs = seqs;
      b.decode_context = int64_t{seqs} * 2050;
      const std::vector<BatchShape> ranks(72, b);
      const MoeStepResult r = MoeStepModel(*unit, *load, {.two_batch_overlap = false}).Step(ranks);
      std::printf("%s, %3d seqs/GPU, no overlap: per MoE layer attention+dense %4.0f us, experts %4.0f us, "
                  "dispatch+combine %4.0f us; head+overhead %.2f ms; step %.1f ms\n",
                  load == &balanced ? "balanced" : "EPLB    ", seqs, r.attention_s / 61 * 1e6, r.experts_s / 58 * 1e6,
                  r.comm_s / 58 * 1e6, r.overhead_s * 1e3, r.total_s * 1e3);
    }
    BatchShape b;
    b.decode_seqs = 256;
    b.decode_context = 256 * 2050;
    const std::vector<BatchShape> ranks(72, b);
    const MoeStepResult t = MoeStepModel(*unit, *load, {.two_batch_overlap = true}).Step(ranks);
    std::printf("%s, 256 seqs/GPU, two-batch overlap: step %.1f ms, %.0f output tok/s per node\n",
                load == &balanced ? "balanced" : "EPLB    ", t.total_s * 1e3, 72.0 * 256 / t.total_s / 9);
  }
  const auto [d, c] = unit->DispatchCombineSeconds(128, false);
  std::printf("EP72 low-latency, 128 tokens, balanced: dispatch %.0f us, combine %.0f us\n", d * 1e6, c * 1e6);
}

// The constants were fitted (perf/calibration.h) to DeepSeek's production decode with compute
// and communication added, although DeepSeek overlaps them. Its own layout stepped with the
// two-batch pipeline shows how much that fit leaves to overlap.
TEST(MoeDecodeTerms, DeepSeekProductionWithOverlap) {
  auto unit = StepModel::Create(*FindGpu("H800"), *FindModel("DeepSeek-V3"),
                                {.tp = 1, .dp = 144, .ep = 144, .nodes = 18, .redundant_experts = 32},
                                Fabric{.gpus_per_node = 8, .nic_gbps = 400});
  ASSERT_TRUE(unit.ok()) << unit.status();
  BatchShape b;
  b.decode_seqs = 128;
  b.decode_context = 128 * 4989;
  const std::vector<BatchShape> ranks(144, b);
  const ExpertLoad balanced = ExpertLoad::Balanced(58, 144);
  const double plain = MoeStepModel(*unit, balanced, {.two_batch_overlap = false}).Step(ranks).total_s;
  const double tbo = MoeStepModel(*unit, balanced, {.two_batch_overlap = true}).Step(ranks).total_s;
  std::printf("DeepSeek production layout (H800 EP144, 128 seqs/GPU, 4,989 KV), balanced experts: "
              "%.0f output tok/s per node without overlap, %.0f with the two-batch pipeline (published 14,800)\n",
              144.0 * 128 / plain / 18, 144.0 * 128 / tbo / 18);
  EXPECT_LT(tbo, plain);
}

TEST(TwoBatchPipeline, AlternationDecidesWhatHides) {
  // Compute-bound layers: the transfers hide, a layer costs both micro-batches' compute.
  std::vector<MicroBatchLayer> compute(10, {.attention = 3, .dispatch = 1, .experts = 2, .combine = 1});
  EXPECT_NEAR(TwoBatchPipelineSeconds(compute), 10 * 10 + 1, 1e-9);  // and the last combine
  // Network-bound with uneven compute: dispatch under experts, combine under attention and
  // the reverse, so a layer costs max(e,d) + max(e,c) + max(a,c) + max(a,d) in steady state,
  // above the ideal 2 x max(a + e, d + c).
  const MicroBatchLayer l{.attention = 277, .dispatch = 184, .experts = 90, .combine = 343};
  std::vector<MicroBatchLayer> ten(10, l), eleven(11, l);
  const double per_layer = TwoBatchPipelineSeconds(eleven) - TwoBatchPipelineSeconds(ten);
  EXPECT_NEAR(per_layer, 184 + 343 + 343 + 277, 1e-9);
  EXPECT_GT(per_layer, 2 * (184 + 343));
  EXPECT_DOUBLE_EQ(TwoBatchPipelineSeconds({}), 0.0);
}

}  // namespace
}  // namespace myriad::perf
