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
// and communication added, although DeepSeek overlaps them. Its own layout stepped with
// two-batch overlap shows how much speed that fit leaves to the overlap.
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
              "%.0f output tok/s per node without overlap, %.0f with two-batch overlap (published 14,800)\n",
              144.0 * 128 / plain / 18, 144.0 * 128 / tbo / 18);
  EXPECT_LT(tbo, plain);
}

TEST(TwoBatchPipeline, SglangDecodeStagesLeaveTheExpertsExposed) {
  // Network-bound decode layers: the dispatch hides under the shared expert and the other
  // micro-batch's attention prepare, the combine under the other's attention core, the experts
  // under nothing: 2 x (max(H + P, D) + E + max(K, C)) per layer in steady state.
  const MicroBatchLayer l{.attention_prepare = 30, .attention_core = 214, .shared_experts = 22, .experts = 88,
                          .dispatch = 206, .combine = 386};
  std::vector<MicroBatchLayer> ten(10, l), eleven(11, l);
  const double per_layer = TwoBatchPipelineSeconds(eleven, OverlapSchedule::kDecode) -
                           TwoBatchPipelineSeconds(ten, OverlapSchedule::kDecode);
  EXPECT_NEAR(per_layer, 2 * (206 + 88 + 386), 1e-9);
  // Compute-bound layers: a layer costs both micro-batches' compute.
  const MicroBatchLayer c{.attention_prepare = 100, .attention_core = 300, .shared_experts = 50, .experts = 200,
                          .dispatch = 50, .combine = 100};
  std::vector<MicroBatchLayer> c10(10, c), c11(11, c);
  EXPECT_NEAR(TwoBatchPipelineSeconds(c11, OverlapSchedule::kDecode) - TwoBatchPipelineSeconds(c10, OverlapSchedule::kDecode),
              2 * 650, 1e-9);
  EXPECT_NEAR(TwoBatchPipelineSeconds(c11, OverlapSchedule::kPrefill) - TwoBatchPipelineSeconds(c10, OverlapSchedule::kPrefill),
              2 * 650, 1e-9);
  EXPECT_DOUBLE_EQ(TwoBatchPipelineSeconds({}, OverlapSchedule::kDecode), 0.0);
}

TEST(TwoBatchPipeline, SglangPrefillStagesHideTheDispatchUnderTheOtherAttention) {
  // Prefill (delta 0): the dispatch runs under the other micro-batch's attention, the combine
  // under the other's experts and one's own shared expert. With transfers shorter than what
  // covers them, a layer costs the two micro-batches' compute alone.
  const MicroBatchLayer l{.attention_prepare = 100, .attention_core = 400, .shared_experts = 50, .experts = 500,
                          .dispatch = 450, .combine = 520};
  std::vector<MicroBatchLayer> ten(10, l), eleven(11, l);
  EXPECT_NEAR(TwoBatchPipelineSeconds(eleven, OverlapSchedule::kPrefill) -
                  TwoBatchPipelineSeconds(ten, OverlapSchedule::kPrefill),
              2 * 1050, 1e-9);
}

}  // namespace
}  // namespace myriad::perf
