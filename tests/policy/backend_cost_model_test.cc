// The learned cost model against synthetic backends whose true costs are known: a CPU engine
// behind a GPU prior 100x too fast, with noise, stalls and a change of speed.
#include "policy/backend_cost_model.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "core/rng.h"
#include "perf/step_model.h"

namespace myriad::policy {
namespace {

// The truth: llama.cpp-like on CPU, 0.75 ms per uncached token, 0.01 ms per cached one.
constexpr CostCoefficients kCpu{.fixed_s = 0.020, .per_uncached_s = 0.75e-3, .per_cached_s = 0.01e-3,
                                .per_queued_s = 0.4e-3};
// What the operator configured: a GPU, 100x faster per uncached token, and shaped otherwise
// (relatively more fixed overhead, cheaper cache hits, one queue per token).
PrefillCost GpuPrior() { return PrefillCost::Linear(2e-3, 0.75e-5, 0.005e-5, 0.75e-5, 0); }

CostSample Draw(Rng& rng, const CostCoefficients& truth, double noise = 0.05) {
  CostSample s;
  s.uncached = 50 + static_cast<int64_t>(rng.Below(3000));
  s.cached = rng.Bernoulli(0.5) ? static_cast<int64_t>(rng.Below(4000)) : 0;
  s.queued = rng.Bernoulli(0.3) ? static_cast<int64_t>(rng.Below(6000)) : 0;
  s.seconds = truth.Predict(s.uncached, s.cached, s.queued) * (1 + noise * (2 * rng.Uniform() - 1));
  return s;
}

double RelError(double got, double want) { return std::abs(got - want) / want; }

void ExpectNear(const CostCoefficients& got, const CostCoefficients& want, double tol) {
  EXPECT_LT(RelError(got.per_uncached_s, want.per_uncached_s), tol) << got.per_uncached_s;
  EXPECT_LT(RelError(got.per_queued_s, want.per_queued_s), tol) << got.per_queued_s;
  // The cached and fixed terms are small next to the rest: judged by what they add to a
  // typical request (2,000 cached tokens; 1,000 uncached).
  EXPECT_LT(std::abs(got.per_cached_s - want.per_cached_s) * 2000, tol * want.Predict(1000, 2000, 0))
      << got.per_cached_s;
  EXPECT_LT(std::abs(got.fixed_s - want.fixed_s), tol * want.Predict(1000, 0, 0)) << got.fixed_s;
}

TEST(BackendCostModelTest, WithoutSamplesItPricesExactlyAsTheConfiguredModel) {
  auto step = perf::StepModel::Create(*perf::FindGpu("H100"), *perf::FindModel("Llama-3.1-8B"), {.tp = 1}, {});
  ASSERT_TRUE(step.ok());
  const PrefillCost prior(*step, 8192);
  BackendCostModel m(prior);
  EXPECT_EQ(m.samples(), 0u);
  for (int64_t n : {1, 500, 5000, 30000}) {
    EXPECT_EQ(m.cost().PrefillSeconds(n, 1000), prior.PrefillSeconds(n, 1000));
    EXPECT_EQ(m.cost().QueueSeconds(n), prior.QueueSeconds(n));
  }
  // Its line through the prior, reported before any sample, is the prior's chord.
  EXPECT_NEAR(m.coefficients().Predict(2048, 0, 0), prior.PrefillSeconds(2048, 0), 1e-12);
  EXPECT_NEAR(m.coefficients().Predict(0, 0, 2048) - m.coefficients().fixed_s, prior.QueueSeconds(2048), 1e-12);
}

TEST(BackendCostModelTest, ConvergesToACpuBackendBehindAGpuPriorWithinAHundredSamples) {
  BackendCostModel m(GpuPrior());
  Rng rng(7);
  for (int i = 0; i < 100; ++i) m.Observe(Draw(rng, kCpu));
  ExpectNear(m.coefficients(), kCpu, 0.10);
  // What the router reads: a 2,000-token uncached prompt on an idle backend, ~1.5 s.
  const double t = m.cost().PrefillSeconds(2000, 0) + m.cost().QueueSeconds(0);
  EXPECT_LT(RelError(t, kCpu.Predict(2000, 0, 0)), 0.05) << t;
}

TEST(BackendCostModelTest, OutliersAreClippedNotLearned) {
  // 5% of first tokens come 20x late (a stall, a request stuck behind a long one) and 5% 10x
  // early (a prefix cached where the router expected none).
  auto run = [](double clip) {
    BackendCostModel m(GpuPrior(), {.clip = clip});
    Rng rng(11);
    for (int i = 0; i < 400; ++i) {
      CostSample s = Draw(rng, kCpu);
      const double u = rng.Uniform();
      if (u < 0.05) s.seconds *= 20;
      else if (u < 0.10) s.seconds /= 10;
      m.Observe(s);
    }
    return m;
  };
  const BackendCostModel robust = run(4);
  ExpectNear(robust.coefficients(), kCpu, 0.10);
  EXPECT_GT(robust.clipped(), 20u);
  // Without clipping, weighting each sample by the larger of its time and its prediction
  // still bounds a stall's pull; the clipping bounds what is left.
  ExpectNear(run(1e12).coefficients(), kCpu, 0.15);
}

TEST(BackendCostModelTest, FollowsABackendThatSlowsDown) {
  BackendCostModel m(GpuPrior(), {.window = 128});
  Rng rng(3);
  for (int i = 0; i < 300; ++i) m.Observe(Draw(rng, kCpu));
  const CostCoefficients slower{.fixed_s = 0.05, .per_uncached_s = 2e-3, .per_cached_s = 0.03e-3,
                                .per_queued_s = 1e-3};
  for (int i = 0; i < 300; ++i) m.Observe(Draw(rng, slower));
  ExpectNear(m.coefficients(), slower, 0.10);
}

TEST(BackendCostModelTest, TermsWithoutDataScaleWithTheLearnedSpeed) {
  // Only idle, uncached samples: the cached and queued terms keep the prior's ratio to the
  // uncached one, so a backend 100x slower than configured also queues 100x slower.
  BackendCostModel m(GpuPrior());
  Rng rng(5);
  for (int i = 0; i < 100; ++i) {
    CostSample s = Draw(rng, kCpu);
    s.cached = s.queued = 0;
    s.seconds = kCpu.Predict(s.uncached, 0, 0);
    m.Observe(s);
  }
  EXPECT_LT(RelError(m.coefficients().per_uncached_s, kCpu.per_uncached_s), 0.02);
  EXPECT_LT(RelError(m.coefficients().per_queued_s, kCpu.per_uncached_s), 0.02);
  EXPECT_LT(RelError(m.coefficients().per_cached_s, kCpu.per_uncached_s * 0.005 / 0.75), 0.02);
}

TEST(BackendCostModelTest, CoefficientsNeverGoNegative) {
  // Cache hits that look like they save more than they cost: the fit holds the term at zero.
  BackendCostModel m(GpuPrior());
  for (int i = 0; i < 50; ++i) {
    const int64_t cached = (i % 5) * 1000;
    m.Observe({.uncached = 1000, .cached = cached, .queued = 0,
               .seconds = 1.0 - 1e-4 * static_cast<double>(cached)});
  }
  const CostCoefficients& c = m.coefficients();
  EXPECT_EQ(c.per_cached_s, 0.0);
  EXPECT_GE(c.fixed_s, 0.0);
  EXPECT_GE(c.per_uncached_s, 0.0);
  EXPECT_GE(c.per_queued_s, 0.0);
}

TEST(BackendCostModelTest, MemoryIsBoundedByTheWindowAndBadSamplesAreIgnored) {
  BackendCostModel m(GpuPrior(), {.window = 64});
  Rng rng(9);
  for (int i = 0; i < 10000; ++i) m.Observe(Draw(rng, kCpu));
  EXPECT_EQ(m.window_size(), 64u);
  EXPECT_EQ(m.samples(), 10000u);
  const CostCoefficients before = m.coefficients();
  m.Observe({.uncached = 100, .seconds = std::nan("")});
  m.Observe({.uncached = 100, .seconds = -1});
  m.Observe({.uncached = 100, .seconds = INFINITY});
  EXPECT_EQ(m.samples(), 10000u);
  EXPECT_EQ(m.coefficients().per_uncached_s, before.per_uncached_s);
  // Out-of-range windows are brought within bounds.
  EXPECT_EQ(BackendCostModel(GpuPrior(), {.window = 1 << 30}).window_size(), 0u);
  BackendCostModel huge(GpuPrior(), {.window = 1 << 30});
  for (int i = 0; i < kMaxCostWindow + 10; ++i) huge.Observe(Draw(rng, kCpu));
  EXPECT_EQ(huge.window_size(), static_cast<size_t>(kMaxCostWindow));
}

TEST(BackendCostModelTest, SameSamplesSameFit) {
  BackendCostModel a(GpuPrior()), b(GpuPrior());
  Rng ra(21), rb(21);
  for (int i = 0; i < 1000; ++i) {
    a.Observe(Draw(ra, kCpu));
    b.Observe(Draw(rb, kCpu));
  }
  EXPECT_EQ(a.coefficients().fixed_s, b.coefficients().fixed_s);
  EXPECT_EQ(a.coefficients().per_uncached_s, b.coefficients().per_uncached_s);
  EXPECT_EQ(a.coefficients().per_cached_s, b.coefficients().per_cached_s);
  EXPECT_EQ(a.coefficients().per_queued_s, b.coefficients().per_queued_s);
  EXPECT_EQ(a.clipped(), b.clipped());
}

// A llama-server of 2 slots: a request that finds both taken waits for one to finish (here
// 0.6 s on average per request ahead). Few samples wait, and they are long ones, which weigh
// little against the short cached ones (1/T^2): the term is still learned from them.
TEST(BackendCostModelTest, LearnsTheWaitForASlotFromTheFewSamplesThatWaited) {
  CostCoefficients truth = kCpu;
  truth.per_slot_wait_s = 0.6;
  BackendCostModel m(GpuPrior());
  Rng rng(17);
  int waited = 0;
  for (int i = 0; i < 300; ++i) {
    CostSample s = Draw(rng, truth);
    s.slot_waits = rng.Bernoulli(0.12) ? 1 + static_cast<int64_t>(rng.Below(2)) : 0;
    waited += s.slot_waits > 0;
    s.seconds = truth.Predict(s.uncached, s.cached, s.queued, s.slot_waits) * (1 + 0.05 * (2 * rng.Uniform() - 1));
    m.Observe(s);
  }
  ASSERT_GT(waited, 20);
  ASSERT_LT(waited, 60);
  EXPECT_LT(RelError(m.coefficients().per_slot_wait_s, truth.per_slot_wait_s), 0.15) << m.coefficients().per_slot_wait_s;
  ExpectNear(m.coefficients(), truth, 0.10);
  EXPECT_NEAR(m.cost().SlotWaitSeconds(2), 2 * m.coefficients().per_slot_wait_s, 1e-12);
  // Without a sample that waited, the term stays at the prior's (a batching GPU: none).
  BackendCostModel never(GpuPrior());
  for (int i = 0; i < 100; ++i) never.Observe(Draw(rng, kCpu));
  EXPECT_EQ(never.coefficients().per_slot_wait_s, 0.0);
}

}  // namespace
}  // namespace myriad::policy
