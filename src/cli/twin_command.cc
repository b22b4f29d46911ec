#include "cli/twin_command.h"

#include <fmt/format.h>

#include <filesystem>
#include <fstream>

#include "cli/twin.h"

namespace myriad::cli {

TwinCommand::TwinCommand(CLI::App& app) {
  cmd_ = app.add_subcommand("twin",
                            "Replay one workload live (gateway + emulated engines) and in the simulator, and compare them");
  cmd_->add_option("description", description_, "the twin description (docs/twin.md)")->required();
  cmd_->add_option("--out", out_,
                   "folder for the generated trace, scenario, both request logs and the comparison (default: a "
                   "new folder under the system's temporary directory)");
  cmd_->add_option("--speed", speed_, "override the description's speed (emulated seconds per real second)")
      ->check(CLI::Range(1e-3, kMaxTwinSpeed));
  cmd_->add_flag("--json", json_, "print the comparison as JSON");
  cmd_->add_flag("--check", check_, "exit 1 when a target is missed");
  cmd_->add_flag("--sim-only", sim_only_, "run only the simulated side (writes the scenario and trace)");
}

namespace {

bool WriteFile(const std::filesystem::path& p, const std::string& text) {
  std::ofstream out(p);
  out << text;
  out.close();
  return static_cast<bool>(out);
}

std::string SideLog(const TwinSide& s) {
  std::string out;
  for (size_t i = 0; i < s.requests.size(); ++i) {
    const TwinRequest& r = s.requests[i];
    out += fmt::format("{{\"index\":{},\"served\":{},\"reason\":\"{}\",\"entry\":{},\"decode\":{},\"ttft_s\":{:.6f},"
                       "\"prompt_tokens\":{},\"cached_tokens\":{}}}\n",
                       i, r.served, r.reason, r.entry, r.decode, r.ttft_s, r.prompt_tokens, r.cached_tokens);
  }
  return out;
}

}  // namespace

int TwinCommand::Run() {
  auto d = LoadTwinDescription(description_);
  if (!d.ok()) {
    fmt::print(stderr, "myriad twin: {}\n", std::string(d.status().message()));
    return 2;
  }
  if (speed_ > 0) d->speed = speed_;
  auto records = TwinRecords(*d);
  if (!records.ok()) {
    fmt::print(stderr, "myriad twin: {}\n", std::string(records.status().message()));
    return 2;
  }
  std::error_code ec;
  std::filesystem::path out = out_;
  if (out.empty()) {
    std::string tmpl = (std::filesystem::temp_directory_path() / "myriad-twin-XXXXXX").string();
    if (mkdtemp(tmpl.data()) == nullptr) {
      fmt::print(stderr, "myriad twin: cannot create a folder under {}\n", std::filesystem::temp_directory_path().string());
      return 1;
    }
    out = tmpl;
  } else if (std::filesystem::create_directories(out, ec); ec) {
    fmt::print(stderr, "myriad twin: --out {}: {}\n", out.string(), ec.message());
    return 2;
  }
  const std::filesystem::path trace = std::filesystem::absolute(out / "trace.jsonl");
  if (!WriteFile(trace, TwinTraceJsonl(*records))) {
    fmt::print(stderr, "myriad twin: cannot write {}\n", trace.string());
    return 1;
  }
  const double span_s = records->empty() ? 0 : NanosToSeconds(records->back().offset);
  fmt::print(stderr, "myriad twin: {} requests over {:.0f} emulated s; simulating...\n", records->size(), span_s);
  std::string scenario;
  auto sim = RunSimTwin(*d, trace.string(), *records, &scenario);
  WriteFile(out / "scenario.yaml", scenario);
  if (!sim.ok()) {
    fmt::print(stderr, "myriad twin: the simulated side: {}\n", std::string(sim.status().message()));
    return 1;
  }
  WriteFile(out / "sim.jsonl", SideLog(*sim));
  TwinSide live;
  if (!sim_only_) {
    fmt::print(stderr, "myriad twin: live at speed {} (about {:.0f} real s)...\n", d->speed, span_s / d->speed);
    auto l = RunLiveTwin(*d, *records);
    if (!l.ok()) {
      fmt::print(stderr, "myriad twin: the live side: {}\n", std::string(l.status().message()));
      return 1;
    }
    live = *std::move(l);
    WriteFile(out / "live.jsonl", SideLog(live));
  } else {
    live = *sim;
  }
  const TwinComparison c = CompareTwins(*d, *records, *sim, live);
  WriteFile(out / "comparison.json", c.Json());
  if (json_) {
    fmt::print("{}\n", c.Json());
  } else {
    fmt::print("twin '{}': {} requests, {} engines ({}), policy {}, speed {}; files in {}\n", d->name, records->size(),
               d->engines(), d->prefill > 0 ? fmt::format("{} prefill + {} decode", d->prefill, d->decode) : "colocated",
               d->policy, d->speed, out.string());
    fmt::print("{}", c.Table(TwinTargets{}));
  }
  return check_ && !c.ok() ? 1 : 0;
}

}  // namespace myriad::cli
