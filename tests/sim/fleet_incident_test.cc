// The controller in the simulator (sim/fleet_driver.h): policy::FleetController drives simulated
// engines through each fault of an incident script, as `myriad control` drives real ones.
#include "sim/fleet_incident.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace myriad::sim {
namespace {

// The engine's actions, in order, as "action:reason" (probe outcomes appended).
std::vector<std::string> Of(const FleetIncidentResult& r, int engine) {
  std::vector<std::string> out;
  for (const ControllerEvent& e : r.timeline) {
    if (e.engine != engine || e.action == "record_answer" || (e.action == "probe" && e.probe == "match")) continue;
    out.push_back(e.action + ":" + e.reason + (e.probe.empty() ? "" : ":" + e.probe));
  }
  return out;
}

const ControllerEvent* First(const FleetIncidentResult& r, int engine, const std::string& action) {
  for (const ControllerEvent& e : r.timeline) {
    if (e.engine == engine && e.action == action) return &e;
  }
  return nullptr;
}

FleetIncident Scaled() {
  FleetIncident inc;
  inc.engines = 5;
  inc.ranks = 4;
  inc.duration = 20 * kSecond;
  inc.drain = 10 * kSecond;
  inc.rate = 20;
  inc.max_tokens = 128;
  inc.driver.scrape_interval = 200 * kMillisecond;
  inc.driver.restart_time = 100 * kMillisecond;
  inc.driver.policy.hang_after = 2 * kSecond;
  inc.driver.policy.probe_period = 2 * kSecond;
  inc.driver.policy.warmup_requests = 1;
  const Nanos at = 3 * kSecond;
  inc.faults = {{at, 0, IncidentFaultKind::kCrash},
                {at, 1, IncidentFaultKind::kHang},
                {at, 2, IncidentFaultKind::kSlow, 2, 3.0},
                {at, 3, IncidentFaultKind::kWrongAnswer}};
  return inc;
}

TEST(SimFleetIncident, EachFaultIsDetectedAndHandledByTheController) {
  const FleetIncident inc = Scaled();
  auto r = RunFleetIncident(inc);
  ASSERT_TRUE(r.ok()) << r.status();
  const std::vector<std::string> restarted = {"drain:crash", "restart:crash", "warmup:back after restart:match",
                                              "readmit:warmup passed"};
  EXPECT_EQ(Of(*r, 0), restarted);
  EXPECT_EQ(Of(*r, 1), (std::vector<std::string>{"drain:hang", "restart:hang", "warmup:back after restart:match",
                                                  "readmit:warmup passed"}));
  EXPECT_EQ(Of(*r, 2), (std::vector<std::string>{"drain:straggler rank 2", "restart:straggler rank 2",
                                                  "warmup:back after restart:match", "readmit:warmup passed"}));
  EXPECT_EQ(Of(*r, 3), (std::vector<std::string>{"probe:periodic:mismatch", "drain:answer mismatch",
                                                  "cordon:answer mismatch"}));
  EXPECT_TRUE(Of(*r, 4).empty()) << "the healthy engine is left alone";
  const Nanos at = inc.faults[0].at, scrape = inc.driver.scrape_interval;
  // Two failed scrapes; hang_after without progress (counted from the last scrape that saw
  // progress: up to one scrape early); three suspicious windows; one probe period.
  EXPECT_LE(First(*r, 0, "drain")->at - at, 2 * scrape);
  EXPECT_GE(First(*r, 1, "drain")->at - at, inc.driver.policy.hang_after - scrape);
  EXPECT_LE(First(*r, 1, "drain")->at - at, inc.driver.policy.hang_after + scrape);
  EXPECT_LE(First(*r, 2, "drain")->at - at, (inc.driver.policy.straggler.windows + 1) * scrape);
  EXPECT_LE(First(*r, 3, "cordon")->at - at, inc.driver.policy.probe_period + scrape);
  // Back after the modelled restart and the next scrape.
  EXPECT_LE(First(*r, 0, "readmit")->at - First(*r, 0, "restart")->at, inc.driver.restart_time + scrape);
  // The restarted engines' requests were retried elsewhere, none lost.
  EXPECT_EQ(r->rejected, 0);
  EXPECT_EQ(r->completed, r->arrived);
}

TEST(SimFleetIncident, SameSeedSameTimeline) {
  auto a = RunFleetIncident(Scaled());
  auto b = RunFleetIncident(Scaled());
  ASSERT_TRUE(a.ok() && b.ok());
  ASSERT_EQ(a->timeline.size(), b->timeline.size());
  for (size_t i = 0; i < a->timeline.size(); ++i) {
    EXPECT_EQ(a->timeline[i].at, b->timeline[i].at);
    EXPECT_EQ(a->timeline[i].action, b->timeline[i].action);
  }
  EXPECT_EQ(a->completed, b->completed);
}

}  // namespace
}  // namespace myriad::sim
