#pragma once
// A policy's options as configurations read them: the keys they are read from (OptionFields)
// and the error for one out of bounds (OptionError). A policy lists its fields and checks its
// bounds once (e.g. ScalerFields, CheckScalerOptions), and every configuration that sets them
// (the simulator's scenario, the controller's file) reads those keys and places the error at
// the key's line, so the same value is refused alike everywhere.
#include <string>
#include <utility>
#include <vector>

#include "core/time.h"

namespace myriad::policy {

struct OptionError {
  std::string key;
  std::string why;  // "must be in [0.05, 1]"
};

// Pointers into an options struct, by configuration key: numbers, and durations ("30s").
struct OptionFields {
  std::vector<std::pair<const char*, double*>> numbers;
  std::vector<std::pair<const char*, Nanos*>> durations;
};

}  // namespace myriad::policy
