#include "perf/model.h"

#include <fmt/format.h>

#include "core/strings.h"

namespace myriad::perf {
namespace {

ModelSpec DeepSeekV3() {
  // inference/configs/config_671B.json, as quoted in PUBLIC_DATA.md.
  ModelSpec m;
  m.name = "DeepSeek-V3";
  m.layers = 61;
  m.dense_layers = 3;
  m.hidden = 7168;
  m.vocab = 129280;
  m.attention = AttentionKind::kMla;
  m.heads = 128;
  m.q_lora_rank = 1536;
  m.kv_lora_rank = 512;
  m.rope_dim = 64;
  m.nope_dim = 128;
  m.v_head_dim = 128;
  m.dense_ffn = 18432;
  m.experts = 256;
  m.top_k = 8;
  m.expert_ffn = 2048;
  m.shared_experts = 1;
  m.expert_groups = 8;
  m.topk_groups = 4;
  m.weight_bytes = 1;  // FP8
  m.kv_bytes = 2;      // BF16 latent cache
  return m;
}

ModelSpec KimiK2() {
  // moonshotai/Kimi-K2-Instruct config.json: DeepSeek-V3 architecture with 384 experts,
  // 64 heads, one dense layer, no group limit.
  ModelSpec m = DeepSeekV3();
  m.name = "Kimi-K2";
  m.dense_layers = 1;
  m.heads = 64;
  m.vocab = 163840;
  m.experts = 384;
  m.expert_groups = 1;
  m.topk_groups = 1;
  return m;
}

ModelSpec Qwen3_235B() {
  // Qwen/Qwen3-235B-A22B config.json: 94 layers, GQA 64/4 heads of 128, 128 experts top-8.
  ModelSpec m;
  m.name = "Qwen3-235B-A22B";
  m.layers = 94;
  m.dense_layers = 0;
  m.hidden = 4096;
  m.vocab = 151936;
  m.attention = AttentionKind::kGqa;
  m.heads = 64;
  m.kv_heads = 4;
  m.head_dim = 128;
  m.experts = 128;
  m.top_k = 8;
  m.expert_ffn = 1536;
  m.weight_bytes = 2;
  m.kv_bytes = 2;
  return m;
}

ModelSpec Llama31_70B() {
  // meta-llama/Llama-3.1-70B config.json.
  ModelSpec m;
  m.name = "Llama-3.1-70B";
  m.layers = 80;
  m.dense_layers = 80;
  m.hidden = 8192;
  m.vocab = 128256;
  m.attention = AttentionKind::kGqa;
  m.heads = 64;
  m.kv_heads = 8;
  m.head_dim = 128;
  m.dense_ffn = 28672;
  m.weight_bytes = 2;
  m.kv_bytes = 2;
  return m;
}

ModelSpec Llama31_8B() {
  ModelSpec m = Llama31_70B();
  m.name = "Llama-3.1-8B";
  m.layers = 32;
  m.dense_layers = 32;
  m.hidden = 4096;
  m.heads = 32;
  m.kv_heads = 8;
  m.dense_ffn = 14336;
  return m;
}

const std::vector<ModelSpec>& Catalog() {
  static const std::vector<ModelSpec> kModels = {DeepSeekV3(), KimiK2(), Qwen3_235B(),
                                                 Llama31_70B(), Llama31_8B()};
  return kModels;
}

}  // namespace

double ModelSpec::AttentionParamsPerLayer() const {
  if (attention == AttentionKind::kMla) {
    const double qk_dim = nope_dim + rope_dim;
    double q = q_lora_rank > 0 ? 1.0 * hidden * q_lora_rank + 1.0 * q_lora_rank * heads * qk_dim
                               : 1.0 * hidden * heads * qk_dim;
    double kv_down = 1.0 * hidden * (kv_lora_rank + rope_dim);
    double kv_up = 1.0 * kv_lora_rank * heads * (nope_dim + v_head_dim);
    double out = 1.0 * heads * v_head_dim * hidden;
    return q + kv_down + kv_up + out;
  }
  return 1.0 * hidden * head_dim * (2.0 * heads + 2.0 * kv_heads);
}

double ModelSpec::TotalParams() const {
  double p = layers * AttentionParamsPerLayer() + dense_layers * DenseFfnParams() + EmbeddingParams();
  p += moe_layers() * (experts + shared_experts) * ExpertParams();
  return p;
}

double ModelSpec::ActiveParams() const {
  double p = layers * AttentionParamsPerLayer() + dense_layers * DenseFfnParams() + EmbeddingParams();
  p += moe_layers() * (top_k + shared_experts) * ExpertParams();
  return p;
}

double ModelSpec::KvValuesPerTokenPerLayer() const {
  if (attention == AttentionKind::kMla) return kv_lora_rank + rope_dim;
  return 2.0 * kv_heads * head_dim;
}

double ModelSpec::AttentionCoreFlopsPerLayer(double context) const {
  if (attention == AttentionKind::kMla) {
    // Absorbed MLA: scores over (latent + rope) and values over the latent, per head.
    return 2.0 * heads * (kv_lora_rank + rope_dim + kv_lora_rank) * context;
  }
  return 2.0 * heads * head_dim * 2.0 * context;
}

absl::StatusOr<ModelSpec> FindModel(std::string_view name) {
  for (const auto& m : Catalog()) {
    if (EqualsIgnoreCase(m.name, name)) return m;
  }
  return absl::NotFoundError(
      fmt::format("unknown model '{}' (known: {})", name, Join(ModelNames(), ", ")));
}

std::vector<std::string> ModelNames() {
  std::vector<std::string> names;
  for (const auto& m : Catalog()) names.push_back(m.name);
  return names;
}

}  // namespace myriad::perf
