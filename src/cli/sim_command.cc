#include "cli/sim_command.h"

#include <fmt/format.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <tuple>
#include <vector>

#include "sim/report_html.h"
#include "sim/runner.h"

namespace myriad::cli {

SimCommand::SimCommand(CLI::App& app) {
  cmd_ = app.add_subcommand("sim", "Simulate a cluster scenario in virtual time");
  cmd_->add_option("scenario", scenario_path_, "Scenario YAML file (see scenarios/)")
      ->required()
      ->check(CLI::ExistingFile);
  cmd_->add_option("-o,--output", output_path_, "Write the JSON results here");
  cmd_->add_option("--request-log", request_log_path_,
                   "Write one JSON line per request as it ends (completed or rejected; its unit, TTFT, "
                   "cached tokens), in virtual-time order");
  cmd_->add_option("--seed", seed_, "Override the scenario's seed (0 to 2^64-1)")
      ->check(CLI::NonNegativeNumber);
  cmd_->add_option("--router", router_, "Override the routing policy (random, round-robin, least-loaded, prefix-only, kv-aware; +spread, +fair)");
  cmd_->add_option("--scale", scale_,
                   "Scale cluster, pools and load by this factor (at most to 262,144 GPUs and 1e10 expected requests)")
      ->check(CLI::PositiveNumber);
  cmd_->add_option("--set", overrides_,
                   "Override a scenario value: --set pools.1.moe.placement=contiguous (repeatable)");
  cmd_->add_option("--load", load_, "Multiply the offered load alone by this factor (at most to 1e10 expected requests)")
      ->check(CLI::PositiveNumber);
  cmd_->add_option("--compare", compare_,
                   "Run each of these routing policies on the same workload and seed and print one table; "
                   "'static' and 'elastic' (a scenario with an elastic: section) compare fixed pools with the "
                   "elasticity policies")
      ->delimiter(',');
  cmd_->add_option("--report", report_path_,
                   "Write a self-contained HTML report (charts over virtual time; with --compare, the "
                   "policies overlaid)");
  cmd_->add_option("--timeseries", timeseries_path_,
                   "Write the report's series as CSV, one row per sampling window (and policy)");
  cmd_->add_option("--sample-interval", sample_interval_text_,
                   "Virtual time per point of --report and --timeseries (default 10s; 1ms to 1000000s; widened "
                   "so a run has at most 2000 points)");
  cmd_->add_flag("-q,--quiet", quiet_, "Print nothing but errors (and --json)");
  cmd_->add_flag("--json", json_, "Print the JSON results on stdout instead of the summary");
  cmd_->add_flag("--no-progress", no_progress_, "No progress bar even on a terminal");
}

namespace {

// A scenario's name, and its file's, are whatever bytes the user gave: invalid UTF-8 is written
// as U+FFFD instead of throwing out of the dump.
std::string Dump(const nlohmann::ordered_json& j) {
  return j.dump(2, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

// Building the run (the trace, the units) fails only on what the scenario asked for: bad input.
int RunFailureCode(const absl::Status& st) {
  return st.code() == absl::StatusCode::kInvalidArgument || st.code() == absl::StatusCode::kNotFound ? 2 : 1;
}

void DrawProgress(double f) {
  constexpr int kWidth = 40;
  const int filled = static_cast<int>(f * kWidth);
  std::fprintf(stderr, "\r[%s%s] %3.0f%%", std::string(static_cast<size_t>(filled), '#').c_str(),
               std::string(static_cast<size_t>(kWidth - filled), ' ').c_str(), f * 100);
  if (f >= 1.0) std::fprintf(stderr, "\r%*s\r", kWidth + 8, "");
  std::fflush(stderr);
}

}  // namespace

int SimCommand::Run() {
  auto scenario = sim::LoadScenario(scenario_path_, overrides_);
  if (!scenario.ok()) {
    std::fprintf(stderr, "myriad sim: %s\n", std::string(scenario.status().message()).c_str());
    return 2;
  }
  if (seed_) scenario->seed = *seed_, scenario->workload.synthetic.seed = *seed_, scenario->workload.replay.seed = *seed_;
  if (router_) {
    if (auto b = policy::ParsePolicyName(*router_); !b.ok()) {
      std::fprintf(stderr, "myriad sim: --router: %s\n", std::string(b.status().message()).c_str());
      return 2;
    }
    scenario->router.policy = *router_;
  }
  if (scale_ != 1.0) {
    if (absl::Status st = sim::ScaleScenario(*scenario, scale_); !st.ok()) {
      std::fprintf(stderr, "myriad sim: --scale: %s\n", std::string(st.message()).c_str());
      return 2;
    }
  }
  if (load_ != 1.0) {
    if (absl::Status st = sim::ScaleLoad(*scenario, load_); !st.ok()) {
      std::fprintf(stderr, "myriad sim: --load: %s\n", std::string(st.message()).c_str());
      return 2;
    }
  }
  if (!compare_.empty() && !request_log_path_.empty()) {
    std::fprintf(stderr, "myriad sim: --request-log and --compare: one log needs one run; drop one of them\n");
    return 2;
  }
  if (int rc = PrepareSeriesOutputs(); rc != 0) return rc;
  if (!compare_.empty()) return RunCompare(*scenario);
  sim::ProgressFn progress;
  if (!quiet_ && !no_progress_ && isatty(STDERR_FILENO)) progress = DrawProgress;

  std::ofstream request_log;
  sim::OutcomeSink outcomes;
  if (!request_log_path_.empty()) {
    request_log.open(request_log_path_);
    if (!request_log) {
      std::fprintf(stderr, "myriad sim: --request-log: cannot write %s\n", request_log_path_.c_str());
      return 1;
    }
    outcomes = [&request_log](const sim::RequestOutcome& o) {
      const bool done = o.reason.empty();
      request_log << fmt::format(
          "{{\"id\":{},\"arrival_s\":{:.9f},\"end_s\":{:.9f},\"outcome\":\"{}\",\"reason\":{},"
          "\"unit\":{},\"decode_unit\":{},\"ttft_s\":{},\"cached_tokens\":{},\"input_tokens\":{},"
          "\"output_tokens\":{},\"tenant\":{}}}\n",
          o.id, NanosToSeconds(o.arrival), NanosToSeconds(o.end), done ? "completed" : "rejected",
          done ? "null" : nlohmann::json(std::string(o.reason)).dump(), o.unit, o.decode_unit,
          o.first_token >= 0 ? fmt::format("{:.9f}", NanosToSeconds(o.first_token - o.arrival)) : "null",
          std::max(o.cached_tokens, 0), o.input_tokens, o.output_tokens, o.tenant);
    };
  }
  const auto t0 = std::chrono::steady_clock::now();
  sim::TimeSeries series;
  auto report = sim::RunScenario(*scenario, progress, std::move(outcomes), wants_series() ? &series : nullptr,
                                 sample_interval_);
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (!report.ok()) {
    std::fprintf(stderr, "myriad sim: %s\n", std::string(report.status().message()).c_str());
    return RunFailureCode(report.status());
  }
  if (request_log.is_open()) {
    request_log.flush();
    if (!request_log) {
      std::fprintf(stderr, "myriad sim: --request-log: cannot write %s\n", request_log_path_.c_str());
      return 1;
    }
  }
  if (!output_path_.empty()) {
    std::ofstream out(output_path_);
    out << Dump(*report) << "\n";
    if (!out) {
      std::fprintf(stderr, "myriad sim: cannot write %s\n", output_path_.c_str());
      return 1;
    }
  }
  if (int rc = WriteSeriesOutputs(std::span(&*report, 1), std::span(&series, 1)); rc != 0) return rc;
  if (json_) {
    std::printf("%s\n", Dump(*report).c_str());
  } else if (!quiet_) {
    std::printf("%s", sim::FormatSummary(*report).c_str());
    struct rusage ru {};
    getrusage(RUSAGE_SELF, &ru);
    const double events = (*report)["simulator"]["events"].get<double>();
    const double completed = (*report)["requests"]["completed"].get<double>();
    std::printf("\nwall %.1fs  %.2fM events/s  %.0fk simulated requests/s  peak RSS %.0f MiB\n", wall,
                events / wall / 1e6, completed / wall / 1e3, static_cast<double>(ru.ru_maxrss) / 1024);
  }
  return 0;
}

namespace {

// `--compare static,elastic`: the scenario's pools held at their counts (observed by the
// elasticity driver but never resized) against the elasticity policies.
bool IsElasticityRun(const std::string& name) { return name == "static" || name == "elastic"; }

}  // namespace

int SimCommand::RunCompare(const sim::Scenario& base) {
  const bool elasticity = std::any_of(compare_.begin(), compare_.end(), IsElasticityRun);
  if (elasticity && !base.elastic.enabled) {
    std::fprintf(stderr, "myriad sim: --compare static,elastic: %s has no elastic: section (docs/elasticity.md)\n",
                 scenario_path_.c_str());
    return 2;
  }
  for (const auto& name : compare_) {
    if (IsElasticityRun(name)) continue;
    if (auto p = policy::ParsePolicyName(name); !p.ok()) {
      std::fprintf(stderr, "myriad sim: --compare: %s\n", std::string(p.status().message()).c_str());
      return 2;
    }
  }
  nlohmann::ordered_json all = nlohmann::ordered_json::array();
  std::string table = fmt::format("{:<26} {:>8} {:>9} {:>9} {:>9} {:>8} {:>12} {:>10} {:>9}\n", "policy", "hit rate",
                                  "TTFT p50", "TTFT p99", "TPOT p99", "SLO", "goodput", "$/M tok", "rejected");
  if (elasticity) {
    table = fmt::format("{:<26} {:>10} {:>9} {:>9} {:>9} {:>12} {:>10} {:>9} {:>9}\n", "policy", "GPU-hours", "SLO",
                        "TTFT p99", "TPOT p99", "$/M tok SLO", "burst abs", "rollback", "rejected");
  }
  std::vector<sim::TimeSeries> series(compare_.size());
  for (size_t i = 0; i < compare_.size(); ++i) {
    const std::string& name = compare_[i];
    sim::Scenario s = base;
    if (IsElasticityRun(name)) s.elastic.act = name == "elastic";
    else s.router.policy = name;
    const auto t0 = std::chrono::steady_clock::now();
    auto report = sim::RunScenario(s, nullptr, nullptr, wants_series() ? &series[i] : nullptr, sample_interval_);
    if (!report.ok()) {
      std::fprintf(stderr, "myriad sim: %s: %s\n", name.c_str(), std::string(report.status().message()).c_str());
      return RunFailureCode(report.status());
    }
    const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const auto& r = *report;
    if (elasticity) {
      const auto& el = r.contains("elastic") ? r["elastic"] : nlohmann::ordered_json::object();
      const std::string absorbed =
          el.contains("burst") ? fmt::format("{:.0f}s", el["burst"]["absorbed_after_s"].get<double>()) : "-";
      // The canary's start to the judge's rollback ("-": no rollout, or none rolled back).
      const double rb = el.contains("rollout") ? el["rollout"]["rollback_after_s"].get<double>() : -1;
      const std::string rollback = rb >= 0 ? fmt::format("{:.0f}s", rb) : "-";
      // SLO attainment to four decimals: the two runs differ in the fourth.
      table += fmt::format("{:<26} {:>10.0f} {:>8.4f}% {:>8.2f}s {:>7.1f}ms {:>12.3f} {:>10} {:>9} {:>9}\n", name,
                           r["cost"]["gpu_hours"].get<double>(), 100 * r["requests"]["slo_attainment"].get<double>(),
                           r["latency_s"]["ttft"]["p99"].get<double>(), 1e3 * r["latency_s"]["tpot"]["p99"].get<double>(),
                           r["cost"]["per_million_tokens_within_slo"].get<double>(), absorbed, rollback,
                           r["requests"]["rejected"].get<uint64_t>());
      if (!quiet_ && !json_) std::fprintf(stderr, "%s: %.1fs wall\n", name.c_str(), wall);
      all.push_back(std::move(*report));
      continue;
    }
    table += fmt::format("{:<26} {:>7.1f}% {:>8.2f}s {:>8.2f}s {:>7.1f}ms {:>7.1f}% {:>10.3g}/s {:>10.3f} {:>9}\n", name,
                         100 * r["tokens"]["prefix_hit_rate"].get<double>(),
                         r["latency_s"]["ttft"]["p50"].get<double>(), r["latency_s"]["ttft"]["p99"].get<double>(),
                         1e3 * r["latency_s"]["tpot"]["p99"].get<double>(),
                         100 * r["requests"]["slo_attainment"].get<double>(),
                         r["throughput"]["goodput_tokens_per_s"].get<double>(),
                         r["cost"]["per_million_tokens_within_slo"].get<double>(),
                         r["requests"]["rejected"].get<uint64_t>());
    if (!quiet_ && !json_) std::fprintf(stderr, "%s: %.1fs wall\n", name.c_str(), wall);
    all.push_back(std::move(*report));
  }
  if (!output_path_.empty()) {
    std::ofstream out(output_path_);
    out << Dump(all) << "\n";
    if (!out) {
      std::fprintf(stderr, "myriad sim: cannot write %s\n", output_path_.c_str());
      return 1;
    }
  }
  const std::vector<nlohmann::ordered_json> reports(all.begin(), all.end());
  if (int rc = WriteSeriesOutputs(reports, series); rc != 0) return rc;
  if (json_) std::printf("%s\n", Dump(all).c_str());
  else if (!quiet_) std::printf("%s", table.c_str());
  return 0;
}

int SimCommand::PrepareSeriesOutputs() {
  auto interval = ParseDuration(sample_interval_text_);
  if (!interval.ok() || *interval < sim::kMinSampleInterval || *interval > sim::kMaxSampleInterval) {
    std::fprintf(stderr, "myriad sim: --sample-interval: '%s' is %s; give a duration from 1ms to 1000000s (e.g. 10s)\n",
                 sample_interval_text_.c_str(), interval.ok() ? "out of bounds" : "not a duration");
    return 2;
  }
  sample_interval_ = *interval;
  for (auto [path, out, flag] : {std::tuple{&report_path_, &report_out_, "--report"},
                                 std::tuple{&timeseries_path_, &timeseries_out_, "--timeseries"}}) {
    if (path->empty()) continue;
    out->open(*path, std::ios::binary);
    if (!*out) {
      std::fprintf(stderr, "myriad sim: %s: cannot write %s\n", flag, path->c_str());
      return 1;
    }
  }
  return 0;
}

int SimCommand::WriteSeriesOutputs(std::span<const nlohmann::ordered_json> reports,
                                   std::span<const sim::TimeSeries> series) {
  if (timeseries_out_.is_open()) {
    sim::WriteSeriesCsv(timeseries_out_, series);
    timeseries_out_.close();
    if (!timeseries_out_) {
      std::fprintf(stderr, "myriad sim: --timeseries: cannot write %s\n", timeseries_path_.c_str());
      return 1;
    }
  }
  if (report_out_.is_open()) {
    std::vector<sim::ReportRun> runs;
    for (size_t i = 0; i < reports.size() && i < series.size(); ++i) runs.push_back({&reports[i], &series[i]});
    report_out_ << sim::FormatHtmlReport(runs);
    report_out_.close();
    if (!report_out_) {
      std::fprintf(stderr, "myriad sim: --report: cannot write %s\n", report_path_.c_str());
      return 1;
    }
  }
  return 0;
}

}  // namespace myriad::cli
