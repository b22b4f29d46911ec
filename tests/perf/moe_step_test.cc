// The rank-by-rank MoE step model against SGLang's large-scale EP figures (PUBLIC_DATA.md,
// LMSYS 2025-05-05: DeepSeek-V3 on 96 H100). These are out-of-sample checks: the calibration
// constants were fitted to DeepSeek's H800 production figures only.
#include "perf/moe_step.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <vector>

#include "policy/eplb.h"

namespace myriad::perf {
namespace {

StepModel Unit(const char* gpu, int nodes, int redundant = 32) {
  auto m = StepModel::Create(*FindGpu(gpu), *FindModel("DeepSeek-V3"),
                             {.tp = 1, .dp = nodes * 8, .ep = nodes * 8, .nodes = nodes, .redundant_experts = redundant},
                             Fabric{.gpus_per_node = 8, .nic_gbps = 400});
  EXPECT_TRUE(m.ok()) << m.status();
  return *m;
}

std::vector<BatchShape> PrefillRanks(int ranks, int64_t tokens_per_rank, int64_t prompt) {
  BatchShape b;
  b.prefill_tokens = tokens_per_rank;
  b.prefill_seqs = tokens_per_rank / prompt;
  b.prefill_attended = static_cast<double>(b.prefill_seqs) * prompt * (prompt + 1) / 2.0;
  return std::vector<BatchShape>(static_cast<size_t>(ranks), b);
}

std::vector<BatchShape> DecodeRanks(int ranks, int64_t seqs, int64_t context) {
  BatchShape b;
  b.decode_seqs = seqs;
  b.decode_context = seqs * context;
  return std::vector<BatchShape>(static_cast<size_t>(ranks), b);
}

// The moving part EPLB balances: a skewed popularity (Zipf 1.0 over 256 experts per layer).
ExpertPopularity Skewed() { return ExpertPopularity::Zipf(58, 256, 1.0, 7); }

ExpertLoad Eplb(const ExpertPopularity& pop, int gpus, int nodes, int physical) {
  std::vector<double> w(pop.p.begin(), pop.p.end());
  for (double& x : w) x *= 1e6;
  auto placement = policy::RebalanceExperts(w, pop.layers, pop.experts, physical, 8, nodes, gpus);
  EXPECT_TRUE(placement.ok()) << placement.status();
  auto load = ExpertLoad::FromPlacement(pop, placement->phy2log, physical, gpus);
  EXPECT_TRUE(load.ok()) << load.status();
  return *load;
}

TEST(MoeStep, SglangPrefillPerNodeWithin20Percent) {
  StepModel unit = Unit("H100", 4);
  const auto pop = Skewed();
  MoeStepModel model(unit, Eplb(pop, 32, 4, 288), MoeOptions{.two_batch_overlap = true});
  const double targets[] = {57'674, 54'543, 50'302};  // 1K, 2K, 4K prompts
  int i = 0;
  for (int64_t prompt : {1024, 2048, 4096}) {
    const auto ranks = PrefillRanks(32, 16384, prompt);
    const double tput = 32.0 * 16384 / model.Step(ranks).total_s / 4;
    std::printf("SGLang prefill, %lld-token prompts: %.0f input tok/s per node (published %.0f)\n",
                static_cast<long long>(prompt), tput, targets[i]);
    // The bar (docs/calibration.md: +4%, +9%, +7% with SGLang's stages).
    EXPECT_NEAR(tput, targets[i], 0.2 * targets[i]);
    ++i;
  }
}

TEST(MoeStep, SglangDecodePerNodeWithin20Percent) {
  StepModel unit = Unit("H100", 9);
  const auto pop = Skewed();
  MoeStepModel model(unit, Eplb(pop, 72, 9, 288), MoeOptions{.two_batch_overlap = true});
  const auto ranks = DecodeRanks(72, 256, 2048 + 50);
  const double tput = 72.0 * 256 / model.Step(ranks).total_s / 9;
  std::printf("SGLang decode, 256 seqs/GPU: %.0f output tok/s per node (published 22,282)\n", tput);
  // The bar is 20%. The model is 10% over (26% while its two-batch overlap was
  // perfect, before it followed SGLang's stages: perf/two_batch_pipeline.h); the remaining
  // terms are in docs/calibration.md.
  EXPECT_NEAR(tput, 22'282, 0.2 * 22'282);
}

TEST(MoeStep, EplbSpeedsUpSkewedUnits) {
  for (double zipf : {0.3, 0.5, 0.7, 1.0}) {
  const auto pop = ExpertPopularity::Zipf(58, 256, zipf, 7);
  StepModel prefill_unit = Unit("H100", 4, 0);
  StepModel prefill_eplb = Unit("H100", 4, 32);
  const auto pre = PrefillRanks(32, 16384, 2048);
  const double p_none = MoeStepModel(prefill_unit, ExpertLoad::Contiguous(pop, 32), {.two_batch_overlap = true}).Step(pre).total_s;
  const double p_eplb = MoeStepModel(prefill_eplb, Eplb(pop, 32, 4, 288), {.two_batch_overlap = true}).Step(pre).total_s;
  StepModel decode_unit = Unit("H100", 9, 0);
  StepModel decode_eplb = Unit("H100", 9, 32);
  const auto dec = DecodeRanks(72, 256, 2098);
  const double d_none = MoeStepModel(decode_unit, ExpertLoad::Contiguous(pop, 72), {.two_batch_overlap = true}).Step(dec).total_s;
  const double d_eplb = MoeStepModel(decode_eplb, Eplb(pop, 72, 9, 288), {.two_batch_overlap = true}).Step(dec).total_s;
  std::printf("EPLB speed-up at Zipf %.1f: prefill %.2fx (SGLang 1.49x), decode %.2fx (SGLang 2.54x)\n",
              zipf, p_none / p_eplb, d_none / d_eplb);
  EXPECT_GT(p_none / p_eplb, 1.05);
  EXPECT_GT(d_none / d_eplb, 1.05);
  }
}

TEST(MoeStep, TwoBatchOverlapHelpsLargeBatchesAndHurtsSmallOnes) {
  StepModel unit = Unit("H100", 9);
  const ExpertLoad balanced = ExpertLoad::Balanced(58, 72);
  MoeStepModel plain(unit, balanced, {.two_batch_overlap = false});
  MoeStepModel tbo(unit, balanced, {.two_batch_overlap = true});
  const auto big = DecodeRanks(72, 256, 2098);
  const auto small = DecodeRanks(72, 32, 2098);
  const double gain_big = plain.Step(big).total_s / tbo.Step(big).total_s - 1;
  const double gain_small = plain.Step(small).total_s / tbo.Step(small).total_s - 1;
  std::printf("two-batch overlap in decode: %+.1f%% at 256 tokens/GPU (SGLang +25.5%%), %+.1f%% at 32 (SGLang -27%%)\n",
              100 * gain_big, 100 * gain_small);
  EXPECT_GT(gain_big, 0.05);
  EXPECT_LT(gain_small, 0.0);
}

TEST(MoeStep, UnevenDpBatchesAndPadding) {
  StepModel unit = Unit("H100", 9);
  const ExpertLoad balanced = ExpertLoad::Balanced(58, 72);
  auto ranks = DecodeRanks(72, 128, 2000);
  MoeStepModel padded(unit, balanced, {.dp_padding = true});
  MoeStepModel unpadded(unit, balanced, {.dp_padding = false});
  const double even = padded.Step(ranks).total_s;
  ranks[5].decode_seqs = 256;  // one rank with twice the batch is the step's pace
  ranks[5].decode_context = 256 * 2000;
  const MoeStepResult uneven = padded.Step(ranks);
  EXPECT_GT(uneven.total_s, even);
  EXPECT_GT(uneven.rank_busy_s[5], uneven.rank_busy_s[4]) << "the per-rank view shows the heavy rank";
  // Without padding the other ranks send only their own tokens, at the price of a per-step
  // overhead: cheaper when one rank is far above the rest.
  ranks.assign(72, DecodeRanks(1, 8, 2000)[0]);
  ranks[0].decode_seqs = 256;
  ranks[0].decode_context = 256 * 2000;
  EXPECT_LT(unpadded.Step(ranks).total_s, padded.Step(ranks).total_s + 0.0011);
}

TEST(MoeStep, ExpertLoadShapes) {
  const auto pop = ExpertPopularity::Zipf(3, 16, 1.2, 1);
  for (int l = 0; l < 3; ++l) {
    double sum = 0;
    for (int e = 0; e < 16; ++e) sum += pop.p[static_cast<size_t>(l) * 16 + e];
    EXPECT_NEAR(sum, 1.0, 1e-12);
  }
  EXPECT_DOUBLE_EQ(ExpertLoad::Balanced(3, 4).mean_imbalance(), 1.0);
  EXPECT_GT(ExpertLoad::Contiguous(pop, 4).mean_imbalance(), 1.2);
  EXPECT_FALSE(ExpertPopularity::FromLoads(std::vector<double>{1, -1}, 1, 2).ok());
  EXPECT_FALSE(ExpertPopularity::FromLoads(std::vector<double>{0, 0}, 1, 2).ok());
  EXPECT_FALSE(ExpertLoad::FromPlacement(pop, std::vector<int32_t>(48, 0), 16, 4).ok()) << "experts without a copy";
}

}  // namespace
}  // namespace myriad::perf

namespace myriad::perf {
namespace {

// Kimi K2 on 128 H200 (LMSYS 2025-07-17): 4 prefill nodes (224k input tok/s each at 2,000-token
// prompts) and 12 decode nodes (32k output tok/s each at a decode batch of 480 per GPU, 96
// redundant experts), with two-batch overlap. Printed for docs/calibration.md; asserted loosely.
// The blog is inconsistent: 384k decode tok/s over 12 decode nodes is 32k each, but its own
// comparison table gives 24k per node (and 56k for prefill: both figures divided by 16 nodes).
TEST(MoeStep, KimiK2OnH200) {
  auto prefill = StepModel::Create(*FindGpu("H200"), *FindModel("Kimi-K2"),
                                   {.tp = 1, .dp = 32, .ep = 32, .nodes = 4, .redundant_experts = 0},
                                   Fabric{.gpus_per_node = 8, .nic_gbps = 400});
  auto decode = StepModel::Create(*FindGpu("H200"), *FindModel("Kimi-K2"),
                                  {.tp = 1, .dp = 96, .ep = 96, .nodes = 12, .redundant_experts = 96},
                                  Fabric{.gpus_per_node = 8, .nic_gbps = 400});
  ASSERT_TRUE(prefill.ok()) << prefill.status();
  ASSERT_TRUE(decode.ok()) << decode.status();
  MoeStepModel p(*prefill, ExpertLoad::Balanced(60, 32), {.two_batch_overlap = true});
  MoeStepModel d(*decode, ExpertLoad::Balanced(60, 96), {.two_batch_overlap = true});
  const auto pre = PrefillRanks(32, 16384, 2000);
  const double p_tput = 32.0 * 16384 / p.Step(pre).total_s / 4;
  const auto dec = DecodeRanks(96, 480, 2050);
  const double d_tput = 96.0 * 480 / d.Step(dec).total_s / 12;
  std::printf("Kimi K2 on H200: prefill %.0f input tok/s per node (published 224k), decode %.0f output tok/s per node (published 32k)\n",
              p_tput, d_tput);
  EXPECT_NEAR(d_tput, 32'000, 0.2 * 32'000);
  // The published prefill figure cannot be uncached work: 224k tokens/s x 2 x 32B active
  // parameters is 1.8 PFLOP/s per GPU, 90% of the H200's dense FP8 peak before attention.
  // The model stays well below that bound.
  const double bound = 8 * FindGpu("H200")->fp8_tflops * 1e12 / (2 * FindModel("Kimi-K2")->ActiveParams());
  EXPECT_LT(p_tput, bound);
  EXPECT_GT(p_tput, 0.25 * bound);
}

}  // namespace
}  // namespace myriad::perf

namespace myriad::perf {
namespace {

TEST(MoeStep, DeadRanksTakeNoBatchNoPaddingAndNoBusyTime) {
  // Elastic EP: a unit that lost ranks 0-7 steps on the other eight; whatever a dead rank's
  // batch says is ignored, and DP padding pads to the largest live batch.
  StepModel unit = Unit("H200", 2, 256);
  MoeStepModel live(unit, ExpertLoad::Balanced(58, 16));
  MoeStepModel degraded(unit, ExpertLoad::Balanced(58, 16));
  std::vector<uint8_t> dead(16, 0);
  for (int r = 0; r < 8; ++r) dead[static_cast<size_t>(r)] = 1;
  degraded.set_dead_ranks(dead);
  EXPECT_TRUE(degraded.dead(3));
  EXPECT_FALSE(degraded.dead(8));
  auto ranks = DecodeRanks(16, 64, 3000);
  ranks[2].decode_seqs = 512;  // a dead rank's stale batch
  const MoeStepResult a = degraded.Step(ranks);
  ranks[2] = BatchShape{};
  const MoeStepResult b = degraded.Step(ranks);
  EXPECT_DOUBLE_EQ(a.total_s, b.total_s);
  for (int r = 0; r < 8; ++r) EXPECT_EQ(a.rank_busy_s[static_cast<size_t>(r)], 0.0);
  EXPECT_GT(a.rank_busy_s[8], 0.0);
  // Half the ranks send half the tokens: less routed work than the whole unit's step.
  EXPECT_LT(a.experts_s, live.Step(DecodeRanks(16, 64, 3000)).experts_s + 1e-12);
}

}  // namespace
}  // namespace myriad::perf
