#include "perf/step_work.h"

#include <cmath>

namespace myriad::perf {

double DenseParams(const ModelSpec& m) {
  return m.layers * m.AttentionParamsPerLayer() + m.dense_layers * m.DenseFfnParams() +
         m.moe_layers() * m.shared_experts * m.ExpertParams();
}

double ExpertSlotsPerGpu(const ModelSpec& m, const UnitLayout& layout) {
  return std::ceil(static_cast<double>(m.experts + layout.redundant_experts) / layout.ep);
}

double GemmPeakFlops(const GpuSpec& gpu, const ModelSpec& m) {
  return (m.weight_bytes <= 1.0 ? gpu.fp8_tflops : gpu.bf16_tflops) * 1e12;
}

StepWorkModel::StepWorkModel(const StepModel& model) {
  const ModelSpec& m = model.model();
  const UnitLayout& layout = model.layout();
  dense_params_ = DenseParams(m);
  head_params_ = m.vocab * static_cast<double>(m.hidden);
  core_flops_per_pos_ = m.layers * m.AttentionCoreFlopsPerLayer(1.0);
  kv_bytes_per_token_ = m.KvBytesPerToken();
  expert_flops_per_token_ = m.moe_layers() * 2.0 * m.top_k * m.ExpertParams();
  // Each DP rank's TP GPUs hold a share of the dense weights and the LM head (BF16); every GPU
  // holds its expert slots whole.
  const double per_gpu = (dense_params_ * m.weight_bytes + head_params_ * 2.0) / layout.tp +
                         m.moe_layers() * ExpertSlotsPerGpu(m, layout) * m.ExpertParams() * m.weight_bytes;
  weight_bytes_per_step_ = per_gpu * layout.gpus();
  peak_flops_ = GemmPeakFlops(model.gpu(), m);
  peak_hbm_ = model.gpu().hbm_bytes_per_s();
}

StepWork StepWorkModel::Work(const BatchShape& b) const {
  const double tokens = static_cast<double>(b.prefill_tokens + b.decode_seqs);
  if (tokens == 0) return {};
  const double outputs = static_cast<double>(b.decode_seqs + b.prefill_seqs);
  const double attended = b.prefill_attended + static_cast<double>(b.decode_context);
  return {.flops = 2.0 * tokens * dense_params_ + 2.0 * outputs * head_params_ + attended * core_flops_per_pos_ +
                   tokens * expert_flops_per_token_,
          .hbm_bytes = weight_bytes_per_step_ +
                       static_cast<double>(b.decode_context + b.prefill_tokens) * kv_bytes_per_token_};
}

}  // namespace myriad::perf
