#pragma once
// Time to move KV between GPUs: NVLink inside a node, the per-GPU NIC between nodes.
#include <cstdint>

#include "core/time.h"
#include "perf/hardware.h"
#include "perf/step_model.h"

namespace myriad::perf {

enum class LinkKind { kNvlink, kNic };

struct TransferModel {
  GpuSpec gpu;
  Fabric fabric;
  // RDMA transfer engines reach about half of line rate on many NICs (Mooncake: 87 GB/s on
  // 4x200 Gb/s, 190 GB/s on 8x400 Gb/s); one GPU's NIC streaming one sequence does better.
  double nic_efficiency = 0.8;
  Nanos setup_latency = 50 * kMicrosecond;
  // Extra slowdown for flows that cross the spine (oversubscription >= 1).
  double spine_oversubscription = 1.0;

  Nanos Time(double bytes, LinkKind link, bool crosses_spine) const;
};

}  // namespace myriad::perf
