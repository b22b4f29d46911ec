#include "cli/calibrate_command.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <tuple>
#include <nlohmann/json.hpp>

#include "cli/calibrate_inputs.h"
#include "perf/calibration_fit.h"
#include "perf/hardware.h"
#include "perf/model.h"
#include "sim/hardware_profile.h"

namespace myriad::cli {

namespace {
constexpr int kMaxInputs = 256;
constexpr int kMaxParallel = 1024;  // --tp, --dp, --ep
}  // namespace

CalibrateCommand::CalibrateCommand(CLI::App& app) {
  cmd_ = app.add_subcommand("calibrate",
                            "Fit the step model's efficiencies to your own vLLM benchmark results and write a "
                            "hardware profile a scenario can name");
  cmd_->add_option("inputs", inputs_,
                   fmt::format("Benchmark results: benchmark_serving --save-result --save-detailed JSON or "
                               "benchmark_latency --output-json JSON, or Vidur mlp.csv profiles (1 to {} files)", kMaxInputs))
      ->required();
  cmd_->add_option("--gpu", gpu_, "GPU the benchmarks ran on (H100, H200, H800, B200)")->required();
  cmd_->add_option("--model", model_, "Model they served (a catalog name, e.g. Llama-3.1-8B)")->required();
  cmd_->add_option("--tp", tp_, fmt::format("Tensor-parallel size of the engine (1 to {})", kMaxParallel))
      ->capture_default_str();
  cmd_->add_option("--dp", dp_, fmt::format("Data-parallel ranks of the engine (1 to {})", kMaxParallel))
      ->capture_default_str();
  cmd_->add_option("--ep", ep_, fmt::format("Expert-parallel size, MoE models (1 to {})", kMaxParallel))
      ->capture_default_str();
  cmd_->add_option("--holdout", holdout_,
                   "An input file to hold out of the fit and score out of sample (repeatable; default: every "
                   "4th sample of each metric)");
  cmd_->add_option("--batch-size", batch_size_,
                   fmt::format("benchmark_latency's --batch-size, if its JSON lacks batch_size (1 to {})",
                               kMaxCalibrationConcurrency));
  cmd_->add_option("--input-len", input_len_,
                   fmt::format("benchmark_latency's --input-len (1 to {})", kMaxCalibrationTokens));
  cmd_->add_option("--output-len", output_len_,
                   fmt::format("benchmark_latency's --output-len (1 to {})", kMaxCalibrationTokens));
  cmd_->add_option("-o,--output", output_, "The hardware profile to write (YAML)")->required();
  cmd_->add_flag("--json", json_, "Print the fit report as JSON");
}

namespace {

int Bad(const std::string& what) {
  fmt::print(stderr, "myriad calibrate: {}\n", what);
  return 2;
}

nlohmann::ordered_json CalibrationJson(const perf::Calibration& c) {
  return {{"gemm_efficiency", c.gemm_efficiency},
          {"attention_efficiency", c.attention_efficiency},
          {"hbm_efficiency", c.hbm_efficiency},
          {"comm_efficiency", c.comm_efficiency},
          {"comm_latency_s", NanosToSeconds(c.comm_latency)},
          {"step_overhead_s", NanosToSeconds(c.step_overhead)}};
}

nlohmann::ordered_json ErrorJson(const perf::ErrorSummary& e) {
  return {{"count", e.count}, {"median", e.median}, {"max", e.max}};
}

double ParamValue(const perf::Calibration& c, const std::string& name) {
  if (name == "gemm_efficiency") return c.gemm_efficiency;
  if (name == "attention_efficiency") return c.attention_efficiency;
  if (name == "hbm_efficiency") return c.hbm_efficiency;
  if (name == "comm_efficiency") return c.comm_efficiency;
  if (name == "comm_latency") return NanosToSeconds(c.comm_latency) * 1e6;
  return NanosToSeconds(c.step_overhead) * 1e3;  // step_overhead
}

const char* ParamUnit(const std::string& name) {
  if (name == "comm_latency") return " us";
  if (name == "step_overhead") return " ms";
  return "";
}

}  // namespace

int CalibrateCommand::Run() {
  if (inputs_.size() > static_cast<size_t>(kMaxInputs)) {
    return Bad(fmt::format("inputs: {} files, more than the {} allowed", inputs_.size(), kMaxInputs));
  }
  for (auto [flag, v] : {std::pair{"--tp", tp_}, std::pair{"--dp", dp_}, std::pair{"--ep", ep_}}) {
    if (v < 1 || v > kMaxParallel) return Bad(fmt::format("{}: must be between 1 and {} (got {})", flag, kMaxParallel, v));
  }
  for (auto [flag, v, hi] : {std::tuple{"--batch-size", batch_size_, kMaxCalibrationConcurrency},
                             std::tuple{"--input-len", input_len_, kMaxCalibrationTokens},
                             std::tuple{"--output-len", output_len_, kMaxCalibrationTokens}}) {
    if (v && (*v < 1 || *v > hi)) return Bad(fmt::format("{}: must be between 1 and {} (got {})", flag, hi, *v));
  }
  auto gpu = perf::FindGpu(gpu_);
  if (!gpu.ok()) return Bad(fmt::format("--gpu: {}", std::string(gpu.status().message())));
  auto model = perf::FindModel(model_);
  if (!model.ok()) return Bad(fmt::format("--model: {}", std::string(model.status().message())));
  for (const std::string& h : holdout_) {
    if (std::find(inputs_.begin(), inputs_.end(), h) == inputs_.end()) {
      return Bad(fmt::format("--holdout: {} is not one of the input files", h));
    }
  }
  const perf::Fabric fabric;
  perf::UnitLayout layout{.tp = tp_, .dp = dp_, .ep = ep_};
  layout.nodes = (layout.gpus() + fabric.gpus_per_node - 1) / fabric.gpus_per_node;
  auto unit = perf::StepModel::Create(*gpu, *model, layout, fabric);
  if (!unit.ok()) return Bad(fmt::format("--gpu/--model/--tp/--dp/--ep: {}", std::string(unit.status().message())));

  const LatencyShape shape{batch_size_, input_len_, output_len_};
  std::vector<BenchmarkFile> files;
  std::vector<perf::FitSample> samples;
  for (const std::string& path : inputs_) {
    auto f = ReadBenchmarkFile(path, shape);
    if (!f.ok()) return Bad(std::string(f.status().message()));
    const bool held = std::find(holdout_.begin(), holdout_.end(), path) != holdout_.end();
    for (perf::FitSample s : f->samples) {
      s.held_out = held;
      samples.push_back(s);
    }
    files.push_back(std::move(*f));
  }
  if (holdout_.empty()) perf::HoldOutEveryFourth(samples);
  auto fit = perf::FitCalibration(*gpu, *model, layout, fabric, samples);
  if (!fit.ok()) return Bad(std::string(fit.status().message()));

  sim::HardwareProfile profile{.gpu = gpu->name, .calibration = fit->fitted, .fitted_model = model->name,
                               .fitted_layout = layout, .fitted_samples = static_cast<int>(samples.size())};
  {
    std::ofstream out(output_);
    out << sim::FormatHardwareProfile(profile);
    out.close();
    if (!out) {
      fmt::print(stderr, "myriad calibrate: {}: cannot write the profile\n", output_);
      return 1;
    }
  }

  const int held = static_cast<int>(std::count_if(samples.begin(), samples.end(), [](const auto& s) { return s.held_out; }));
  // Fewer measurements than free parameters leave the fit undetermined: any of many settings
  // reproduces them, and the profile says nothing about other batch shapes.
  const bool undetermined = samples.size() - static_cast<size_t>(held) < fit->free_parameters.size();
  if (json_) {
    nlohmann::ordered_json j;
    j["gpu"] = gpu->name;
    j["model"] = model->name;
    j["layout"] = {{"tp", tp_}, {"dp", dp_}, {"ep", ep_}};
    for (const BenchmarkFile& f : files) {
      j["inputs"].push_back({{"path", f.path}, {"format", f.format}, {"samples", f.samples.size()},
                             {"failed_requests", f.skipped_failed}});
    }
    j["samples"] = samples.size();
    j["held_out"] = held;
    j["free_parameters"] = fit->free_parameters;
    j["undetermined"] = undetermined;
    j["fitted"] = CalibrationJson(fit->fitted);
    j["built_in"] = CalibrationJson(perf::Calibration{});
    for (int k = 0; k < perf::kFitMetrics; ++k) {
      if (fit->in_sample[k].count + fit->out_of_sample[k].count == 0) continue;
      j["relative_error"][perf::FitMetricName(static_cast<perf::FitMetric>(k))] = {
          {"in_sample", ErrorJson(fit->in_sample[k])},
          {"out_of_sample", ErrorJson(fit->out_of_sample[k])},
          {"built_in_in_sample", ErrorJson(fit->start_in_sample[k])},
          {"built_in_out_of_sample", ErrorJson(fit->start_out_of_sample[k])}};
    }
    j["evaluations"] = fit->evaluations;
    j["profile"] = output_;
    fmt::print("{}\n", j.dump(2));
    return 0;
  }
  fmt::print("{} on {} (tp {}, dp {}, ep {}): {} samples from {} file(s), {} held out ({})\n", model->name,
             gpu->name, tp_, dp_, ep_, samples.size(), files.size(), held,
             holdout_.empty() ? "every 4th of each metric" : "the --holdout files");
  if (undetermined) {
    fmt::print("warning: fewer samples in the fit than free parameters ({}): the fit is not determined; add "
               "benchmarks of other shapes\n", fit->free_parameters.size());
  }
  fmt::print("\n{:<22} {:>10} {:>10}\n", "parameter", "built-in", "fitted");
  for (const std::string& p : fit->free_parameters) {
    fmt::print("{:<22} {:>10.4g} {:>10.4g}{}\n", p, ParamValue(perf::Calibration{}, p), ParamValue(fit->fitted, p),
               ParamUnit(p));
  }
  fmt::print("\nrelative error |predicted - measured| / measured, median / max\n");
  fmt::print("{:<12} {:>6} {:>17} {:>6} {:>17}   {:>17}\n", "metric", "n", "in sample", "n", "out of sample",
             "built-in, out");
  for (int k = 0; k < perf::kFitMetrics; ++k) {
    const auto &in = fit->in_sample[k], &out = fit->out_of_sample[k], &was = fit->start_out_of_sample[k];
    if (in.count + out.count == 0) continue;
    auto cell = [](const perf::ErrorSummary& e) {
      return e.count == 0 ? std::string("-") : fmt::format("{:.1f}% / {:.1f}%", 100 * e.median, 100 * e.max);
    };
    fmt::print("{:<12} {:>6} {:>17} {:>6} {:>17}   {:>17}\n", perf::FitMetricName(static_cast<perf::FitMetric>(k)),
               in.count, cell(in), out.count, cell(out), cell(was));
  }
  fmt::print("\nwrote {} (name it in a scenario: hardware: {{calibration: {}}})\n", output_, output_);
  return 0;
}

}  // namespace myriad::cli
