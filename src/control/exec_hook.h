#pragma once
// Runs an action's shell command (`/bin/sh -c`) with the target in its environment, so that a
// user plugs in kubectl or their scheduler: MYRIAD_ACTION, MYRIAD_TARGET, MYRIAD_TARGET_URL and
// MYRIAD_REASON are added to the controller's own environment, MYRIAD_ROLE for a change of role
// (the role to take) and a scale-out (the pool's role), MYRIAD_COUNT for a scale-out (engines
// to start).
#include <string>

#include "absl/status/status.h"
#include "core/time.h"

namespace myriad::control {

struct HookCall {
  std::string command;
  std::string action, target, target_url, reason;
  std::string role;  // "": no MYRIAD_ROLE
  int count = 0;     // 0: no MYRIAD_COUNT
};

// Waits for the command up to `timeout` (real time: the hook runs in the world), then kills it.
// Fails, with its exit status, when it does not exit 0.
absl::Status RunHook(const HookCall& call, Nanos timeout);

}  // namespace myriad::control
