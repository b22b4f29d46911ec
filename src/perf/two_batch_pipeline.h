#pragma once
// Two-batch overlap as SGLang runs it (python/sglang/srt/operations.py and
// operations_strategy.py, the implementation behind LMSYS's 2025-05-05 96-H100 results and the
// 2025-07-17 Kimi K2 ones): each MoE layer of a micro-batch is a list of operations cut into
// stages by yield points; micro-batch A runs `delta` stages alone, then A and B take one stage
// each in turn on the one compute stream, then B finishes. A transfer is issued inside one
// stage and waited for at the start of a later one of the same micro-batch, so it hides only
// under the stages that the order puts in between. Low-latency (decode) transfers hold no SMs
// while in flight (DeepSeek profile-data README); two in flight share the NIC and are served in
// turn.
//
// Decode (`_compute_moe_deepseek_blog_decode`, delta 2), stages per layer:
//   [attention prepare] [attention core, gate] [issue dispatch, shared expert]
//   [wait dispatch, experts, issue combine] [wait combine]
// so the dispatch hides under the shared expert and the other micro-batch's attention prepare,
// the combine under the other's attention core, and the experts under nothing: a layer costs
// 2 x (max(H + P, D) + E + max(K, C)) in steady state.
// Prefill (`_compute_moe_deepseek_blog_prefill`, delta 0):
//   [attention prepare and core, gate, issue dispatch] [wait dispatch, experts, issue combine]
//   [shared expert, wait combine] (merged with the next layer's first stage).
#include <span>

namespace myriad::perf {

// One micro-batch's share of one MoE layer, in seconds.
struct MicroBatchLayer {
  double attention_prepare = 0;  // P: query and latent projections
  double attention_core = 0;     // K: attention over the cache, output projection
  double shared_experts = 0;     // H
  double experts = 0;            // E: routed experts
  double dispatch = 0;           // D: network
  double combine = 0;            // C: network
};

enum class OverlapSchedule { kDecode, kPrefill };

// Seconds from micro-batch A's first operation to B's last, both running every layer in
// `layers` (the same costs for each micro-batch).
double TwoBatchPipelineSeconds(std::span<const MicroBatchLayer> layers, OverlapSchedule schedule);

}  // namespace myriad::perf
