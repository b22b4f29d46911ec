#pragma once
// A roofline model of one engine step of a serving unit: the time of a batch of prefill chunks
// and decode tokens on a unit of TP x DP GPUs with experts spread over EP GPUs. Each operator
// costs max(FLOPs / achieved FLOP/s, bytes / achieved HBM bandwidth); the MoE AllToAlls and
// the TP all-reduces cost latency plus bytes over the link that carries them. The efficiency
// factors are fitted once to DeepSeek's published production throughput (see calibration.h).
#include <cstdint>
#include <string>
#include <utility>

#include "absl/status/statusor.h"
#include "core/time.h"
#include "perf/hardware.h"
#include "perf/model.h"

namespace myriad::perf {

struct UnitLayout {
  int tp = 1;
  int dp = 1;
  int ep = 1;                 // experts spread over this many GPUs (1 for a dense model)
  int nodes = 1;              // nodes the unit spans
  int redundant_experts = 0;  // extra expert replicas per MoE layer across the EP group
  int gpus() const { return tp * dp; }
};

struct Fabric {
  int gpus_per_node = 8;
  double nic_gbps = 400;  // per GPU, Gbit/s line rate
  double nic_bytes_per_s() const { return nic_gbps / 8 * 1e9; }
};

struct Calibration {
  // Fraction of peak tensor throughput that GEMMs and attention kernels reach, and of peak HBM
  // bandwidth that memory-bound kernels reach. Fitted so that DeepSeek-V3's production units
  // (PUBLIC_DATA.md: ~32.2k uncached input tok/s per prefill node, ~14.8k output tok/s per
  // decode node on H800) come out within a few percent; see perf/calibration.h.
  double gemm_efficiency = 0.65;
  double attention_efficiency = 0.65;
  double hbm_efficiency = 0.60;
  // Fraction of NIC line rate that AllToAll reaches, and its fixed latency: DeepEP's
  // low-latency kernels at EP128 (192 us dispatch, 369 us combine for 128 tokens on 400 Gb/s)
  // give about 82% of line rate over a 25 us start-up.
  double comm_efficiency = 0.82;
  Nanos comm_latency = 25 * kMicrosecond;
  // Per step: scheduling, sampling, kernel launches not hidden by graphs.
  Nanos step_overhead = 2 * kMillisecond;
  // Fraction of HBM the engine may use (vLLM's gpu_memory_utilization) and what it keeps back
  // for activations and communication buffers, per GPU.
  double memory_utilization = 0.90;
  double activation_reserve_gb = 4.0;
};

// One step's work over the whole unit. DP ranks are assumed evenly loaded here; the MoE unit
// issue refines this per rank.
struct BatchShape {
  int64_t prefill_tokens = 0;     // tokens computed this step
  double prefill_attended = 0;    // sum over those tokens of the positions each attends to
  int64_t prefill_seqs = 0;       // sequences with a chunk in this step
  int64_t decode_seqs = 0;        // one new token each
  int64_t decode_context = 0;     // sum of their KV lengths
};

struct StepBreakdown {
  double dense_s = 0;      // attention projections, dense FFN, shared experts, LM head
  double attention_s = 0;  // attention core over the KV cache
  double experts_s = 0;    // routed experts
  double comm_s = 0;       // AllToAll and all-reduce
  double overhead_s = 0;
  double total_s = 0;
};

class StepModel {
 public:
  static absl::StatusOr<StepModel> Create(const GpuSpec& gpu, const ModelSpec& model,
                                          const UnitLayout& layout, const Fabric& fabric,
                                          const Calibration& cal = {});

  StepBreakdown Breakdown(const BatchShape& batch) const;
  Nanos StepTime(const BatchShape& batch) const;

  // Copies of each token that leave its GPU per MoE layer: {over NICs, over NVLink}. Normal
  // (prefill) kernels send a token once per destination node; low-latency (decode) kernels
  // once per expert. Computed once, at construction.
  std::pair<double, double> AllToAllCopies(bool dedup_per_node) const { return c_.copies[dedup_per_node ? 1 : 0]; }
  // One MoE layer's {dispatch, combine} time for `tokens_per_gpu` tokens on every GPU.
  std::pair<double, double> DispatchCombineSeconds(double tokens_per_gpu, bool dedup_per_node) const;

  double WeightBytesPerGpu() const { return weight_bytes_per_gpu_; }
  double KvBytesPerToken() const { return model_.KvBytesPerToken(); }
  // Tokens of KV the whole unit can hold after weights and reserves.
  int64_t KvCapacityTokens() const { return kv_capacity_tokens_; }

  const GpuSpec& gpu() const { return gpu_; }
  const ModelSpec& model() const { return model_; }
  const UnitLayout& layout() const { return layout_; }
  const Fabric& fabric() const { return fabric_; }
  const Calibration& calibration() const { return cal_; }

 private:
  StepModel(GpuSpec gpu, ModelSpec model, UnitLayout layout, Fabric fabric, Calibration cal);
  double AllToAllSeconds(double tokens_per_gpu, bool dedup_per_node) const;
  void Precompute();
  std::pair<double, double> CountAllToAllCopies(bool dedup_per_node) const;  // for AllToAllCopies

  // What a step's time needs that depends on the unit alone, computed once (a full-cluster
  // day times some 350 million steps), by the same expressions as before, so the same values.
  struct Constants {
    double gemm_rate = 0;       // peak x efficiency of the weights' GEMMs (FLOP/s)
    double head_rate = 0;       // the same in BF16 (the LM head)
    double attention_rate = 0;  // attention core, BF16
    double hbm_rate = 0;        // achieved HBM bytes/s
    double dense_params = 0, dense_mem_s = 0;
    double head_params = 0, head_mem_s = 0;
    double core_flops_per_pos = 0, kv_bytes_per_token = 0;
    double expert_params = 0, expert_mem_s = 0;
    std::pair<double, double> copies[2];  // CountAllToAllCopies(false), (true)
    double nic_rate = 0, nvlink_rate = 0, comm_latency_s = 0, overhead_s = 0;
  };

  GpuSpec gpu_;
  ModelSpec model_;
  UnitLayout layout_;
  Fabric fabric_;
  Calibration cal_;
  Constants c_;
  double weight_bytes_per_gpu_ = 0;
  int64_t kv_capacity_tokens_ = 0;
};

}  // namespace myriad::perf
