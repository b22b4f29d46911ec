#include "perf/step_model.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "perf/step_work.h"

namespace myriad::perf {

StepModel::StepModel(GpuSpec gpu, ModelSpec model, UnitLayout layout, Fabric fabric,
                     Calibration cal)
    : gpu_(std::move(gpu)), model_(std::move(model)), layout_(layout), fabric_(fabric), cal_(cal) {}

absl::StatusOr<StepModel> StepModel::Create(const GpuSpec& gpu, const ModelSpec& model,
                                            const UnitLayout& layout, const Fabric& fabric,
                                            const Calibration& cal) {
  if (layout.tp < 1 || layout.dp < 1 || layout.ep < 1 || layout.nodes < 1) {
    return absl::InvalidArgumentError("tp, dp, ep and nodes must each be at least 1");
  }
  if (layout.gpus() > layout.nodes * fabric.gpus_per_node) {
    return absl::InvalidArgumentError(absl::StrCat("layout needs tp*dp = ", layout.gpus(),
                                                   " GPUs but spans ", layout.nodes, " node(s) of ",
                                                   fabric.gpus_per_node, " GPUs"));
  }
  if (layout.ep > layout.gpus()) {
    return absl::InvalidArgumentError(
        absl::StrCat("ep = ", layout.ep, " exceeds the unit's ", layout.gpus(), " GPUs"));
  }
  if (!model.is_moe() && layout.ep != 1) {
    return absl::InvalidArgumentError(absl::StrCat(model.name, " is dense: ep must be 1"));
  }
  if (model.attention == AttentionKind::kGqa && model.kv_heads % std::min(layout.tp, model.kv_heads) != 0) {
    return absl::InvalidArgumentError(absl::StrCat("tp = ", layout.tp, " does not divide ",
                                                   model.kv_heads, " KV heads"));
  }
  StepModel m(gpu, model, layout, fabric, cal);
  m.Precompute();
  const double wb = model.weight_bytes;
  double per_gpu = model.layers * model.AttentionParamsPerLayer() * wb / layout.tp;
  per_gpu += model.dense_layers * model.DenseFfnParams() * wb / layout.tp;
  per_gpu += model.EmbeddingParams() * 2.0 / layout.tp;  // embeddings and LM head stay BF16
  if (model.is_moe()) {
    const double slots = ExpertSlotsPerGpu(model, layout);
    per_gpu += model.moe_layers() * (slots + model.shared_experts) * model.ExpertParams() * wb;
  }
  m.weight_bytes_per_gpu_ = per_gpu;
  const double free_per_gpu = gpu.hbm_bytes() * cal.memory_utilization - per_gpu -
                              cal.activation_reserve_gb * 1e9;
  if (free_per_gpu <= 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        model.name, " does not fit: ", std::lround(per_gpu / 1e9), " GB of weights per GPU on ",
        gpu.name, " (", gpu.hbm_gb, " GB) with tp=", layout.tp, " ep=", layout.ep));
  }
  m.kv_capacity_tokens_ =
      static_cast<int64_t>(free_per_gpu * layout.gpus() / model.KvBytesPerToken());
  return m;
}

void StepModel::Precompute() {
  const double tp = layout_.tp;
  const double wb = model_.weight_bytes;
  const double gemm_peak = GemmPeakFlops(gpu_, model_);
  const double bf16_peak = gpu_.bf16_tflops * 1e12;
  c_.gemm_rate = gemm_peak * cal_.gemm_efficiency;
  c_.head_rate = bf16_peak * cal_.gemm_efficiency;
  c_.attention_rate = bf16_peak * cal_.attention_efficiency;
  c_.hbm_rate = gpu_.hbm_bytes_per_s() * cal_.hbm_efficiency;
  c_.dense_params = DenseParams(model_);
  c_.dense_mem_s = c_.dense_params * wb / tp / c_.hbm_rate;
  c_.head_params = model_.vocab * static_cast<double>(model_.hidden);
  c_.head_mem_s = c_.head_params * 2.0 / tp / c_.hbm_rate;
  c_.core_flops_per_pos = model_.layers * model_.AttentionCoreFlopsPerLayer(1.0);
  c_.kv_bytes_per_token = model_.KvBytesPerToken();
  c_.expert_params = model_.ExpertParams();
  const double slots = ExpertSlotsPerGpu(model_, layout_);
  c_.expert_mem_s = slots * c_.expert_params * wb / c_.hbm_rate;
  c_.copies[0] = CountAllToAllCopies(false);
  c_.copies[1] = CountAllToAllCopies(true);
  c_.nic_rate = fabric_.nic_bytes_per_s() * cal_.comm_efficiency;
  c_.nvlink_rate = gpu_.nvlink_usable_bytes_per_s();
  c_.comm_latency_s = NanosToSeconds(cal_.comm_latency);
  c_.overhead_s = NanosToSeconds(cal_.step_overhead);
}

std::pair<double, double> StepModel::CountAllToAllCopies(bool dedup_per_node) const {
  const int ep = layout_.ep;
  const int gpn = fabric_.gpus_per_node;
  double intra_copies, inter_copies;
  if (ep <= gpn) {
    intra_copies = model_.top_k * (1.0 - 1.0 / ep);
    inter_copies = 0;
  } else if (dedup_per_node) {
    // DeepEP's normal kernels send a token once per destination node over RDMA and fan out
    // over NVLink there; group-limited routing caps the nodes a token reaches.
    const int nodes = (ep + gpn - 1) / gpn;
    const double reached = std::min<double>({static_cast<double>(nodes), static_cast<double>(model_.top_k),
                                             model_.topk_groups > 1 ? static_cast<double>(model_.topk_groups) : 1e9});
    inter_copies = reached * (1.0 - 1.0 / nodes);
    intra_copies = model_.top_k * (1.0 - 1.0 / ep) - inter_copies;
  } else {
    // Low-latency kernels: one RDMA write per (token, expert) not on this node.
    inter_copies = model_.top_k * (1.0 - static_cast<double>(gpn) / ep);
    intra_copies = model_.top_k * (static_cast<double>(gpn) - 1.0) / ep;
  }
  return {inter_copies, intra_copies};
}

std::pair<double, double> StepModel::DispatchCombineSeconds(double tokens_per_gpu, bool dedup_per_node) const {
  const double hidden = model_.hidden;
  // Not a structured binding: the lambda below captures these (Clang before 16 refuses that).
  const std::pair<double, double>& copies = c_.copies[dedup_per_node ? 1 : 0];
  const double inter_copies = copies.first, intra_copies = copies.second;
  // Dispatch in FP8 (1 byte per value), combine in BF16 (2 bytes): DeepSeek's choice.
  auto phase = [&](double bytes_per_value) {
    const double inter = tokens_per_gpu * inter_copies * hidden * bytes_per_value / c_.nic_rate;
    const double intra = tokens_per_gpu * intra_copies * hidden * bytes_per_value / c_.nvlink_rate;
    return c_.comm_latency_s + std::max(inter, intra);
  };
  return {phase(1.0), phase(2.0)};
}

double StepModel::AllToAllSeconds(double tokens_per_gpu, bool dedup_per_node) const {
  const auto [dispatch, combine] = DispatchCombineSeconds(tokens_per_gpu, dedup_per_node);
  return dispatch + combine;
}

StepBreakdown StepModel::Breakdown(const BatchShape& b) const {
  StepBreakdown out;
  const int64_t tokens = b.prefill_tokens + b.decode_seqs;
  if (tokens == 0) return out;
  const double tp = layout_.tp, dp = layout_.dp;
  // Each DP rank carries 1/dp of the tokens; its TP GPUs split every matrix. Each term is the
  // roofline max(flops at the achieved rate, bytes at achieved HBM bandwidth).
  const double rank_tokens = std::ceil(static_cast<double>(tokens) / dp);
  const double rank_outputs = std::ceil(static_cast<double>(b.decode_seqs + b.prefill_seqs) / dp);
  out.dense_s = std::max(2.0 * rank_tokens * c_.dense_params / tp / c_.gemm_rate, c_.dense_mem_s);
  out.dense_s += std::max(2.0 * rank_outputs * c_.head_params / tp / c_.head_rate, c_.head_mem_s);

  // Attention core: prefill is compute-bound over the attended positions; decode reads the
  // whole KV of every sequence once per step.
  const double rank_attended = (b.prefill_attended + static_cast<double>(b.decode_context)) / dp;
  const double rank_kv_bytes = static_cast<double>(b.decode_context) / dp * c_.kv_bytes_per_token +
                               static_cast<double>(b.prefill_tokens) / dp * c_.kv_bytes_per_token;
  out.attention_s = std::max(rank_attended * c_.core_flops_per_pos / tp / c_.attention_rate,
                             rank_kv_bytes / tp / c_.hbm_rate);

  if (model_.is_moe()) {
    const double gpus = layout_.gpus();
    // Routed (token, expert) pairs per GPU, balanced; hot experts are the MoE issue's concern.
    const double pairs = static_cast<double>(tokens) * model_.top_k / layout_.ep;
    out.experts_s = model_.moe_layers() *
                    std::max(2.0 * pairs * c_.expert_params / c_.gemm_rate, c_.expert_mem_s);
    if (layout_.ep > 1) {
      const bool prefill_heavy = b.prefill_tokens > b.decode_seqs;
      out.comm_s += model_.moe_layers() * AllToAllSeconds(static_cast<double>(tokens) / gpus, prefill_heavy);
    }
  }
  if (layout_.tp > 1) {
    // Two all-reduces per layer of the rank's activations (BF16), ring over NVLink.
    const double bytes = rank_tokens * model_.hidden * 2.0 * 2.0 * (tp - 1) / tp;
    out.comm_s += model_.layers * 2.0 * (c_.comm_latency_s / 2 + bytes / c_.nvlink_rate);
  }
  out.overhead_s = c_.overhead_s;
  out.total_s = out.dense_s + out.attention_s + out.experts_s + out.comm_s + out.overhead_s;
  return out;
}

Nanos StepModel::StepTime(const BatchShape& batch) const {
  return SecondsToNanos(Breakdown(batch).total_s);
}

}  // namespace myriad::perf
