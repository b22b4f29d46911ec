#pragma once
// What one engine step asks of the hardware, by the terms perf::StepModel times: the FLOPs of
// the GEMMs, LM head, attention core and routed experts, and the HBM bytes its roofline charges
// (every GPU reads its weights once a step; KV is read or written once). The simulator's
// utilisation figures divide them by the GPUs' peaks.
#include "perf/step_model.h"

namespace myriad::perf {

// Weights every token passes through: attention projections, dense FFN layers, shared experts.
double DenseParams(const ModelSpec& model);
// Routed-expert slots on one GPU: the experts and their redundant copies over the EP group.
double ExpertSlotsPerGpu(const ModelSpec& model, const UnitLayout& layout);
// The peak the weights' GEMMs run against: FP8 for 1-byte weights, else BF16 (FLOP/s).
double GemmPeakFlops(const GpuSpec& gpu, const ModelSpec& model);

struct StepWork {
  double flops = 0;
  double hbm_bytes = 0;
};

class StepWorkModel {
 public:
  explicit StepWorkModel(const StepModel& model);
  // Over the whole unit.
  StepWork Work(const BatchShape& batch) const;
  double peak_flops_per_gpu() const { return peak_flops_; }
  double peak_hbm_bytes_per_gpu() const { return peak_hbm_; }

 private:
  double dense_params_ = 0, head_params_ = 0, core_flops_per_pos_ = 0, kv_bytes_per_token_ = 0;
  double expert_flops_per_token_ = 0;  // routed experts, every MoE layer
  double weight_bytes_per_step_ = 0;   // read by all the unit's GPUs together
  double peak_flops_ = 0, peak_hbm_ = 0;
};

}  // namespace myriad::perf
