#include "cli/diagnose_command.h"

#include <fmt/format.h>

#include <cstdio>

#include <nlohmann/json.hpp>

#include "cli/diagnose_inputs.h"
#include "policy/diagnose.h"

namespace myriad::cli {

// More endpoints than this is a fleet for --prometheus, not a command line.
constexpr int kMaxMetricsUrls = 256;
constexpr int kMaxTop = 1000;

DiagnoseCommand::DiagnoseCommand(CLI::App& app) {
  cmd_ = app.add_subcommand("diagnose",
                            "Run the scale runbook over a simulation's results or live /metrics and print "
                            "findings ranked by impact (docs/diagnose.md)");
  auto* sim = cmd_->add_option("--sim", sim_path_, "A simulation's JSON results (myriad sim -o FILE, or --json)");
  auto* metrics = cmd_->add_option("--metrics", metrics_urls_,
                                   fmt::format("A /metrics URL to scrape: engines, the gateway, the controller "
                                               "(http://HOST:PORT[/PATH], default path /metrics; repeatable, at "
                                               "most {})",
                                               kMaxMetricsUrls));
  auto* prom = cmd_->add_option("--prometheus", prometheus_url_,
                                "A Prometheus server (http://HOST:PORT): its latest samples of the vllm: and "
                                "myriad_ families");
  sim->excludes(metrics)->excludes(prom);
  metrics->excludes(prom);
  cmd_->add_option("--router", router_,
                   "The gateway's routing policy, for the routing rule (live endpoints do not expose it)");
  cmd_->add_option("--top", top_, fmt::format("Print at most this many findings (1 to {})", kMaxTop))
      ->check(CLI::Range(1, kMaxTop))
      ->capture_default_str();
  cmd_->add_flag("--json", json_, "Print the findings as JSON");
}

int DiagnoseCommand::Run() {
  policy::DiagnoseInput in;
  if (!sim_path_.empty()) {
    auto r = ReadSimulationResults(sim_path_);
    if (!r.ok()) {
      std::fprintf(stderr, "myriad diagnose: --sim %s\n", std::string(r.status().message()).c_str());
      return 2;
    }
    in = *std::move(r);
  } else if (!metrics_urls_.empty() || !prometheus_url_.empty()) {
    if (metrics_urls_.size() > static_cast<size_t>(kMaxMetricsUrls)) {
      std::fprintf(stderr, "myriad diagnose: --metrics: %zu URLs, at most %d\n", metrics_urls_.size(), kMaxMetricsUrls);
      return 2;
    }
    std::vector<Exposition> expositions;
    absl::Status failed;
    const char* flag = prometheus_url_.empty() ? "--metrics" : "--prometheus";
    if (!prometheus_url_.empty()) {
      auto q = QueryPrometheus(prometheus_url_);
      if (q.ok()) expositions = *std::move(q);
      failed = q.status();
    }
    for (const std::string& url : metrics_urls_) {
      auto e = Scrape(url);
      if (!e.ok()) {
        failed = e.status();
        break;
      }
      expositions.push_back(*std::move(e));
    }
    if (!failed.ok()) {
      std::fprintf(stderr, "myriad diagnose: %s %s\n", flag, std::string(failed.message()).c_str());
      return absl::IsInvalidArgument(failed) ? 2 : 1;
    }
    in = FromExpositions(expositions);
  } else {
    std::fprintf(stderr, "myriad diagnose: give --sim FILE, --metrics URL... or --prometheus URL\n");
    return 2;
  }
  if (!router_.empty()) in.router = router_;
  std::vector<policy::Finding> findings = policy::Diagnose(in);
  if (findings.size() > static_cast<size_t>(top_)) findings.resize(static_cast<size_t>(top_));
  if (json_) {
    nlohmann::ordered_json out = nlohmann::ordered_json::array();
    for (const policy::Finding& f : findings) {
      out.push_back({{"suspicion", f.suspicion}, {"impact", f.impact}, {"unit", f.unit}, {"rank", f.rank},
                     {"symptom", f.symptom}, {"evidence", f.evidence}, {"check", f.check}, {"action", f.action}});
    }
    std::printf("%s\n", nlohmann::ordered_json({{"findings", out}}).dump(2).c_str());
    return 0;
  }
  if (findings.empty()) {
    std::printf("no findings: nothing the runbook's rules flag in what was read (%zu units, %zu radar entries)\n",
                in.units.size(), in.radar.size());
    return 0;
  }
  std::string text = "findings, largest estimated impact first\n";
  for (size_t i = 0; i < findings.size(); ++i) {
    const policy::Finding& f = findings[i];
    std::string where = f.unit;
    if (f.rank >= 0) where += fmt::format(" rank {}", f.rank);
    text += fmt::format("{:>2}. {:<16} impact {:>3.0f}%  {}\n", i + 1, f.suspicion, 100 * f.impact, where);
    text += fmt::format("    symptom   {}\n    evidence  {}\n    check     {}\n    action    {}\n", f.symptom,
                        f.evidence, f.check, f.action);
  }
  std::fputs(text.c_str(), stdout);
  return 0;
}

}  // namespace myriad::cli
