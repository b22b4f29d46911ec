#include "policy/rollout.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "core/block_hash.h"
#include "core/rng.h"

namespace myriad::policy {

double RolloutPoint(std::string_view key) {
  // A fixed-seed hash (the KV keys' name hash, itself a contract between processes): the same
  // key lands on the same point in every process and release, so a conversation keeps its
  // version across gateway restarts and replicas. Mixed with a salt of its own so that the split
  // does not correlate with anything else keyed on the name.
  const uint64_t h = Mix64(ExtraKeyOf(key) ^ 0x6d79'7269'6164'0001ULL);
  return static_cast<double>(h >> 11) * 0x1.0p-53;
}

RolloutArm PickArm(std::string_view key, double canary_share) {
  return RolloutPoint(key) < canary_share ? RolloutArm::kCanary : RolloutArm::kStable;
}

absl::Status ValidateVersionName(std::string_view v) {
  if (v.empty() || v.size() > kMaxRolloutVersionBytes) {
    return absl::InvalidArgumentError(
        fmt::format("version '{}' must be 1 to {} bytes", v.substr(0, kMaxRolloutVersionBytes), kMaxRolloutVersionBytes));
  }
  for (char c : v) {
    const auto u = static_cast<unsigned char>(c);
    if (u <= 0x20 || u >= 0x7f || c == '"' || c == '\\') {
      return absl::InvalidArgumentError(
          fmt::format("version must be printable ASCII without spaces, quotes or backslashes"));
    }
  }
  return absl::OkStatus();
}

namespace {

VersionWindow Since(const VersionWindow& now, const VersionWindow& base) {
  return {.requests = now.requests - base.requests,
          .slo_met = now.slo_met - base.slo_met,
          .errors = now.errors - base.errors,
          .probes = now.probes - base.probes,
          .probe_mismatches = now.probe_mismatches - base.probe_mismatches};
}

}  // namespace

void RolloutWindow::Observe(std::string_view config, const VersionWindow& stable, const VersionWindow& canary) {
  // A change (the judge's, an operator's, a restart's) starts a new window.
  if (!started_ || config != config_) {
    started_ = true;
    config_ = std::string(config);
    stable_base_ = stable;
    canary_base_ = canary;
  }
  stable_ = Since(stable, stable_base_);
  canary_ = Since(canary, canary_base_);
}

absl::Status ValidateJudgeOptions(const JudgeOptions& o) {
  if (o.ladder.empty() || o.ladder.size() > kMaxRolloutLadderSteps) {
    return absl::InvalidArgumentError(fmt::format("ladder: must have 1 to {} steps", kMaxRolloutLadderSteps));
  }
  for (size_t i = 0; i < o.ladder.size(); ++i) {
    const double s = o.ladder[i];
    if (!std::isfinite(s) || s <= 0 || s > 1 || (i > 0 && s <= o.ladder[i - 1])) {
      return absl::InvalidArgumentError(
          fmt::format("ladder[{}]: {} must be in (0, 1] and above the step before", i, s));
    }
  }
  if (o.ladder.back() != 1) return absl::InvalidArgumentError("ladder: the last step must be 1 (promotion)");
  if (o.min_requests < 1 || o.min_requests > kMaxRolloutMinRequests) {
    return absl::InvalidArgumentError(
        fmt::format("min_requests: {} is not in [1, {}]", o.min_requests, kMaxRolloutMinRequests));
  }
  for (auto [name, v] : {std::pair{"max_slo_drop", o.max_slo_drop}, {"max_error_increase", o.max_error_increase}}) {
    if (!std::isfinite(v) || v < 0 || v > 1) {
      return absl::InvalidArgumentError(fmt::format("{}: {} is not in [0, 1]", name, v));
    }
  }
  return absl::OkStatus();
}

std::string_view VerdictName(Verdict v) {
  switch (v) {
    case Verdict::kHold: return "hold";
    case Verdict::kStep: return "step";
    case Verdict::kPromote: return "promote";
    case Verdict::kRollback: return "rollback";
  }
  return "?";
}

Judgement Judge(const JudgeOptions& o, double share, const VersionWindow& stable, const VersionWindow& canary) {
  // Rolled back, not started or promoted: nothing is sent to the canary, nothing to undo.
  if (share <= 0) return {Verdict::kHold, share, "no canary share to judge"};
  // A wrong known answer is a broken model, not noise: no sample count can excuse it.
  if (canary.probe_mismatches > 0) {
    return {Verdict::kRollback, 0,
            fmt::format("{} of {} known-answer probes answered wrongly", canary.probe_mismatches, canary.probes)};
  }
  if (share >= 1) return {Verdict::kPromote, 1, "the canary serves everything"};
  if (stable.requests < o.min_requests || canary.requests < o.min_requests) {
    return {Verdict::kHold, share,
            fmt::format("waiting for {} requests a version (stable {}, canary {})", o.min_requests, stable.requests,
                        canary.requests)};
  }
  auto rate = [](int64_t n, int64_t d) { return static_cast<double>(n) / static_cast<double>(d); };
  const double slo_s = rate(stable.slo_met, stable.requests), slo_c = rate(canary.slo_met, canary.requests);
  const double err_s = rate(stable.errors, stable.requests), err_c = rate(canary.errors, canary.requests);
  if (slo_s - slo_c > o.max_slo_drop) {
    return {Verdict::kRollback, 0,
            fmt::format("SLO attainment {:.4f} against stable {:.4f} (margin {})", slo_c, slo_s, o.max_slo_drop)};
  }
  if (err_c - err_s > o.max_error_increase) {
    return {Verdict::kRollback, 0,
            fmt::format("error rate {:.4f} against stable {:.4f} (margin {})", err_c, err_s, o.max_error_increase)};
  }
  const auto next = std::upper_bound(o.ladder.begin(), o.ladder.end(), share);
  const double to = next == o.ladder.end() ? 1.0 : *next;
  const std::string why = fmt::format("SLO attainment {:.4f} (stable {:.4f}), error rate {:.4f} (stable {:.4f})",
                                      slo_c, slo_s, err_c, err_s);
  if (to >= 1) return {Verdict::kPromote, 1, why};
  return {Verdict::kStep, to, why};
}

absl::Status ValidateRestartOptions(const RestartOptions& o) {
  if (o.max_out < 1) return absl::InvalidArgumentError(fmt::format("max_out: {} must be >= 1", o.max_out));
  if (!std::isfinite(o.min_serving_fraction) || o.min_serving_fraction < 0 || o.min_serving_fraction >= 1) {
    return absl::InvalidArgumentError(
        fmt::format("min_serving_fraction: {} is not in [0, 1)", o.min_serving_fraction));
  }
  return absl::OkStatus();
}

std::vector<size_t> NextToRestart(const RestartOptions& o, const std::vector<UnitState>& units) {
  const auto total = static_cast<int64_t>(units.size());
  const auto out = static_cast<int64_t>(std::count(units.begin(), units.end(), UnitState::kOut));
  // The buffer rounds up: 90% of 5 units keeps all 5 serving (then nothing can go).
  const auto keep = static_cast<int64_t>(std::ceil(o.min_serving_fraction * static_cast<double>(total) - 1e-9));
  int64_t room = std::min<int64_t>(o.max_out, total - keep) - out;
  std::vector<size_t> take;
  for (size_t i = 0; i < units.size() && room > 0; ++i) {
    if (units[i] == UnitState::kOld) {
      take.push_back(i);
      --room;
    }
  }
  return take;
}

}  // namespace myriad::policy
