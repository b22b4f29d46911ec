#pragma once
// The health-check schedule. A crashed process stops answering and is declared dead after the
// heartbeat timeout; a hung collective is only caught by the communicator's watchdog (NCCL's
// default is 10 minutes, fail-fast setups use tens of seconds); silent data corruption is
// visible only to a known-answer probe. The decisions are policy::FleetController's, which
// takes its options from this schedule (ControllerOptionsFor) in the simulator; passive
// ejection on refused requests is policy/backend_health.h.
#include <cstdint>

#include "core/time.h"

namespace myriad::policy {

struct DetectionOptions {
  // The health checker scrapes every unit each interval and declares it dead after
  // `heartbeat_timeout`'s worth of failed scrapes in a row (Mooncake's defaults: 1 s beats,
  // dead after 10 s).
  Nanos heartbeat_interval = kSecond;
  Nanos heartbeat_timeout = 10 * kSecond;
  // How long a collective may stall before the watchdog aborts the communicator.
  Nanos watchdog_timeout = 30 * kSecond;
  // Known-answer probes per unit; 0 disables them.
  Nanos probe_interval = 5 * kMinute;
};

}  // namespace myriad::policy
