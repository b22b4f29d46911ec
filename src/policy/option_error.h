#pragma once
// A policy's option out of bounds: the configuration key it is read from and why. A policy
// checks its own options once (e.g. CheckScalerOptions), and every configuration that sets them
// (the simulator's scenario, the controller's file) places the error at the key's line.
#include <string>

namespace myriad::policy {

struct OptionError {
  std::string key;
  std::string why;  // "must be in [0.05, 1]"
};

}  // namespace myriad::policy
