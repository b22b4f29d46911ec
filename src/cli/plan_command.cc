#include "cli/plan_command.h"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <optional>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "policy/plan_search.h"
#include "sim/plan_spec.h"
#include "sim/runner.h"

namespace myriad::cli {

// Two candidates at once fill this machine's two cores; more only for larger machines.
constexpr int kMaxJobs = 64;

PlanCommand::PlanCommand(CLI::App& app) {
  cmd_ = app.add_subcommand("plan", "Search deployments for the lowest cost per million tokens within the SLO");
  cmd_->add_option("spec", spec_path_, "Plan spec YAML (docs/plan.md)")->required()->check(CLI::ExistingFile);
  cmd_->add_option("--out", out_path_, "Write the chosen plan as a scenario `myriad sim` runs");
  cmd_->add_option("-o,--output", json_path_, "Write every candidate, the frontier and the choice as JSON");
  cmd_->add_option("--jobs", jobs_, fmt::format("Candidates simulated at once (1 to {}; default 2)", kMaxJobs))
      ->check(CLI::Range(1, kMaxJobs));
  cmd_->add_flag("--confirm", confirm_,
                 "Also simulate the chosen plan's whole cluster (not the slice) and print both figures");
  cmd_->add_option("--baseline", baseline_path_,
                   "Also simulate this scenario (a deployment serving the spec's workload) and print the chosen "
                   "plan's cost against it")
      ->check(CLI::ExistingFile);
  cmd_->add_flag("-q,--quiet", quiet_, "Print nothing but errors");
}

namespace {

struct Candidate {
  size_t shape = 0;
  int copies = 0;
  sim::PlanFigures figures;
};

// Input errors (what the spec asked for cannot be built) exit 2; anything else is a failed run.
int FailureCode(const absl::Status& st) {
  return st.code() == absl::StatusCode::kInvalidArgument || st.code() == absl::StatusCode::kNotFound ? 2 : 1;
}

// Runs the jobs' slices `jobs` at a time. Each run owns its cluster and workload (the simulator
// keeps no global mutable state), and results land by index, so the order of completion never
// shows in the output.
std::vector<absl::StatusOr<sim::PlanFigures>> RunSlices(const sim::PlanSpec& spec,
                                                        const std::vector<std::pair<size_t, int>>& work, int jobs) {
  std::vector<absl::StatusOr<sim::PlanFigures>> out(work.size(), absl::UnknownError("not run"));
  std::atomic<size_t> next{0};
  auto worker = [&] {
    for (size_t i = next++; i < work.size(); i = next++) {
      auto s = sim::BuildPlanScenario(spec, spec.shapes[work[i].first], work[i].second, false);
      if (!s.ok()) {
        out[i] = s.status();
        continue;
      }
      auto report = sim::RunScenario(*s);
      if (!report.ok()) out[i] = report.status();
      else out[i] = sim::ReadPlanFigures(*report);
    }
  };
  std::vector<std::thread> threads;
  for (int t = 1; t < std::min<int>(jobs, static_cast<int>(work.size())); ++t) threads.emplace_back(worker);
  worker();
  for (auto& t : threads) t.join();
  return out;
}

std::string Cost(double c) { return std::isfinite(c) ? fmt::format("{:.4f}", c) : "-"; }

// A cost in JSON: null when it does not exist (nothing within the SLO to divide by).
nlohmann::ordered_json CostJson(double c) { return std::isfinite(c) ? nlohmann::ordered_json(c) : nlohmann::ordered_json(nullptr); }

}  // namespace

int PlanCommand::Run() {
  auto spec = sim::LoadPlanSpec(spec_path_);
  if (!spec.ok()) {
    std::fprintf(stderr, "myriad plan: %s\n", std::string(spec.status().message()).c_str());
    return 2;
  }
  // Read before the search, so that a bad one fails in seconds, not after it.
  std::optional<sim::Scenario> baseline;
  if (!baseline_path_.empty()) {
    auto b = sim::LoadScenario(baseline_path_);
    if (!b.ok()) {
      std::fprintf(stderr, "myriad plan: --baseline: %s\n", std::string(b.status().message()).c_str());
      return 2;
    }
    if (auto st = sim::CheckPlanBaseline(*spec, *b); !st.ok()) {
      std::fprintf(stderr, "myriad plan: --baseline %s: %s\n", baseline_path_.c_str(), std::string(st.message()).c_str());
      return 2;
    }
    baseline = std::move(*b);
  }
  const auto t0 = std::chrono::steady_clock::now();
  const std::clock_t cpu0 = std::clock();  // the process's CPU time, every thread's
  auto offered = sim::OfferedOutputTokensPerSecond(*spec);
  if (!offered.ok()) {
    std::fprintf(stderr, "myriad plan: %s: workload: %s\n", spec_path_.c_str(), std::string(offered.status().message()).c_str());
    return FailureCode(offered.status());
  }
  const size_t n = spec->shapes.size();
  std::vector<policy::CopiesSearch> searches;
  std::vector<int> min_copies(n), max_copies(n), slice_gpus(n);
  for (size_t i = 0; i < n; ++i) {
    const sim::PlanShape& shape = spec->shapes[i];
    slice_gpus[i] = sim::SliceGpus(*spec, shape);
    max_copies[i] = spec->max_gpus / std::max(slice_gpus[i], 1);
    auto bound = sim::SliceDecodeBound(*spec, shape);
    if (!bound.ok()) {
      std::fprintf(stderr, "myriad plan: %s: %s: %s\n", spec_path_.c_str(), sim::DescribeShape(*spec, shape).c_str(),
                   std::string(bound.status().message()).c_str());
      return 2;
    }
    min_copies[i] = policy::MinCopies(*bound, *offered);
    searches.emplace_back(min_copies[i], max_copies[i]);
  }

  std::vector<Candidate> candidates;
  for (;;) {
    std::vector<std::pair<size_t, int>> work;
    for (size_t i = 0; i < n; ++i) {
      if (auto c = searches[i].Next()) work.emplace_back(i, *c);
    }
    if (work.empty()) break;
    auto results = RunSlices(*spec, work, jobs_);
    for (size_t k = 0; k < work.size(); ++k) {
      const auto [shape, copies] = work[k];
      if (!results[k].ok()) {
        std::fprintf(stderr, "myriad plan: %s: %s, %d copies: %s\n", spec_path_.c_str(),
                     sim::DescribeShape(*spec, spec->shapes[shape]).c_str(), copies,
                     std::string(results[k].status().message()).c_str());
        return FailureCode(results[k].status());
      }
      candidates.push_back({shape, copies, *results[k]});
      searches[shape].Record(copies, results[k]->attainment >= spec->attainment);
    }
  }
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const double cpu = static_cast<double>(std::clock() - cpu0) / CLOCKS_PER_SEC;

  // The choice ranks by cost per token within the SLO; the frontier by what the deployment costs
  // an hour, since per token within the SLO, failing candidates are dearer as well as worse.
  std::vector<policy::PlanScore> per_token, per_hour;
  for (const Candidate& c : candidates) {
    per_token.push_back({c.figures.cost_per_million_tokens, c.figures.attainment});
    per_hour.push_back({c.copies * sim::SliceDollarsPerHour(*spec, spec->shapes[c.shape]), c.figures.attainment});
  }
  const std::vector<size_t> frontier = policy::Frontier(per_hour);
  const std::optional<size_t> chosen = policy::Choose(per_token, spec->attainment);
  int bounded = 0, over_budget = 0;
  for (size_t i = 0; i < n; ++i) {
    if (max_copies[i] < 1) ++over_budget;
    else if (min_copies[i] > max_copies[i]) ++bounded;
  }

  auto row = [&](size_t i) {
    const Candidate& c = candidates[i];
    return fmt::format("{:>9.0f} {:>9} {:>7.3f}% {:>8.2f}s {:>7.1f}ms {:>6} {:>6}  {}\n", per_hour[i].cost,
                       Cost(c.figures.cost_per_million_tokens), 100 * c.figures.attainment, c.figures.ttft_p99_s,
                       1e3 * c.figures.tpot_p99_s, c.copies * slice_gpus[c.shape], c.copies,
                       sim::DescribeShape(*spec, spec->shapes[c.shape]));
  };
  std::string text = fmt::format(
      "{}: {} shapes, {} candidates simulated ({} shapes rejected by the step model's decode bound, {} over the "
      "{}-GPU budget); offered {:.0f} output tokens/s; SLO {}% within TTFT {} and TPOT {}\n",
      spec->base.name, n, candidates.size(), bounded, over_budget, spec->max_gpus, *offered, 100 * spec->attainment,
      FormatDuration(spec->base.slo.ttft), FormatDuration(spec->base.slo.tpot));
  text += "\nfrontier (dollars per hour against SLO attainment, each scored on a slice: one copy at 1/copies of the load)\n";
  text += fmt::format("{:>9} {:>9} {:>8} {:>9} {:>9} {:>6} {:>6}  {}\n", "$/hour", "$/M SLO", "SLO", "TTFT p99",
                      "TPOT p99", "GPUs", "copies", "shape (units per slice)");
  for (size_t i : frontier) text += row(i);
  nlohmann::ordered_json json;
  json["spec"] = spec_path_;
  json["offered_output_tokens_per_s"] = *offered;
  json["attainment_target"] = spec->attainment;
  auto& all = json["candidates"] = nlohmann::ordered_json::array();
  for (const Candidate& c : candidates) {
    const auto& f = c.figures;
    all.push_back({{"shape", sim::DescribeShape(*spec, spec->shapes[c.shape])},
                   {"copies", c.copies},
                   {"gpus", c.copies * slice_gpus[c.shape]},
                   {"dollars_per_hour", c.copies * sim::SliceDollarsPerHour(*spec, spec->shapes[c.shape])},
                   {"cost_per_million_tokens_within_slo", CostJson(f.cost_per_million_tokens)},
                   {"slo_attainment", f.attainment},
                   {"ttft_p99_s", f.ttft_p99_s},
                   {"tpot_p99_s", f.tpot_p99_s}});
  }
  json["frontier"] = frontier;
  json["chosen"] = chosen ? nlohmann::ordered_json(*chosen) : nlohmann::ordered_json(nullptr);
  std::optional<sim::PlanFigures> confirmed;  // the chosen plan's whole cluster, with --confirm
  if (!chosen) {
    text += fmt::format("\nno candidate reached {}% within the SLO: widen the search (more GPUs, other layouts)\n",
                        100 * spec->attainment);
  } else {
    const Candidate& c = candidates[*chosen];
    const sim::PlanShape& shape = spec->shapes[c.shape];
    const sim::PlanMagnitudes m = sim::EstimateMagnitudes(*spec, shape, c.copies, c.figures);
    text += fmt::format("\nchosen: {} copies of {}\n", c.copies, sim::DescribeShape(*spec, shape));
    text += fmt::format("  slice: ${}/M tokens within the SLO, {:.3f}% within it, TTFT p99 {:.2f}s, TPOT p99 {:.1f}ms, "
                        "prefix hit rate {:.1f}%\n",
                        Cost(c.figures.cost_per_million_tokens), 100 * c.figures.attainment, c.figures.ttft_p99_s,
                        1e3 * c.figures.tpot_p99_s, 100 * c.figures.prefix_hit_rate);
    text += "  order of magnitude, whole cluster (slice figures x copies; rates per second of the window):\n";
    text += fmt::format("    GPUs {} (${:.0f}/hour at the cards' prices)\n", m.gpus, m.dollars_per_hour);
    text += fmt::format("    KV blocks the units' HBM holds: {:.2g} (report: kv_capacity_tokens_per_unit / kv_block_tokens)\n",
                        m.hbm_kv_blocks);
    text += fmt::format("    objects a store tier would receive: {:.2g}/hour, {:.2g} GB/s written (computed prompt "
                        "blocks: report tokens.prefill_computed x KV bytes per token)\n",
                        m.store_objects_per_hour, m.store_write_gb_per_s);
    text += fmt::format("    prefill-to-decode KV transfer: {:.2g} GB/s, {:.1f}% of the decode units' NIC line rate "
                        "(report: kv_transfer.gigabytes)\n",
                        m.pd_transfer_gb_per_s, 100 * m.pd_transfer_nic_share);
    text += fmt::format("    failures per day: {:.2g} (the failure model's default rates, Llama 3 Table 5, per "
                        "GPU-hour; maintenance included); GPUs lost per failure: {:.0f} (a failed GPU stops its unit)\n",
                        m.failures_per_day, m.gpus_lost_per_failure);
    json["chosen_plan"] = {{"shape", sim::DescribeShape(*spec, shape)},
                           {"copies", c.copies},
                           {"gpus", m.gpus},
                           {"dollars_per_hour", m.dollars_per_hour},
                           {"hbm_kv_blocks", m.hbm_kv_blocks},
                           {"store_objects_per_hour", m.store_objects_per_hour},
                           {"store_write_gb_per_s", m.store_write_gb_per_s},
                           {"pd_transfer_gb_per_s", m.pd_transfer_gb_per_s},
                           {"failures_per_day", m.failures_per_day},
                           {"gpus_lost_per_failure", m.gpus_lost_per_failure}};
    if (!out_path_.empty()) {
      std::ofstream out(out_path_, std::ios::binary);
      out << sim::FormatPlanScenarioYaml(*spec, shape, c.copies);
      if (!out) {
        std::fprintf(stderr, "myriad plan: --out: cannot write %s\n", out_path_.c_str());
        return 1;
      }
    }
    if (confirm_) {
      auto whole = sim::BuildPlanScenario(*spec, shape, c.copies, true);
      auto report = whole.ok() ? sim::RunScenario(*whole) : absl::StatusOr<nlohmann::ordered_json>(whole.status());
      if (!report.ok()) {
        std::fprintf(stderr, "myriad plan: --confirm: %s\n", std::string(report.status().message()).c_str());
        return FailureCode(report.status());
      }
      confirmed = sim::ReadPlanFigures(*report);
      const sim::PlanFigures& f = *confirmed;
      text += fmt::format("  whole cluster (--confirm): ${}/M tokens within the SLO, {:.3f}% within it, TTFT p99 "
                          "{:.2f}s, TPOT p99 {:.1f}ms, prefix hit rate {:.1f}%\n",
                          Cost(f.cost_per_million_tokens), 100 * f.attainment, f.ttft_p99_s, 1e3 * f.tpot_p99_s,
                          100 * f.prefix_hit_rate);
      json["confirm"] = {{"cost_per_million_tokens_within_slo", CostJson(f.cost_per_million_tokens)},
                         {"slo_attainment", f.attainment},
                         {"ttft_p99_s", f.ttft_p99_s},
                         {"tpot_p99_s", f.tpot_p99_s}};
    }
  }
  if (baseline) {
    auto report = sim::RunScenario(*baseline);
    if (!report.ok()) {
      std::fprintf(stderr, "myriad plan: --baseline: %s\n", std::string(report.status().message()).c_str());
      return FailureCode(report.status());
    }
    const sim::PlanFigures b = sim::ReadPlanFigures(*report);
    // The chosen plan's cost against the baseline's, per token within the SLO: its slice's, and
    // its whole cluster's when --confirm ran it.
    const bool comparable = std::isfinite(b.cost_per_million_tokens) && b.cost_per_million_tokens > 0;
    auto versus = [&](double cost) {
      return comparable && std::isfinite(cost) ? fmt::format("{:+.1f}%", 100 * (cost / b.cost_per_million_tokens - 1))
                                               : std::string("-");
    };
    auto ratio = [&](double cost) { return CostJson(comparable ? cost / b.cost_per_million_tokens : INFINITY); };
    text += fmt::format("\nbaseline {}: ${}/M tokens within the SLO, {:.3f}% within it, TTFT p99 {:.2f}s, TPOT p99 "
                        "{:.1f}ms, prefix hit rate {:.1f}%, {:.0f} GPUs\n",
                        baseline_path_, Cost(b.cost_per_million_tokens), 100 * b.attainment, b.ttft_p99_s,
                        1e3 * b.tpot_p99_s, 100 * b.prefix_hit_rate, b.gpus);
    nlohmann::ordered_json bj = {{"scenario", baseline_path_},
                                 {"cost_per_million_tokens_within_slo", CostJson(b.cost_per_million_tokens)},
                                 {"slo_attainment", b.attainment},
                                 {"ttft_p99_s", b.ttft_p99_s},
                                 {"tpot_p99_s", b.tpot_p99_s},
                                 {"gpus", b.gpus}};
    if (chosen) {
      const double slice_cost = candidates[*chosen].figures.cost_per_million_tokens;
      text += fmt::format("  the chosen plan's cost per token within the SLO against it: slice {}", versus(slice_cost));
      bj["chosen_slice_cost_ratio"] = ratio(slice_cost);
      if (confirmed) {
        text += fmt::format(", whole cluster (--confirm) {}", versus(confirmed->cost_per_million_tokens));
        bj["chosen_whole_cost_ratio"] = ratio(confirmed->cost_per_million_tokens);
      }
      text += "\n";
    }
    json["baseline"] = std::move(bj);
  }
  if (!json_path_.empty()) {
    std::ofstream out(json_path_, std::ios::binary);
    out << json.dump(2) << "\n";
    if (!out) {
      std::fprintf(stderr, "myriad plan: -o: cannot write %s\n", json_path_.c_str());
      return 1;
    }
  }
  if (!quiet_) {
    std::printf("%s", text.c_str());
    std::fflush(stdout);
    // Wall time varies run to run: stderr, so that stdout stays the same bytes.
    std::fprintf(stderr, "searched in %.1fs wall, %.1fs CPU (%zu candidates, %.2fs CPU each) with %d job(s)\n", wall,
                 cpu, candidates.size(), candidates.empty() ? 0.0 : cpu / static_cast<double>(candidates.size()), jobs_);
  }
  return chosen ? 0 : 1;
}

}  // namespace myriad::cli
