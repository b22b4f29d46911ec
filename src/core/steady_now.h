#pragma once
// The monotonic clock in nanoseconds: RealClock's source, and what transport deadlines (network
// waits that decide nothing: replication acks, idle connections) read directly. Decision loops
// take a Clock (core/clock.h) instead, so tests can step their time; policies take `now` as an
// argument.
#include "core/time.h"

namespace myriad {

Nanos SteadyNow();

}  // namespace myriad
