#include "sim/hardware_profile.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include "../test_util/temp_dir.h"
#include "sim/scenario.h"

namespace myriad::sim {
namespace {

std::string Write(const std::string& name, const std::string& text) {
  const auto path = myriad::testing::TestTempDir() / name;
  std::ofstream(path) << text;
  return path.string();
}

HardwareProfile Fitted() {
  HardwareProfile p;
  p.gpu = "H100";
  p.calibration.gemm_efficiency = 0.5234567890123;
  p.calibration.attention_efficiency = 0.41;
  p.calibration.hbm_efficiency = 0.77;
  p.calibration.step_overhead = 3'456'789;  // ns
  p.calibration.comm_latency = 31'001;
  p.fitted_model = "Llama-3.1-8B";
  p.fitted_samples = 81;
  return p;
}

TEST(HardwareProfile, ReadsBackExactlyWhatItWrote) {
  const HardwareProfile p = Fitted();
  auto back = ParseHardwareProfile(FormatHardwareProfile(p), "p.yaml");
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->gpu, "H100");
  EXPECT_EQ(back->calibration.gemm_efficiency, p.calibration.gemm_efficiency);
  EXPECT_EQ(back->calibration.hbm_efficiency, p.calibration.hbm_efficiency);
  EXPECT_EQ(back->calibration.step_overhead, p.calibration.step_overhead);
  EXPECT_EQ(back->calibration.comm_latency, p.calibration.comm_latency);
  EXPECT_EQ(back->fitted_model, "Llama-3.1-8B");
  EXPECT_EQ(back->fitted_samples, 81);
}

TEST(HardwareProfile, BadValuesNameFileLineAndKey) {
  auto r = ParseHardwareProfile("gpu: H100\ncalibration:\n  hbm_efficiency: 2\n", "p.yaml");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), "p.yaml:3: calibration.hbm_efficiency: must be between 0.05 and 1 (got 2)");
  r = ParseHardwareProfile("gpu: TPU\ncalibration: {}\n", "p.yaml");
  EXPECT_NE(r.status().message().find("p.yaml:1: gpu: unknown GPU 'TPU'"), std::string::npos) << r.status();
  r = ParseHardwareProfile("calibration: {}\n", "p.yaml");
  EXPECT_NE(r.status().message().find("gpu: missing"), std::string::npos) << r.status();
  r = ParseHardwareProfile("gpu: H100\ncalibration: {step_overhead: 2s}\n", "p.yaml");
  EXPECT_NE(r.status().message().find("calibration.step_overhead: must be at most 1s"), std::string::npos) << r.status();
  r = ParseHardwareProfile("gpu: H100\ncalibration: {gemm: 0.5}\n", "p.yaml");
  EXPECT_NE(r.status().message().find("calibration.gemm: unknown key"), std::string::npos) << r.status();
}

constexpr fmt::string_view kScenario = R"(
seed: 1
duration: 10s
hardware: {{{}nodes: 1, calibration: {}}}
model: Llama-3.1-8B
pools:
  - {{name: u, role: colocated, count: 1, layout: {{tp: 1, dp: 1, ep: 1}}}}
)";

TEST(HardwareProfile, AScenarioNamingAProfileSimulatesWithItsCalibrationAndGpu) {
  Write("fitted.yaml", FormatHardwareProfile(Fitted()));
  // Relative to the scenario's own folder; the GPU comes from the profile.
  auto s = LoadScenario(Write("s.yaml", fmt::format(fmt::runtime(kScenario), "", "fitted.yaml")));
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->hardware.gpu, "H100");
  EXPECT_EQ(s->calibration.gemm_efficiency, Fitted().calibration.gemm_efficiency);
  EXPECT_EQ(s->calibration.step_overhead, Fitted().calibration.step_overhead);
  s = LoadScenario(Write("s2.yaml", fmt::format(fmt::runtime(kScenario), "gpu: h100, ", "fitted.yaml")));
  ASSERT_TRUE(s.ok()) << s.status();

  // Without the key, the built-in calibration, as before.
  auto plain = ParseScenario(R"(
hardware: {gpu: H100, nodes: 1}
model: Llama-3.1-8B
pools: [{name: u, count: 1, layout: {tp: 1, dp: 1, ep: 1}}]
)", "plain.yaml");
  ASSERT_TRUE(plain.ok()) << plain.status();
  EXPECT_EQ(plain->calibration.gemm_efficiency, perf::Calibration{}.gemm_efficiency);
}

TEST(HardwareProfile, AScenarioNamingAMissingOrContradictingProfileIsRejectedAtItsLine) {
  Write("fitted.yaml", FormatHardwareProfile(Fitted()));
  auto s = LoadScenario(Write("s3.yaml", fmt::format(fmt::runtime(kScenario), "gpu: H200, ", "fitted.yaml")));
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("s3.yaml:4: hardware.gpu: is H200 but the calibration profile"),
            std::string::npos) << s.status();
  s = LoadScenario(Write("s4.yaml", fmt::format(fmt::runtime(kScenario), "", "nowhere.yaml")));
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("s4.yaml:4: hardware.calibration: "), std::string::npos) << s.status();
  EXPECT_NE(s.status().message().find("nowhere.yaml: cannot open"), std::string::npos) << s.status();
  Write("broken.yaml", "gpu: H100\ncalibration: {hbm_efficiency: 0}\n");
  s = LoadScenario(Write("s5.yaml", fmt::format(fmt::runtime(kScenario), "", "broken.yaml")));
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("broken.yaml:2: calibration.hbm_efficiency: must be between 0.05 and 1"),
            std::string::npos) << s.status();
}

}  // namespace
}  // namespace myriad::sim
