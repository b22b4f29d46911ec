#pragma once
// The step of a DeepSeek-class unit rank by rank: attention data-parallel on each DP rank's
// own batch; per MoE layer a dispatch AllToAll, expert compute on each GPU for the pairs routed
// to its experts, a combine AllToAll. Every AllToAll is a synchronisation point, so each layer
// costs the slowest rank's attention, then the slowest transfer (incast: the GPU receiving the
// most), then the hottest GPU's experts. DP padding and two-batch overlap are options.
#include <cstdint>
#include <span>
#include <vector>

#include "core/time.h"
#include "perf/expert_load.h"
#include "perf/step_model.h"

namespace myriad::perf {

struct MoeOptions {
  // Pad every DP rank's MoE batch to the largest (what lets engines replay one CUDA graph);
  // without it each rank sends its own tokens but the step pays `unpadded_overhead`.
  bool dp_padding = true;
  Nanos unpadded_overhead = 1 * kMillisecond;  // an assumption: no published figure
  // Split the batch into two micro-batches so one's AllToAll runs under the other's compute,
  // the two taking turns on the compute stream (perf/two_batch_pipeline.h).
  bool two_batch_overlap = false;
  // Rail-optimised fabric: nodes under one leaf group; traffic between groups crosses a
  // spine oversubscribed by this factor.
  int nodes_per_leaf = 32;
  double spine_oversubscription = 1.0;
};

struct MoeStepResult {
  double total_s = 0;
  double attention_s = 0;  // slowest rank's attention and dense parts, summed over layers
  double experts_s = 0;    // hottest GPU's experts, summed over MoE layers
  double comm_s = 0;       // dispatch + combine, summed over MoE layers
  double overhead_s = 0;
  std::vector<double> rank_busy_s;  // each DP rank's own compute (the straggler view)
};

class MoeStepModel {
 public:
  // `load.gpus()` must equal the unit's EP width and `load.layers()` its MoE layers.
  MoeStepModel(const StepModel& base, ExpertLoad load, MoeOptions options = {});

  // One BatchShape per DP rank (its own tokens).
  MoeStepResult Step(std::span<const BatchShape> ranks) const;

  const ExpertLoad& load() const { return load_; }
  // A new placement or popularity (rebalancing, drift); same shape required.
  void set_load(ExpertLoad load) { load_ = std::move(load); }
  const MoeOptions& options() const { return options_; }
  // Elastic EP: ranks marked dead (non-zero) take no batch, no DP padding and no experts' load
  // (the load must agree: ExpertLoad::FromPlacement with their slots -1). Empty: all live.
  void set_dead_ranks(std::vector<uint8_t> dead) { dead_ = std::move(dead); }
  bool dead(size_t rank) const { return rank < dead_.size() && dead_[rank] != 0; }

 private:
  struct LayerCost {
    double rank_compute;  // slowest rank, dense + attention, one layer
    double comm_fixed;    // latency part of dispatch + combine
    double comm_bytes;    // bytes of dispatch (1 B/value) + combine (2 B/value) at the bottleneck, per unit share
  };
  double Roofline(double flops, double peak, double eff, double bytes) const;
  double ExpertSeconds(double pairs, double slots) const;

  const StepModel& base_;
  ExpertLoad load_;
  MoeOptions options_;
  std::vector<uint8_t> dead_;
  double dense_params_per_layer_ = 0;
  // One layer's weights by where two-batch overlap runs them: query and latent projections
  // (before the attention core), the output side (after it), the shared experts, a dense FFN.
  double prepare_params_ = 0, output_params_ = 0, shared_params_ = 0, dense_ffn_params_ = 0;
  double inter_copies_ = 0, intra_copies_ = 0;  // per token per layer
  double nic_bw_ = 0, nvl_bw_ = 0;
};

}  // namespace myriad::perf
