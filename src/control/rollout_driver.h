#pragma once
// The controller's driver of policy/rollout.h's judge (config `rollout:`): each round it reads
// the gateway's rollout of one model (GET /admin/rollouts: each version's counts since start),
// takes the window since the share last changed, asks the canary's engines the known-answer
// probe and compares them with a stable engine's answer, asks the judge, and applies its verdict
// through the gateway's admin API (POST /admin/rollouts/MODEL). It decides nothing itself.
#include <functional>
#include <string>

#include <nlohmann/json.hpp>

#include "absl/status/statusor.h"
#include "control/config.h"
#include "net/http_client.h"
#include "policy/rollout.h"

namespace myriad::control {

class RolloutDriver {
 public:
  // `probe`: the gate's known-answer probe sent to an engine's URL (its completion text).
  // `log`: one JSON line per verdict other than hold (its action's name beside), dry run or not.
  using ProbeFn = std::function<absl::StatusOr<std::string>(const std::string& url)>;
  using LogFn = std::function<void(const std::string& action, const std::string& line)>;
  RolloutDriver(RolloutJudgeConfig config, std::string admin_token, bool dry_run, ProbeFn probe, LogFn log);

  // One judgement, through `gateway` (the controller's client of the gateway).
  void Round(net::HttpClient& gateway);

 private:
  absl::StatusOr<nlohmann::json> Get(net::HttpClient& gateway, const std::string& target);
  // Probes the canary's engines against a stable engine's answer, into `canary`.
  void ProbeCanary(net::HttpClient& gateway, const std::string& stable, const std::string& canary_version,
                   policy::VersionWindow* canary);

  RolloutJudgeConfig config_;
  std::string admin_token_;
  bool dry_run_;
  ProbeFn probe_;
  LogFn log_;
  // Each version's counts since the rollout last changed (its share or versions).
  policy::RolloutWindow window_;
};

}  // namespace myriad::control
