// policy::PrefillCost, the router's closed form of the step model, against hand calculations.
#include "policy/prefill_cost.h"

#include <gtest/gtest.h>

#include "perf/step_model.h"

namespace myriad::policy {
namespace {

perf::StepModel Model(const char* gpu, const char* model, perf::UnitLayout layout, const perf::Calibration& cal = {}) {
  return perf::StepModel::Create(*perf::FindGpu(gpu), *perf::FindModel(model), layout, perf::Fabric{}, cal).value();
}

TEST(PrefillCost, Llama70bOnTp4ByHand) {
  // Llama-3.1-70B (BF16) on one TP4 unit of H100 (989 TFLOP/s BF16, 3.35 TB/s, NVLink 450 GB/s
  // a direction of which 80% usable), a calibration written out here rather than the built-in
  // one (which moves when it is refitted): GEMMs and attention at 65% of peak, HBM at 60%, 2 ms
  // a step, 25 us a collective; chunks of 8192 tokens.
  perf::Calibration cal;
  cal.gemm_efficiency = cal.attention_efficiency = 0.65;
  cal.hbm_efficiency = 0.60;
  cal.step_overhead = 2 * kMillisecond;
  cal.comm_efficiency = 0.82;
  cal.comm_latency = 25 * kMicrosecond;
  const perf::StepModel m = Model("H100", "Llama-3.1-70B", {.tp = 4, .dp = 1, .ep = 1, .nodes = 1}, cal);
  const PrefillCost cost(m, 8192);
  // Per token:
  //  GEMMs: 2 FLOPs x 68.45e9 dense parameters (80 x (8192 x 128 x 144 attention + 3 x 8192 x
  //         28672 FFN)) / 4 GPUs / (989e12 x 0.65)                                 = 53.24 us
  //         (35.6 us at full efficiency: the brief's ~35 us)
  //  TP all-reduces: 80 layers x 2 x 8192 x 2 B x 2 x 3/4 / 360e9 B/s            = 10.92 us
  //         and their latency, 160 x 12.5 us a step, over 8192 tokens              =  0.24 us
  //  LM head (memory-bound, 128256 x 8192 x 2 B / 4 / 2.01e12 a step) / 8192       =  0.03 us
  //  KV written: 327680 B / 4 / 2.01e12                                            =  0.04 us
  //                                                                            total 64.48 us
  //  Attention: 80 x 2 x 64 x 128 x 2 FLOPs / 4 / (989e12 x 0.65) per position   = 1.0195 ns
  // A 2000-token prompt: 2 ms + 2000 x 64.48 us + 1.0195 ns x 2000 x 2000 / 2     = 133.0 ms
  const double per_token = 53.24e-6 + 10.92e-6 + 0.24e-6 + 0.03e-6 + 0.04e-6;
  const double per_position = 80 * 2.0 * 64 * 128 * 2 / 4 / (989e12 * 0.65);
  EXPECT_NEAR(cost.PrefillSeconds(2000, 0), 2e-3 + 2000 * per_token + per_position * 2000 * 2000 / 2, 0.5e-3);
  // So about 66 us a token at 1000-2000 tokens, not ~2 us: that figure was a misread (a unit's
  // rate over 32 DP ranks, as DeepSeek-V3's prefill units have, is ~1.8 us a token).
  const double slope = (cost.PrefillSeconds(2000, 0) - cost.PrefillSeconds(1000, 0)) / 1000;
  EXPECT_NEAR(slope, per_token + per_position * 1500, 0.2e-6);
  // A cached prefix costs only the attention over it.
  EXPECT_NEAR(cost.PrefillSeconds(1000, 4000) - cost.PrefillSeconds(1000, 0), per_position * 1000 * 4000, 1e-6);
  // A busy unit's full chunks, their own attention included (~4.2 us a token at 8192).
  EXPECT_NEAR(1 / cost.ThroughputTokensPerSecond(), per_token + per_position * 8193 / 2 + 2e-3 / 8192, 1e-6);
}

TEST(PrefillCost, AgreesWithTheStepModelItIsReducedFrom) {
  // A prompt of n tokens on one rank while every other rank carries one like it: what the
  // estimate stands for. It used to charge a prompt's attention over itself twice (once in the
  // per-token term, taken from a full chunk's step, once in the attention term): 1.6-2.3x the
  // step model's time on DeepSeek-V3 (MLA attention is a large share of its prefill).
  struct Case {
    const char* gpu;
    const char* model;
    perf::UnitLayout layout;
    int64_t chunk;
  };
  for (const Case& c : {Case{"H100", "Llama-3.1-70B", {.tp = 4, .dp = 1, .ep = 1, .nodes = 1}, 8192},
                        Case{"H200", "DeepSeek-V3", {.tp = 1, .dp = 32, .ep = 32, .nodes = 4, .redundant_experts = 32}, 16384}}) {
    const perf::StepModel m = Model(c.gpu, c.model, c.layout);
    const PrefillCost cost(m, c.chunk);
    const int64_t dp = c.layout.dp;
    for (int64_t n : {int64_t{500}, int64_t{2000}, c.chunk}) {
      const perf::BatchShape b{.prefill_tokens = n * dp,
                               .prefill_attended = static_cast<double>(dp) * n * (n + 1) / 2,
                               .prefill_seqs = dp};
      const double step = NanosToSeconds(m.StepTime(b));
      EXPECT_NEAR(cost.PrefillSeconds(n, 0) / step, 1.0, 0.06) << c.model << " n=" << n;
    }
  }
}

}  // namespace
}  // namespace myriad::policy
