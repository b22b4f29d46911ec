#pragma once
// Failure detection as pure policy: when each kind of fault is noticed, given the health-check
// schedule. A crashed process stops heartbeating and is declared dead after the heartbeat
// timeout; a hung collective is only caught by the communicator's watchdog (NCCL's default is
// 10 minutes, fail-fast setups use tens of seconds); silent data corruption is visible only to
// a known-answer probe. Every function takes the time of the fault and returns the time of
// detection, so the simulator and a real health checker agree to the nanosecond. Passive
// ejection on refused requests is a count, not a time: policy/backend_health.h.
#include <cstdint>

#include "core/time.h"

namespace myriad::policy {

struct DetectionOptions {
  // Heartbeats are sent at multiples of the interval; the monitor checks at the same ticks and
  // declares a unit dead once the last beat is `heartbeat_timeout` old (Mooncake's defaults:
  // 1 s beats, dead after 10 s).
  Nanos heartbeat_interval = kSecond;
  Nanos heartbeat_timeout = 10 * kSecond;
  // How long a collective may stall before the watchdog aborts the communicator.
  Nanos watchdog_timeout = 30 * kSecond;
  // Known-answer probes per unit; 0 disables them.
  Nanos probe_interval = 5 * kMinute;
};

// A process that dies at `at`: its last beat was the tick at or before `at`; the first check
// at which that beat is at least the timeout old declares it dead.
Nanos CrashDetectedAt(Nanos at, const DetectionOptions& o);

// A collective that stalls at `at` aborts when the watchdog fires.
inline Nanos HangDetectedAt(Nanos at, const DetectionOptions& o) { return at + o.watchdog_timeout; }

// Corruption that starts at `at` on a unit whose probes run at `phase + k * probe_interval`
// is caught by the first probe after it; -1 when probes are off.
Nanos ProbeDetectedAt(Nanos at, Nanos phase, const DetectionOptions& o);

}  // namespace myriad::policy
