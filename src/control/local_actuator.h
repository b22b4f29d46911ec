#pragma once
// The actuator for engines the controller's own process runs (`myriad up --control`): a
// restart stops the engine and starts it again on the same port, as a supervisor restarts a
// process, and returns once its /health answers; a scale-out starts a new engine and registers
// it with the gateway, a scale-in's stop stops a drained one and removes it there. Called on the
// controller's round thread.
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "control/config.h"
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
  // Starts a new engine of `role`, waits for its /health within `timeout`, and registers it with
  // the gateway (taking traffic). Unimplemented by default.
  virtual absl::StatusOr<EngineConfig> AddEngine(const std::string& role, Nanos /*timeout*/) {
    return absl::UnimplementedError("this actuator cannot start a " + role + " engine");
  }
  // Stops an engine (drained: nothing in flight) and removes it from the gateway. Unimplemented
  // by default.
  virtual absl::Status StopEngine(const std::string& target) {
    return absl::UnimplementedError("this actuator cannot stop " + target);
  }
};

}  // namespace myriad::control
