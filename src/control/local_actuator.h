#pragma once
// The actuator for engines the controller's own process runs (`myriad up --control`): a
// restart stops the engine and starts it again on the same port, as a supervisor restarts a
// process, and returns once its /health answers. Called on the controller's round thread.
#include <string>

#include "absl/status/status.h"
#include "core/time.h"

namespace myriad::control {

class LocalActuator {
 public:
  virtual ~LocalActuator() = default;
  // NotFound when `target` is not one of the engines it runs; DeadlineExceeded when the new
  // process did not answer /health within `timeout`.
  virtual absl::Status Restart(const std::string& target, Nanos timeout) = 0;
  // Restarts it with another role (prefill, decode, colocated) and registers it anew with the
  // gateway, which then holds it as a new backend (not drained). Unimplemented by default.
  virtual absl::Status ChangeRole(const std::string& target, const std::string& /*role*/, Nanos /*timeout*/) {
    return absl::UnimplementedError("this actuator cannot change " + target + "'s role");
  }
};

}  // namespace myriad::control
