#include "policy/unit_sleep.h"

#include <algorithm>

namespace myriad::policy {

std::string_view SleepModeName(SleepMode m) {
  switch (m) {
    case SleepMode::kOff: return "off";
    case SleepMode::kHost: return "host";
    case SleepMode::kGpu: return "gpu";
  }
  return "?";
}

int UnitsToSleep(int leaving, int sleeping, const SleepOptions& o) {
  if (o.mode == SleepMode::kOff) return 0;
  return std::clamp(o.max_sleeping - sleeping, 0, std::max(leaving, 0));
}

int UnitsToWake(int wanted, int sleeping) { return std::clamp(sleeping, 0, std::max(wanted, 0)); }

Nanos WakeTime(double weight_bytes_per_gpu, const SleepOptions& o) {
  const Nanos reload = o.mode == SleepMode::kHost ? SecondsToNanos(weight_bytes_per_gpu / o.pcie_bytes_per_s) : 0;
  return reload + o.warmup + o.readiness;
}

}  // namespace myriad::policy
