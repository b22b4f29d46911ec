#pragma once
// Fits the step model's efficiencies (perf::Calibration) to measured serving figures: a request's
// time to first token, its mean inter-token latency, or a whole batch's end-to-end latency. The
// predictions are the very StepModel the simulator steps with, so a fitted profile changes the
// simulator's step times by what the fit says. Pure: no I/O; the same samples give the same fit.
#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "perf/step_model.h"

namespace myriad::perf {

enum class FitMetric { kTtft = 0, kItl = 1, kLatency = 2, kLinearOps = 3 };
inline constexpr int kFitMetrics = 4;
const char* FitMetricName(FitMetric m);

// One measurement. kTtft: a request of `input_tokens` arrives while `concurrency - 1` others
// decode; predicted as one step holding its whole prefill and their decode tokens. kItl: the mean
// gap between a request's tokens, predicted as a decode step of `concurrency` sequences at the
// request's mean context (input + output / 2). kLatency: `concurrency` sequences of
// `input_tokens` each prefilled together, then `output_tokens - 1` decode steps (the prefill
// gives the first token): vLLM's benchmark_latency. kLinearOps: one transformer layer's GEMMs
// (QKV, output projection, gated MLP up and down) over `input_tokens` tokens on one of `layer.tp`
// GPUs, for the layer's own dimensions: a row of Vidur's mlp.csv profile.
struct LayerShape {
  int hidden = 0, ffn = 0, heads = 0, kv_heads = 0, tp = 1;
};
struct FitSample {
  FitMetric metric = FitMetric::kTtft;
  int64_t input_tokens = 0;
  int64_t output_tokens = 0;
  int64_t concurrency = 1;
  double measured_s = 0;
  bool held_out = false;  // scored, never fitted to
  LayerShape layer = {};  // kLinearOps only
};

// Marks every 4th sample of each metric (the 4th, 8th, ...) as held out.
void HoldOutEveryFourth(std::span<FitSample> samples);

// The prediction for one sample under `model` (whose Calibration is the one tried).
double PredictSeconds(const StepModel& model, const FitSample& s);

// The free parameters and their physical ranges: efficiencies 0.05..1, step overhead 0..50 ms,
// comm latency 0..1 ms. comm_latency is fitted only when the layout communicates (tp > 1 or
// ep > 1), comm_efficiency only when experts span more than a node (the NIC carries traffic).
struct FitBounds {
  double min_efficiency = 0.05, max_efficiency = 1.0;
  double max_step_overhead_s = 0.050;
  double max_comm_latency_s = 0.001;
};

struct ErrorSummary {
  int count = 0;
  double median = 0;  // of |predicted - measured| / measured
  double max = 0;
};

struct FitReport {
  Calibration fitted;
  std::vector<std::string> free_parameters;
  // Indexed by FitMetric.
  std::array<ErrorSummary, kFitMetrics> in_sample{}, out_of_sample{};
  std::array<ErrorSummary, kFitMetrics> start_in_sample{}, start_out_of_sample{};  // under `start`
  int evaluations = 0;
};

// Fits `start`'s free parameters to the samples that are not held out, minimising the mean over
// metrics of the mean squared relative error of that metric's samples (so a thousand ITLs do
// not drown three latencies). Fails if no sample is in sample or the unit cannot be built.
absl::StatusOr<FitReport> FitCalibration(const GpuSpec& gpu, const ModelSpec& model, const UnitLayout& layout,
                                         const Fabric& fabric, std::span<const FitSample> samples,
                                         const Calibration& start = {}, const FitBounds& bounds = {});

}  // namespace myriad::perf
