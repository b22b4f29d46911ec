#include "perf/transfer.h"

#include <algorithm>

namespace myriad::perf {

Nanos TransferModel::Time(double bytes, LinkKind link, bool crosses_spine) const {
  double bw = link == LinkKind::kNvlink ? gpu.nvlink_usable_bytes_per_s()
                                        : fabric.nic_bytes_per_s() * nic_efficiency;
  if (link == LinkKind::kNic && crosses_spine) bw /= std::max(1.0, spine_oversubscription);
  return setup_latency + SecondsToNanos(bytes / bw);
}

}  // namespace myriad::perf
