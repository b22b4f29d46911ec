#pragma once
// The model catalog: the architecture figures that decide FLOPs, weight bytes and KV bytes.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace myriad::perf {

enum class AttentionKind { kMla, kGqa };

struct ModelSpec {
  std::string name;
  int layers = 0;
  int dense_layers = 0;  // leading layers with a dense FFN (all of them for a dense model)
  int hidden = 0;
  int vocab = 0;

  AttentionKind attention = AttentionKind::kGqa;
  int heads = 0;
  int kv_heads = 0;   // GQA
  int head_dim = 0;   // GQA
  int q_lora_rank = 0, kv_lora_rank = 0, rope_dim = 0, nope_dim = 0, v_head_dim = 0;  // MLA

  int dense_ffn = 0;  // intermediate size of a dense FFN
  int experts = 0;    // routed experts per MoE layer (0: dense model)
  int top_k = 0;
  int expert_ffn = 0;
  int shared_experts = 0;
  int expert_groups = 1;   // DeepSeek's group-limited routing
  int topk_groups = 1;

  double weight_bytes = 2;  // per parameter: 1 for FP8, 2 for BF16
  double kv_bytes = 2;      // per cached value

  bool is_moe() const { return experts > 0; }
  int moe_layers() const { return is_moe() ? layers - dense_layers : 0; }

  double AttentionParamsPerLayer() const;
  double ExpertParams() const { return 3.0 * hidden * expert_ffn; }
  double DenseFfnParams() const { return 3.0 * hidden * dense_ffn; }
  double EmbeddingParams() const { return 2.0 * vocab * hidden; }  // input embedding + LM head
  double TotalParams() const;
  double ActiveParams() const;
  // Values cached per token per layer (MLA: the compressed latent plus the rope key).
  double KvValuesPerTokenPerLayer() const;
  double KvBytesPerToken() const { return KvValuesPerTokenPerLayer() * layers * kv_bytes; }
  // FLOPs of attention's score and value products for one query against `context` keys, per
  // layer. MLA is taken in its absorbed form (decode) for both phases.
  double AttentionCoreFlopsPerLayer(double context) const;
};

absl::StatusOr<ModelSpec> FindModel(std::string_view name);
std::vector<std::string> ModelNames();

}  // namespace myriad::perf
