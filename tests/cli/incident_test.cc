// One incident script, both worlds (issue 21 item 7): `myriad incident` plays it in the
// simulator, bench/control_incident.sh against `myriad up --control` with emulated engines and
// `myriad loadgen`; the same policy::FleetController decides in both, so each engine's
// controller events come in the same order, at times within a tolerance. Scaled thresholds.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "run_myriad.h"

namespace {

using json = nlohmann::json;
using myriad::testing::RunMyriad;
using myriad::testing::RunShell;
using myriad::testing::WriteTempFile;

struct Event {
  double t;
  std::string action, reason;
};

// Per engine, the actions that change its state (the serving engines' periodic probes that
// match, and admissions, are left out: how many fit depends on the world's pace), with
// consecutive repeats of one action collapsed: a gate that runs again because the first probe
// came too early is the same step.
std::map<std::string, std::vector<Event>> Timeline(const std::string& out) {
  std::map<std::string, std::vector<Event>> by;
  std::istringstream in(out);
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] != '{') continue;
    const json j = json::parse(line, nullptr, false);
    if (!j.is_object() || !j.contains("action")) continue;
    const std::string action = j["action"];
    if (action == "record_answer" || (action == "probe" && j.value("probe", "") != "mismatch")) continue;
    auto& list = by[j["target"].get<std::string>()];
    if (action == "warmup" && !list.empty() && list.back().action == "warmup") continue;
    list.push_back({j["t_s"].get<double>(), action, j.value("reason", "")});
  }
  return by;
}

std::string Names(const std::vector<Event>& v) {
  std::string s;
  for (const Event& e : v) s += e.action + "(" + e.reason + ") ";
  return s;
}

TEST(IncidentScript, BadInputNamesTheFileLineAndKey) {
  const std::string control = WriteTempFile("ctl.yaml", "scrape: {interval: 200ms}\n");
  const std::string base = "engines: 2\ndp: 4\nduration: 10s\ncontrol: ctl.yaml\nfaults:\n";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"  - {at: 1s, engine: 0, fault: melt}\n", ":6: faults[0].fault: 'melt' is not crash, hang, slow or wrong_answer"},
      {"  - {at: 1s, engine: 2, fault: crash}\n", ":6: faults[0].engine: must be in [0, 2)"},
      {"  - {at: 11s, engine: 0, fault: crash}\n", ":6: faults[0].at: must be in [0s, duration]"},
      {"  - {at: 1s, engine: 0, fault: slow, rank: 4, factor: 2}\n", ":6: faults[0].rank: must be in [0, dp) = [0, 4)"},
      {"  - {at: 1s, engine: 0, fault: slow, rank: 1}\n", ":6: faults[0].factor: required for a slow fault"},
      {"  - {at: 1s, engine: 0, fault: crash, factor: 2}\n", ":6: faults[0].factor: only a slow fault has it"},
  };
  for (const auto& [fault, want] : cases) {
    const std::string path = WriteTempFile("incident.yaml", base + fault);
    const auto r = RunMyriad("incident " + path);
    EXPECT_EQ(r.code, 2) << r.out;
    EXPECT_NE(r.out.find(path + want), std::string::npos) << r.out;
  }
  const std::string big = WriteTempFile("big.yaml", "engines: 65\n");
  auto r = RunMyriad("incident " + big);
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.out.find(big + ":1: engines: must be in [1, 64] (got 65)"), std::string::npos) << r.out;
  // The control config's own errors name that file.
  WriteTempFile("bad_ctl.yaml", "detect: {hang_after: 2h}\n");
  const std::string uses = WriteTempFile("uses.yaml", "control: bad_ctl.yaml\n");
  r = RunMyriad("incident " + uses);
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.out.find("bad_ctl.yaml:1: detect.hang_after: must be in [1ms, 1h]"), std::string::npos) << r.out;
}

TEST(ControlIncident, OneScriptGivesTheSameEventsInTheSimulatorAndAgainstRealEngines) {
  WriteTempFile("control.yaml",
                "scrape: {interval: 200ms, timeout: 500ms}\n"
                "detect: {hang_after: 2s, crash_after_failed_probes: 2, restart_timeout: 20s}\n"
                "gate: {warmup_requests: 1, timeout: 5s, probe_period: 2s}\n");
  const std::string script = WriteTempFile("incident.yaml",
                                           "engines: 5\ndp: 4\nspeed: 5\nduration: 8s\ndrain: 10s\n"
                                           "restart_time: 100ms\ncontrol: control.yaml\n"
                                           "load: {rate: 40, concurrency: 256, prompt_tokens: 64, max_tokens: 256}\n"
                                           "faults:\n"
                                           "  - {at: 2s, engine: 0, fault: crash}\n"
                                           "  - {at: 2s, engine: 1, fault: hang}\n"
                                           "  - {at: 2s, engine: 2, fault: slow, rank: 2, factor: 3}\n"
                                           "  - {at: 2s, engine: 3, fault: wrong_answer}\n");
  const auto sim = RunMyriad("incident " + script, "", 60);
  ASSERT_EQ(sim.code, 0) << sim.out;
  const auto real = RunShell(fmt::format("timeout -s KILL 90 {}/bench/control_incident.sh {} {}", MYRIAD_SOURCE_DIR,
                                         script, MYRIAD_BINARY));
  ASSERT_EQ(real.code, 0) << real.out;
  const auto s = Timeline(sim.out), r = Timeline(real.out);
  const double fault_at = 2.0, scrape = 0.2;
  for (int i = 0; i < 5; ++i) {
    const std::string e = fmt::format("engine-{}", i);
    const auto& se = s.count(e) ? s.at(e) : std::vector<Event>{};
    const auto& re = r.count(e) ? r.at(e) : std::vector<Event>{};
    ASSERT_EQ(Names(se), Names(re)) << e << "\nsimulator:\n" << sim.out << "\nreal:\n" << real.out;
    for (size_t k = 0; k < se.size(); ++k) {
      // Detection is quantised by the scrapes in both worlds, and a real round is slower: it
      // waits for the probes and restarts of the engines before this one (up to a second at
      // speed 5). A straggler needs windows in which every rank stepped: real ranks idle now
      // and then, so it may take a few windows more. Periodic probes run at a phase set by
      // each world's admission, up to one period apart.
      double tolerance = 2 * scrape + 1.0;
      if (se[k].reason.starts_with("straggler")) tolerance += 6 * scrape;
      if (se[k].action == "probe" || se[k].reason == "answer mismatch") tolerance += 2.0;
      EXPECT_LE(std::abs(se[k].t - re[k].t), tolerance)
          << e << " " << se[k].action << ": simulator " << se[k].t << " s, real " << re[k].t << " s";
      EXPECT_GE(re[k].t, fault_at - scrape) << e << " acted on before its fault";
    }
  }
  EXPECT_EQ(Names(s.at("engine-3")), "probe(periodic) drain(answer mismatch) cordon(answer mismatch) ");
  fmt::print("simulator:\n{}\nreal:\n{}\n", sim.out, real.out);
}

}  // namespace
