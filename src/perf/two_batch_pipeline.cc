#include "perf/two_batch_pipeline.h"

#include <algorithm>
#include <cstddef>

namespace myriad::perf {

double TwoBatchPipelineSeconds(std::span<const MicroBatchLayer> layers) {
  // Operation k of a micro-batch is layer k / 4's attention, dispatch, experts or combine.
  const size_t ops = 4 * layers.size();
  size_t next[2] = {0, 0};
  double ready[2] = {0, 0};  // when the micro-batch's previous operation ended
  double compute_free = 0, network_free = 0, end = 0;
  auto cost = [&](size_t k) {
    const MicroBatchLayer& l = layers[k / 4];
    switch (k % 4) {
      case 0: return l.attention;
      case 1: return l.dispatch;
      case 2: return l.experts;
      default: return l.combine;
    }
  };
  auto start_of = [&](int mb) {
    const bool network = next[mb] % 2 == 1;
    return std::max(ready[mb], network ? network_free : compute_free);
  };
  while (next[0] < ops || next[1] < ops) {
    int mb = next[0] < ops ? 0 : 1;
    if (mb == 0 && next[1] < ops && start_of(1) < start_of(0)) mb = 1;
    const double start = start_of(mb);
    const double finish = start + cost(next[mb]);
    (next[mb] % 2 == 1 ? network_free : compute_free) = finish;
    ready[mb] = finish;
    end = std::max(end, finish);
    ++next[mb];
  }
  return end;
}

}  // namespace myriad::perf
