#pragma once
// Two-batch overlap as an engine runs it: a batch split into two micro-batches that take turns
// on one compute stream while the other's AllToAll is in flight. Each micro-batch goes through
// every MoE layer as attention -> dispatch -> experts -> combine, each step waiting for the one
// before (SGLang's operation list with its yield points, LMSYS 2025-05-05; DeepSeek's
// profile-data README: "the system waits for the all-to-all communication to complete after the
// computation has finished"). Compute stream and network are two resources taken in turn; two
// transfers in flight share the NIC, so they are served one after the other.
//
// The alternation fixes which compute hides which transfer: one micro-batch's dispatch runs
// under the other's experts, its combine under the other's attention (and the reverse), so a
// layer costs about max(e, d) + max(e, c) + max(a, c) + max(a, d), not the ideal
// 2 x max(a + e, d + c) that assumes any compute can hide any transfer.
#include <span>

namespace myriad::perf {

// One micro-batch's share of one MoE layer, in seconds.
struct MicroBatchLayer {
  double attention = 0;  // attention and dense parts (compute stream)
  double dispatch = 0;   // dispatch AllToAll (network; frees the SMs while in flight)
  double experts = 0;    // routed experts (compute stream)
  double combine = 0;    // combine AllToAll (network)
};

// Seconds from the first micro-batch's first attention to the last combine, both micro-batches
// running `layers` (the same costs for each), scheduled greedily: whichever operation can start
// first goes next, micro-batch 0 on ties.
double TwoBatchPipelineSeconds(std::span<const MicroBatchLayer> layers);

}  // namespace myriad::perf
