#include "perf/moe_step.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <utility>

#include "perf/two_batch_pipeline.h"

namespace myriad::perf {

MoeStepModel::MoeStepModel(const StepModel& base, ExpertLoad load, MoeOptions options)
    : base_(base), load_(std::move(load)), options_(options) {
  const ModelSpec& m = base.model();
  dense_params_per_layer_ = (m.layers * m.AttentionParamsPerLayer() + m.dense_layers * m.DenseFfnParams() +
                             m.moe_layers() * m.shared_experts * m.ExpertParams()) /
                            std::max(m.layers, 1);
  if (m.attention == AttentionKind::kMla) {
    // Absorbed MLA: the key half of the latent up-projection is applied to the query before
    // the core, the value half after it.
    const double qk = m.nope_dim + m.rope_dim;
    const double q = m.q_lora_rank > 0 ? 1.0 * m.hidden * m.q_lora_rank + 1.0 * m.q_lora_rank * m.heads * qk
                                       : 1.0 * m.hidden * m.heads * qk;
    prepare_params_ = q + 1.0 * m.hidden * (m.kv_lora_rank + m.rope_dim) + 1.0 * m.kv_lora_rank * m.heads * m.nope_dim;
  } else {
    prepare_params_ = 1.0 * m.hidden * m.head_dim * (m.heads + 2.0 * m.kv_heads);
  }
  output_params_ = m.AttentionParamsPerLayer() - prepare_params_;
  shared_params_ = m.shared_experts * m.ExpertParams();
  dense_ffn_params_ = m.DenseFfnParams();
  const int gpn = base.fabric().gpus_per_node;
  const int nodes = (base.layout().ep + gpn - 1) / gpn;
  // Rails keep traffic inside a leaf group; the share bound for other groups crosses the spine.
  double spine = 1.0;
  if (nodes > options.nodes_per_leaf && options.spine_oversubscription > 1.0) {
    const double outside = static_cast<double>(nodes - options.nodes_per_leaf) / (nodes - 1);
    spine = 1.0 + outside * (options.spine_oversubscription - 1.0);
  }
  nic_bw_ = base.fabric().nic_bytes_per_s() * base.calibration().comm_efficiency / spine;
  nvl_bw_ = base.gpu().nvlink_usable_bytes_per_s();
}

double MoeStepModel::Roofline(double flops, double peak, double eff, double bytes) const {
  return std::max(flops / (peak * eff),
                  bytes / (base_.gpu().hbm_bytes_per_s() * base_.calibration().hbm_efficiency));
}

double MoeStepModel::ExpertSeconds(double pairs, double slots) const {
  const ModelSpec& m = base_.model();
  const double peak = (m.weight_bytes <= 1.0 ? base_.gpu().fp8_tflops : base_.gpu().bf16_tflops) * 1e12;
  return Roofline(2.0 * pairs * m.ExpertParams(), peak, base_.calibration().gemm_efficiency,
                  slots * m.ExpertParams() * m.weight_bytes);
}

MoeStepResult MoeStepModel::Step(std::span<const BatchShape> ranks) const {
  MoeStepResult out;
  const ModelSpec& m = base_.model();
  const GpuSpec& gpu = base_.gpu();
  const Calibration& cal = base_.calibration();
  const double tp = base_.layout().tp;
  const double wb = m.weight_bytes;
  const double gemm_peak = (wb <= 1.0 ? gpu.fp8_tflops : gpu.bf16_tflops) * 1e12;
  const double bf16_peak = gpu.bf16_tflops * 1e12;
  const double core_per_pos = m.AttentionCoreFlopsPerLayer(1.0);
  const double kv_per_pos = m.KvValuesPerTokenPerLayer() * m.kv_bytes;
  const double slots = std::ceil(static_cast<double>(m.experts + base_.layout().redundant_experts) / base_.layout().ep);
  const double head_params = m.vocab * static_cast<double>(m.hidden);

  int64_t max_tokens = 0, prefill = 0, decode = 0;
  for (size_t r = 0; r < ranks.size(); ++r) {
    if (dead(r)) continue;
    const BatchShape& b = ranks[r];
    max_tokens = std::max(max_tokens, b.prefill_tokens + b.decode_seqs);
    prefill += b.prefill_tokens;
    decode += b.decode_seqs;
  }
  out.rank_busy_s.assign(ranks.size(), 0.0);
  if (max_tokens == 0) return out;

  // One layer's dense and attention work on rank r, for a fraction f of its batch (two-batch
  // overlap runs each half separately and reads the weights twice).
  auto rank_layer = [&](const BatchShape& b, double f) {
    const double tokens = f * static_cast<double>(b.prefill_tokens + b.decode_seqs);
    const double dense = Roofline(2.0 * tokens * dense_params_per_layer_ / tp, gemm_peak, cal.gemm_efficiency,
                                  dense_params_per_layer_ * wb / tp);
    const double attended = f * (b.prefill_attended + static_cast<double>(b.decode_context));
    const double kv = f * static_cast<double>(b.decode_context + b.prefill_tokens) * kv_per_pos;
    return dense + Roofline(attended * core_per_pos / tp, bf16_peak, cal.attention_efficiency, kv / tp);
  };

  // One layer's work split as two-batch overlap runs it (perf/two_batch_pipeline.h):
  // {projections before the core, core and output projection, shared experts, a dense FFN}.
  auto parts = [&](double tokens, double attended, double cached) -> std::array<double, 4> {
    auto gemm = [&](double params) {
      return Roofline(2.0 * tokens * params / tp, gemm_peak, cal.gemm_efficiency, params * wb / tp);
    };
    const double core =
        Roofline(attended * core_per_pos / tp, bf16_peak, cal.attention_efficiency, cached * kv_per_pos / tp);
    return {gemm(prepare_params_), core + gemm(output_params_), gemm(shared_params_), gemm(dense_ffn_params_)};
  };
  // Every part grows with a rank's tokens, attended positions and cached tokens, so the
  // slowest live rank's parts are at most those of a batch with the largest of each.
  double most_tokens = 0, most_attended = 0, most_cached = 0;

  double moe_tokens_sum = 0, moe_tokens_max = 0, head = 0;
  const double layers = m.layers;
  double slowest_layer = 0;
  for (size_t r = 0; r < ranks.size(); ++r) {
    if (dead(r)) continue;
    const BatchShape& b = ranks[r];
    const double tokens = static_cast<double>(b.prefill_tokens + b.decode_seqs);
    const double moe_tokens = options_.dp_padding ? static_cast<double>(max_tokens) : tokens;
    moe_tokens_sum += moe_tokens;
    moe_tokens_max = std::max(moe_tokens_max, moe_tokens);
    most_tokens = std::max(most_tokens, tokens);
    most_attended = std::max(most_attended, b.prefill_attended + static_cast<double>(b.decode_context));
    most_cached = std::max(most_cached, static_cast<double>(b.decode_context + b.prefill_tokens));
    const double l1 = rank_layer(b, 1.0);
    slowest_layer = std::max(slowest_layer, l1);
    const double outputs = static_cast<double>(b.decode_seqs + b.prefill_seqs);
    const double h = Roofline(2.0 * outputs * head_params / tp, bf16_peak, cal.gemm_efficiency, head_params * 2.0 / tp);
    head = std::max(head, h);
    out.rank_busy_s[r] = layers * l1 + h;
  }
  const double pairs = moe_tokens_sum * m.top_k;
  const bool ep = base_.layout().ep > 1 && m.is_moe();
  // Plain names (not a structured binding): the lambda below captures them, which Clang 14
  // does not allow for bindings.
  const std::pair<double, double> copies = base_.AllToAllCopies(prefill > decode);
  const double inter_copies = copies.first, intra_copies = copies.second;
  const double latency = NanosToSeconds(cal.comm_latency);

  // Dispatch (1 B per value) and combine (2 B) of a fraction f of the batch in layer l: the
  // bottleneck is the rank sending the most or the GPU receiving the most (incast on hot experts).
  // Returns {dispatch, combine}.
  auto comm = [&](int l, double f) -> std::pair<double, double> {
    if (!ep) return {0.0, 0.0};
    const double send_inter = f * moe_tokens_max * inter_copies * m.hidden;
    const double recv_inter = f * load_.max_share(l) * moe_tokens_sum * inter_copies * m.hidden;
    const double send_intra = f * moe_tokens_max * intra_copies * m.hidden;
    const double recv_intra = f * load_.max_share(l) * moe_tokens_sum * intra_copies * m.hidden;
    const double per_byte = std::max(std::max(send_inter, recv_inter) / nic_bw_, std::max(send_intra, recv_intra) / nvl_bw_);
    return {latency + per_byte, latency + 2.0 * per_byte};
  };

  const int moe_layers = std::min(m.moe_layers(), load_.layers());
  const int dense_layers = m.layers - moe_layers;
  double attention = dense_layers * slowest_layer, experts = 0, comm_total = 0, total = dense_layers * slowest_layer;
  // Slowest live rank, part by part: half batches in the MoE layers, the whole batch in the
  // dense layers (SGLang splits only from the first MoE layer on).
  std::array<double, 4> half{};
  if (options_.two_batch_overlap) {
    half = parts(0.5 * most_tokens, 0.5 * most_attended, 0.5 * most_cached);
    const auto whole = parts(most_tokens, most_attended, most_cached);
    total = dense_layers * (whole[0] + whole[1] + whole[3]);
  }
  const bool per_rank_experts = load_.gpus() == static_cast<int>(ranks.size());
  const double weights_read = ExpertSeconds(0, slots);
  const double per_pair = ExpertSeconds(1e6, 0) / 1e6;
  std::vector<MicroBatchLayer> halves;
  if (options_.two_batch_overlap) halves.reserve(static_cast<size_t>(std::max(moe_layers, 0)));
  for (int l = 0; l < moe_layers; ++l) {
    const double ex = ExpertSeconds(pairs * load_.max_share(l), slots);
    const auto [dispatch, combine] = comm(l, 1.0);
    attention += slowest_layer;
    experts += ex;
    comm_total += dispatch + combine;
    if (options_.two_batch_overlap) {
      // Each micro-batch's AllToAll runs under the other's compute, in the order the two take
      // turns on the compute stream (perf/two_batch_pipeline.h).
      const auto [d_half, c_half] = comm(l, 0.5);
      halves.push_back({.attention_prepare = half[0],
                        .attention_core = half[1],
                        .shared_experts = half[2],
                        .experts = ExpertSeconds(0.5 * pairs * load_.max_share(l), slots),
                        .dispatch = d_half,
                        .combine = c_half});
    } else {
      total += slowest_layer + ex + dispatch + combine;
    }
    if (per_rank_experts) {
      // ExpertSeconds is max(pairs x c, weights' read time): inlined, this loop runs for every
      // rank of every layer (18k times a step at EP320).
      for (size_t r = 0; r < ranks.size(); ++r) {
        out.rank_busy_s[r] += std::max(pairs * load_.share(l, static_cast<int>(r)) * per_pair, weights_read);
      }
    }
  }
  if (options_.two_batch_overlap) {
    total += TwoBatchPipelineSeconds(halves, prefill > decode ? OverlapSchedule::kPrefill : OverlapSchedule::kDecode);
  }
  for (size_t r = 0; r < dead_.size() && r < ranks.size(); ++r) {
    if (dead_[r] != 0) out.rank_busy_s[r] = 0;  // the per-layer loop gave it the weights' read
  }
  out.attention_s = attention;
  out.experts_s = experts;
  out.comm_s = comm_total;
  out.overhead_s = NanosToSeconds(cal.step_overhead) + head +
                   (options_.dp_padding ? 0.0 : NanosToSeconds(options_.unpadded_overhead));
  out.total_s = total + out.overhead_s;
  return out;
}

}  // namespace myriad::perf
