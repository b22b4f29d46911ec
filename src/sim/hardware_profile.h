#pragma once
// A hardware profile: the GPU a `myriad calibrate` run measured and the step-model Calibration
// fitted to it, as a YAML file a scenario names (`hardware: {calibration: FILE}`). The writer and
// the reader live together so that the format has one definition.
#include <string>

#include "absl/status/statusor.h"
#include "perf/step_model.h"

namespace myriad::sim {

struct HardwareProfile {
  std::string gpu;  // a perf::FindGpu name
  perf::Calibration calibration;
  // What the fit ran on, kept for the reader's information; the simulator does not use it.
  std::string fitted_model;
  perf::UnitLayout fitted_layout;
  int fitted_samples = 0;
};

// The profile's YAML text. Every number is written so that reading it back gives the same value.
std::string FormatHardwareProfile(const HardwareProfile& p);

// Parses a profile; errors name `source`, the line and the key. Efficiencies must lie in
// 0.05..1, step_overhead in 0..1 s and comm_latency in 0..10 ms.
absl::StatusOr<HardwareProfile> ParseHardwareProfile(const std::string& yaml, const std::string& source);
absl::StatusOr<HardwareProfile> LoadHardwareProfile(const std::string& path);

}  // namespace myriad::sim
