#include "sim/hardware_profile.h"

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include "core/config_file.h"
#include "perf/hardware.h"
#include "sim/yaml_reader.h"

namespace myriad::sim {

std::string FormatHardwareProfile(const HardwareProfile& p) {
  const perf::Calibration& c = p.calibration;
  // fmt writes a double in its shortest round-trip form; durations are whole nanoseconds, written in us with 3 decimals.
  return fmt::format(
      "# A hardware profile written by `myriad calibrate` (docs/calibration.md). A scenario names it\n"
      "# as hardware: {{calibration: THIS_FILE}}.\n"
      "gpu: {}\n"
      "calibration:\n"
      "  gemm_efficiency: {}\n"
      "  attention_efficiency: {}\n"
      "  hbm_efficiency: {}\n"
      "  comm_efficiency: {}\n"
      "  comm_latency: {:.3f}us\n"
      "  step_overhead: {:.3f}us\n"
      "fitted_on:\n"
      "  model: {}\n"
      "  tp: {}\n"
      "  dp: {}\n"
      "  ep: {}\n"
      "  samples: {}\n",
      p.gpu, c.gemm_efficiency, c.attention_efficiency, c.hbm_efficiency, c.comm_efficiency,
      static_cast<double>(c.comm_latency) / 1e3, static_cast<double>(c.step_overhead) / 1e3, p.fitted_model,
      p.fitted_layout.tp, p.fitted_layout.dp, p.fitted_layout.ep, p.fitted_samples);
}

namespace {

absl::Status ParseRoot(const Reader& rd, const YAML::Node& root, HardwareProfile* p) {
  MYRIAD_RETURN_IF_ERROR(rd.Map(root, "", {"gpu", "calibration", "fitted_on"}));
  if (!root["gpu"]) return rd.Error(root, "gpu", "missing (the GPU the profile calibrates)");
  MYRIAD_RETURN_IF_ERROR(rd.Get(root, "gpu", "", &p->gpu));
  if (auto g = perf::FindGpu(p->gpu); !g.ok()) return rd.Error(root["gpu"], "gpu", std::string(g.status().message()));
  const YAML::Node c = root["calibration"];
  if (!c) return rd.Error(root, "calibration", "missing");
  const std::string cp = "calibration";
  MYRIAD_RETURN_IF_ERROR(rd.Map(c, cp, {"gemm_efficiency", "attention_efficiency", "hbm_efficiency", "comm_efficiency",
                                        "comm_latency", "step_overhead"}));
  perf::Calibration& cal = p->calibration;
  for (auto [key, field] : {std::pair{"gemm_efficiency", &cal.gemm_efficiency},
                            std::pair{"attention_efficiency", &cal.attention_efficiency},
                            std::pair{"hbm_efficiency", &cal.hbm_efficiency},
                            std::pair{"comm_efficiency", &cal.comm_efficiency}}) {
    MYRIAD_RETURN_IF_ERROR(rd.Get(c, key, cp, field));
    MYRIAD_RETURN_IF_ERROR(rd.Check(c, key, cp, *field >= 0.05 && *field <= 1, "must be between 0.05 and 1", *field));
  }
  MYRIAD_RETURN_IF_ERROR(rd.Duration(c, "comm_latency", cp, &cal.comm_latency));
  MYRIAD_RETURN_IF_ERROR(rd.Check(c, "comm_latency", cp, cal.comm_latency <= 10 * kMillisecond, "must be at most 10ms",
                                  FormatDuration(cal.comm_latency)));
  MYRIAD_RETURN_IF_ERROR(rd.Duration(c, "step_overhead", cp, &cal.step_overhead));
  MYRIAD_RETURN_IF_ERROR(rd.Check(c, "step_overhead", cp, cal.step_overhead <= kSecond, "must be at most 1s",
                                  FormatDuration(cal.step_overhead)));
  if (const YAML::Node f = root["fitted_on"]) {
    MYRIAD_RETURN_IF_ERROR(rd.Map(f, "fitted_on", {"model", "tp", "dp", "ep", "samples"}));
    MYRIAD_RETURN_IF_ERROR(rd.Get(f, "model", "fitted_on", &p->fitted_model));
    MYRIAD_RETURN_IF_ERROR(rd.Get(f, "tp", "fitted_on", &p->fitted_layout.tp));
    MYRIAD_RETURN_IF_ERROR(rd.Get(f, "dp", "fitted_on", &p->fitted_layout.dp));
    MYRIAD_RETURN_IF_ERROR(rd.Get(f, "ep", "fitted_on", &p->fitted_layout.ep));
    MYRIAD_RETURN_IF_ERROR(rd.Get(f, "samples", "fitted_on", &p->fitted_samples));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<HardwareProfile> ParseHardwareProfile(const std::string& yaml, const std::string& source) {
  Reader rd(source);
  YAML::Node root;
  try {
    root = YAML::Load(yaml);
  } catch (const YAML::ParserException& e) {
    return absl::InvalidArgumentError(fmt::format("{}:{}: YAML syntax: {}", source, e.mark.line + 1, e.msg));
  }
  if (!root || !root.IsMap()) return absl::InvalidArgumentError(fmt::format("{}: expected a YAML mapping at the top", source));
  HardwareProfile p;
  try {
    MYRIAD_RETURN_IF_ERROR(rd.UniqueKeys(root));
    MYRIAD_RETURN_IF_ERROR(ParseRoot(rd, root, &p));
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(fmt::format("{}:{}: {}", source, e.mark.line + 1, e.msg));
  }
  return p;
}

absl::StatusOr<HardwareProfile> LoadHardwareProfile(const std::string& path) {
  auto text = ReadConfigFile(path);
  if (!text.ok()) return text.status();
  return ParseHardwareProfile(*text, path);
}

}  // namespace myriad::sim
