#pragma once
// A request's SLO verdict, one definition for every place that counts SLO attainment: the
// simulator's metrics (and through them its rollout windows) and the gateway's rollout windows,
// which time the stream they relay. Within the SLO: the first token within the TTFT target and,
// for an answer of more than one token, the mean time per output token after the first within
// the TPOT target (vLLM's benchmark definition: (last token - first token) / (tokens - 1)).
#include <cstdint>

#include "core/time.h"

namespace myriad::policy {

struct SloTargets {
  Nanos ttft = 2 * kSecond;
  Nanos tpot = 100 * kMillisecond;
};

// The mean time per output token after the first; -1 for an answer of one token (or an unknown
// count), which has no gap to time.
constexpr Nanos TimePerOutputToken(Nanos first_to_last, int64_t output_tokens) {
  return output_tokens > 1 ? first_to_last / (output_tokens - 1) : -1;
}

// `tpot` < 0: not timed (one token), judged on the TTFT alone.
constexpr bool MeetsSlo(const SloTargets& slo, Nanos ttft, Nanos tpot) {
  return ttft <= slo.ttft && (tpot < 0 || tpot <= slo.tpot);
}

}  // namespace myriad::policy
