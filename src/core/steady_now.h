#pragma once
// The monotonic clock in nanoseconds, for the servers' timers (one definition instead of a
// copy per server). Policies never call it: they take `now` as an argument.
#include "core/time.h"

namespace myriad {

Nanos SteadyNow();

}  // namespace myriad
