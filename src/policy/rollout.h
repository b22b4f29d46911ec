#pragma once
// A model version's rollout beside the old one (issue 22 item 4), as three pure decisions that
// the gateway, the controller and (later) the simulator all call:
//  - the split: which version serves a request, from a stable hash of its key, so that one
//    conversation stays on one version while the canary's share holds over many;
//  - the judge: from each version's window of outcomes, hold the share, step it up the ladder,
//    promote, or roll back (at once on any wrong known-answer probe);
//  - the rolling restart: which old units to take out next without breaking a capacity buffer.
// No I/O, clock or threads: windows and unit states come in as arguments.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"

namespace myriad::policy {

// Bounds (docs/gateway.md, docs/controller.md).
inline constexpr size_t kMaxRolloutLadderSteps = 16;
inline constexpr int64_t kMaxRolloutMinRequests = 100'000'000;
inline constexpr size_t kMaxRolloutVersionBytes = 64;

enum class RolloutArm { kStable, kCanary };

// The point in [0, 1) a request key falls on; a key is on the canary when this is below the
// share, so raising the share only moves stable keys to the canary, never back.
double RolloutPoint(std::string_view key);
RolloutArm PickArm(std::string_view key, double canary_share);

// Checks a version name (printable, 1 to kMaxRolloutVersionBytes bytes): it is a metrics label.
absl::Status ValidateVersionName(std::string_view version);

// One version's outcomes over the judged window.
struct VersionWindow {
  int64_t requests = 0;
  int64_t slo_met = 0;           // requests within the SLO: TTFT and TPOT (policy/slo.h)
  int64_t errors = 0;            // failed requests (5xx, upstream failures)
  int64_t probes = 0;            // known-answer probes judged
  int64_t probe_mismatches = 0;  // probes answered wrongly
};

// The window the judge is given, kept the same way by the controller (from the gateway's counts)
// and by the simulator (from its own): each version's outcomes since the rollout last changed
// (its versions or its share), so that the canary at 25% is not judged on what it did at 5%.
// The driver keeps each version's counts since start and names the rollout's configuration.
class RolloutWindow {
 public:
  // `config`: the rollout as it stands (e.g. "stable/canary/share"); when it differs from the
  // last one observed, the window restarts at these counts. `stable`, `canary`: each version's
  // counts since start (requests, slo_met, errors; the probes are the driver's, per round).
  void Observe(std::string_view config, const VersionWindow& stable, const VersionWindow& canary);
  // Each version's outcomes since the window started (zero until observed).
  const VersionWindow& stable() const { return stable_; }
  const VersionWindow& canary() const { return canary_; }

 private:
  bool started_ = false;
  std::string config_;
  VersionWindow stable_base_, canary_base_, stable_, canary_;
};

struct JudgeOptions {
  // The canary shares in increasing order; the last must be 1 (promotion).
  std::vector<double> ladder = {0.01, 0.05, 0.25, 0.5, 1.0};
  // Requests each version needs in its window before the canary is compared.
  int64_t min_requests = 100;
  // The canary is rolled back when its SLO attainment is below stable's by more than this, or
  // its error rate above stable's by more than max_error_increase (both fractions in [0, 1]).
  double max_slo_drop = 0.05;
  double max_error_increase = 0.01;
};
absl::Status ValidateJudgeOptions(const JudgeOptions& o);

enum class Verdict { kHold, kStep, kPromote, kRollback };
std::string_view VerdictName(Verdict v);

struct Judgement {
  Verdict verdict = Verdict::kHold;
  double share = 0;  // the canary's share to apply (unchanged on hold, 0 on rollback, 1 on promote)
  std::string reason;
};

// Judges the canary at `share` (a ladder rung, or any share: the next rung above is the step).
Judgement Judge(const JudgeOptions& o, double share, const VersionWindow& stable,
                const VersionWindow& canary);

// Rolling restart: units of the old version, each serving, out (restarting) or done.
enum class UnitState { kOld, kOut, kDone };
struct RestartOptions {
  int max_out = 1;                  // units out at once, >= 1
  double min_serving_fraction = 0;  // of all units, kept serving (old or done), in [0, 1)
};
absl::Status ValidateRestartOptions(const RestartOptions& o);
// The old units to take out now (indices, lowest first); empty when the buffer is used up.
std::vector<size_t> NextToRestart(const RestartOptions& o, const std::vector<UnitState>& units);

}  // namespace myriad::policy
