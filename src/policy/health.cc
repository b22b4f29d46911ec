#include "policy/health.h"

namespace myriad::policy {

Nanos CrashDetectedAt(Nanos at, const DetectionOptions& o) {
  const Nanos hb = o.heartbeat_interval > 0 ? o.heartbeat_interval : 1;
  const Nanos last_beat = at / hb * hb;
  // Checks happen at beat ticks: the first tick no earlier than last_beat + timeout.
  const Nanos due = last_beat + o.heartbeat_timeout;
  return (due + hb - 1) / hb * hb;
}

Nanos ProbeDetectedAt(Nanos at, Nanos phase, const DetectionOptions& o) {
  if (o.probe_interval <= 0) return -1;
  const Nanos p = o.probe_interval;
  if (at < phase) return phase;
  // The first probe strictly after the corruption started.
  return phase + ((at - phase) / p + 1) * p;
}

}  // namespace myriad::policy
