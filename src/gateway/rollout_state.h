#pragma once
// The rollouts' state across restarts (config `rollout_state: FILE`). The admin API's changes
// (a canary's share stepped up, a promotion, a rollback) are the controller's decisions; a
// gateway that restarts with its config's shares would undo them, e.g. send a rolled-back
// canary its share again. Each change is written to the file (a temporary file renamed over
// it), and the file, when present, is read back over the config at start.
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "gateway/config.h"

namespace myriad::gateway {

// Replaces each of `rollouts` by the file's entry of the same model. An entry is taken only
// when its versions are the config's (stable and canary, or the canary alone after a
// promotion), so a config that names a new canary starts anew; entries of models the config
// no longer has are ignored. A missing file changes nothing. A file that cannot be read or
// does not parse, or an entry that fails ValidateRollout, is an error naming the file and the
// field (start-up refuses it rather than guess a share).
absl::Status ApplyRolloutState(const std::string& path, std::vector<RolloutConfig>* rollouts);

// Writes every rollout's model, versions and share to `path`, atomically.
absl::Status SaveRolloutState(const std::string& path, const std::vector<RolloutConfig>& rollouts);

}  // namespace myriad::gateway
