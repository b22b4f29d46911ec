// Faults in a small simulated cluster: scripted faults with exact detection and recovery
// times, the practices switched on and off, and the invariants that must hold under faults.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "fault_test_util.h"
#include "sim/event_queue.h"
#include "sim/runner.h"
#include "sim/shared_bandwidth.h"

namespace myriad::sim {
namespace {

// 6 nodes of H100: 8 colocated Llama-3.1-8B units of 4 GPUs (TP4) on the first 4 nodes, 2
// spare nodes. Recovery stages have round times; weights from peers are effectively instant.
std::string Yaml(const std::string& faults, const std::string& extra = "") {
  return R"(
seed: 5
duration: 10m
drain: 10m
hardware: {gpu: H100, nodes: 6, gpus_per_node: 8, nodes_per_rack: 2}
model: Llama-3.1-8B
pools:
  - {name: serve, role: colocated, count: 8, layout: {tp: 4, dp: 1, ep: 1}}
workload:
  type: synthetic
  rate: 20
  input: {mean: 1000, cv: 1.0, min: 16, max: 8000}
  output: {mean: 200, cv: 1.0, min: 1, max: 2000}
  system_prompts: {count: 10, zipf: 1.0, tokens: 500, fraction: 0.5}
router: least-loaded
slo: {ttft: 2s, tpot: 100ms}
kv_block_tokens: 256
)" + extra + R"(
faults:
  rates: none
  recovery: {eject: 1s, stop: 10s, spare_acquire: 60s, comm_init: 30s, warmup: 60s, readiness: 5s,
             peer_gb_per_s: 1000000, node_repair: 1h}
)" + faults;
}

using fault_test::D;
using fault_test::ExpectNothingLost;
using fault_test::I;
using fault_test::RunFaults;

const nlohmann::ordered_json& Event(const nlohmann::ordered_json& r, const std::string& kind, int unit = -2) {
  for (const auto& e : r["failures"]["events"]) {
    if (e["kind"] == kind && (unit == -2 || I(e["unit"]) == unit)) return e;
  }
  static const nlohmann::ordered_json none;
  ADD_FAILURE() << "no " << kind << " event";
  return none;
}

TEST(Failures, CrashIsDetectedByHeartbeatAndRebuiltOnASpare) {
  const auto r = RunFaults(Yaml("  scripted: [{at: 60s, kind: crash, unit: 2}]\n  detection: {eject_after_errors: 0}\n"));
  const auto& e = Event(r, "crash");
  // The controller scrapes every 1 s; a 10 s timeout is ten failed scrapes in a row, from the
  // one at 60 s (the crash comes first) to the one at 69 s.
  EXPECT_DOUBLE_EQ(D(e["detected_s"]), 69);
  EXPECT_EQ(e["detected_by"], "heartbeat");
  // eject 1 + stop 10 + spare 60 + load ~0 + comm init 30 + warm-up 60 + readiness 5, then
  // the warmup gate at the next scrape re-admits it.
  EXPECT_NEAR(D(e["recovered_s"]), 69 + 166 + 1, 1e-3);
  const auto& f = r["failures"];
  EXPECT_EQ(I(f["spares"]["initial"]), 2);
  EXPECT_EQ(I(f["spares"]["min"]), 1);
  EXPECT_EQ(I(f["spares"]["at_end"]), 1);  // the crashed node is still in repair (1 h)
  EXPECT_GT(I(f["retried_requests"]), 0);
  EXPECT_EQ(I(f["unrecovered_at_end"]), 0);
  // Down from the crash to re-admission: 176 s of one unit out of 8 over the run.
  const double span = D(r["scenario"]["end_s"]);
  EXPECT_NEAR(D(f["availability"]["serve"]), 1 - 176.0 / (8 * span), 1e-6);
  ExpectNothingLost(r);
}

// The failure model decides nothing itself: policy::FleetController's actions, as `myriad
// control` logs them, drain and restart a crashed unit and re-admit it through the warmup
// gate; a corrupt one is drained and cordoned, repaired (a node replaced) and gated back.
TEST(Failures, TheControllerDecidesAndItsGateReadmits) {
  const auto r = RunFaults(Yaml("  scripted: [{at: 60s, kind: crash, unit: 2}, {at: 190s, kind: sdc, unit: 7}]\n"
                                "  detection: {eject_after_errors: 0, probe_interval: 60s}\n"));
  const auto& c = r["failures"]["controller"];
  auto lines = [&](int unit) {
    std::vector<std::string> out;
    for (const auto& l : c["timeline"]) {
      if (I(l["unit"]) == unit) out.push_back(l["action"].get<std::string>() + ":" + l["reason"].get<std::string>() + ":" + l.value("probe", ""));
    }
    return out;
  };
  EXPECT_EQ(lines(2), (std::vector<std::string>{"drain:crash:", "restart:crash:", "warmup:back after restart:match",
                                                "readmit:warmup passed:"}));
  EXPECT_EQ(lines(7), (std::vector<std::string>{"probe:periodic:mismatch", "drain:answer mismatch:",
                                                "cordon:answer mismatch:", "warmup:back after restart:match",
                                                "readmit:warmup passed:"}));
  EXPECT_TRUE(lines(0).empty());
  for (const auto& l : c["timeline"]) {
    if (l["action"] == "readmit") {
      EXPECT_DOUBLE_EQ(D(l["t_s"]), D(Event(r, I(l["unit"]) == 2 ? "crash" : "sdc")["recovered_s"]));
    }
  }
  EXPECT_EQ(I(c["actions"]["record_answer"]), 8);  // every unit admitted at t=0
  EXPECT_EQ(I(c["actions"]["cordon"]), 1);
  ExpectNothingLost(r);
}

TEST(Failures, RefusedRequestsEjectACrashedUnitBeforeTheHeartbeatTimeout) {
  const auto r = RunFaults(Yaml("  scripted: [{at: 60s, kind: crash, unit: 2}]\n  detection: {eject_after_errors: 3}\n"));
  const auto& e = Event(r, "crash");
  EXPECT_EQ(e["detected_by"], "passive_errors");
  EXPECT_GT(D(e["detected_s"]), 60);
  EXPECT_LT(D(e["detected_s"]), 70);
  // The controller takes the router's ejection as a witness: the restart starts at its next
  // scrape, not after ten failed ones.
  int restarts = 0;
  for (const auto& l : r["failures"]["controller"]["timeline"]) {
    if (l["action"] != "restart") continue;
    ++restarts;
    EXPECT_LE(D(l["t_s"]), D(e["detected_s"]) + 1);
  }
  EXPECT_EQ(restarts, 1);
  EXPECT_EQ(r["requests"]["rejected_by_reason"].value("failed_after_retries", 0), 0);
  ExpectNothingLost(r);
}

TEST(Failures, HangWaitsForTheWatchdogAndRestartsInPlace) {
  const std::string hang = "  scripted: [{at: 120s, kind: hang, unit: 5}]\n";
  const auto fast = RunFaults(Yaml(hang + "  detection: {watchdog_timeout: 30s}\n"));
  const auto slow = RunFaults(Yaml(hang + "  detection: {watchdog_timeout: 10m}\n"));
  EXPECT_DOUBLE_EQ(D(Event(fast, "hang")["detected_s"]), 150);
  EXPECT_DOUBLE_EQ(D(Event(slow, "hang")["detected_s"]), 720);
  // No spare needed: eject 1 + stop 10 + load ~0 + 30 + 60 + 5, and the gate at the next scrape.
  EXPECT_NEAR(D(Event(fast, "hang")["recovered_s"]), 150 + 106 + 1, 1e-3);
  EXPECT_EQ(I(fast["failures"]["spares"]["min"]), 2);
  // Requests stuck behind the hang wait for the watchdog: the tail pays for a long timeout.
  EXPECT_GT(D(slow["latency_s"]["e2e"]["max"]), D(fast["latency_s"]["e2e"]["max"]) + 400);
  ExpectNothingLost(fast);
  ExpectNothingLost(slow);
}

TEST(Failures, SilentCorruptionIsCaughtOnlyByProbes) {
  const std::string sdc = "  scripted: [{at: 190s, kind: sdc, unit: 7}]\n";
  const auto probed = RunFaults(Yaml(sdc + "  detection: {probe_interval: 60s}\n"));
  const auto blind = RunFaults(Yaml(sdc + "  detection: {probe_interval: 0s}\n"));
  // The controller probes every serving unit every 60 s from its admission at 0 s.
  EXPECT_DOUBLE_EQ(D(Event(probed, "sdc")["detected_s"]), 240);
  EXPECT_EQ(Event(probed, "sdc")["detected_by"], "probe");
  EXPECT_TRUE(Event(blind, "sdc")["detected_s"].is_null());
  EXPECT_GT(I(probed["requests"]["corrupted"]), 0);
  EXPECT_GT(I(blind["requests"]["corrupted"]), 5 * I(probed["requests"]["corrupted"]));
  ExpectNothingLost(probed);
  ExpectNothingLost(blind);
}

TEST(Failures, StragglerIsFlaggedFromStepTelemetryAndReplaced) {
  const std::string slow = "  scripted: [{at: 100s, kind: straggler, unit: 3, rank: 1, factor: 1.8}]\n";
  const auto evicted = RunFaults(Yaml(slow + "  straggler_detection: {interval: 10s, windows: 3}\n"));
  const auto kept = RunFaults(Yaml(slow + "  straggler_detection: {enabled: false, interval: 10s}\n"));
  const auto& e = Event(evicted, "straggler");
  // Three suspicious windows of 10 s: flagged at the third window boundary after 100 s.
  EXPECT_DOUBLE_EQ(D(e["detected_s"]), 130);
  EXPECT_EQ(e["detected_by"], "step_telemetry");
  EXPECT_FALSE(e["recovered_s"].is_null());
  EXPECT_TRUE(Event(kept, "straggler")["detected_s"].is_null());
  // The radar puts the slow rank first.
  const auto& radar = kept["failures"]["slow_node_radar"];
  ASSERT_FALSE(radar.empty());
  EXPECT_EQ(I(radar[0]["unit"]), 3);
  EXPECT_EQ(I(radar[0]["rank"]), 1);
  EXPECT_GT(D(radar[0]["step_time_excess"]), 0.5);
  EXPECT_EQ(I(evicted["failures"]["straggler_false_positives"]), 0);
  ExpectNothingLost(evicted);
  ExpectNothingLost(kept);
}

TEST(Failures, MaintenanceDrainsWithoutLosingWork) {
  const auto r = RunFaults(Yaml("  scripted: [{at: 240s, kind: maintenance, unit: 6}]\n  maintenance: {drain_timeout: 10m}\n"));
  const auto& e = Event(r, "maintenance");
  EXPECT_DOUBLE_EQ(D(e["detected_s"]), 240);
  EXPECT_EQ(e["detected_by"], "planned");
  EXPECT_FALSE(e["recovered_s"].is_null());
  EXPECT_EQ(I(r["failures"]["retried_requests"]), 0);  // drained, not killed
  ExpectNothingLost(r);
}

TEST(Failures, ASwitchTakesDownEveryUnitUnderItAndSparesRunOut) {
  // Rack 1 holds nodes 2 and 3: units 4..7. Two spares for four units.
  const auto r = RunFaults(Yaml("  scripted: [{at: 60s, kind: switch, rack: 1}]\n"));
  int hit = 0;
  for (const auto& e : r["failures"]["events"]) hit += e["kind"] == "switch";
  EXPECT_EQ(hit, 4);
  EXPECT_GT(I(r["failures"]["spares"]["waits"]), 0);
  EXPECT_EQ(I(r["failures"]["spares"]["min"]), 0);
  ExpectNothingLost(r);
}

TEST(Failures, RandomFaultsAreDeterministicAndConserveRequests) {
  const std::string random = "  rates: default\n  rate_scale: 60000\n";
  auto yaml = Yaml("");
  yaml.replace(yaml.find("  rates: none\n"), 14, random);
  const auto a = RunFaults(yaml);
  const auto b = RunFaults(yaml);
  EXPECT_EQ(a.dump(), b.dump());
  int64_t faults = 0;
  for (const auto& [k, n] : a["failures"]["faults"].items()) faults += I(n);
  EXPECT_GT(faults, 5);
  ExpectNothingLost(a);
}

TEST(Failures, DisaggregatedUnitsFailMidTransferWithoutLeakingKv) {
  // Prefill and decode pools: requests die in prefill queues, in KV transfers whose source or
  // destination fails, and in decode batches; all are retried and every KV token is returned.
  auto yaml = Yaml(R"(  scripted:
    - {at: 60s, kind: crash, unit: 1}
    - {at: 90s, kind: hang, unit: 5}
    - {at: 200s, kind: crash, unit: 6}
    - {at: 300s, kind: software_crash, unit: 2}
)");
  yaml.replace(yaml.find("  - {name: serve, role: colocated, count: 8, layout: {tp: 4, dp: 1, ep: 1}}"),
               std::string("  - {name: serve, role: colocated, count: 8, layout: {tp: 4, dp: 1, ep: 1}}").size(),
               "  - {name: prefill, role: prefill, count: 4, layout: {tp: 4, dp: 1, ep: 1}}\n"
               "  - {name: decode, role: decode, count: 4, layout: {tp: 4, dp: 1, ep: 1}}");
  const auto r = RunFaults(yaml);
  EXPECT_GT(I(r["failures"]["retried_requests"]), 0);
  EXPECT_GT(I(r["kv_transfer"]["count"]), 0);
  EXPECT_GT(I(r["failures"]["failed_kv_transfers"]), 0);
  EXPECT_EQ(I(r["failures"]["unrecovered_at_end"]), 0);
  ExpectNothingLost(r);
}

TEST(Failures, RecomputeLimiterShedsTheLowPriorityTenantFirst) {
  const std::string tenants = R"(tenants:
  - {name: interactive, priority: 1}
  - {name: batch, priority: 0}
)";
  auto yaml = Yaml("  recompute_limit: 0.02\n  scripted: [{at: 60s, kind: cache_loss}]\n", tenants);
  yaml.replace(yaml.find("  system_prompts"), 0, "  tenants: {weights: [1, 1]}\n");
  const auto r = RunFaults(yaml);
  ASSERT_TRUE(r["requests"]["rejected_by_reason"].contains("recompute_limited"));
  const auto& t = r["tenants"];
  ASSERT_EQ(t.size(), 2u);
  EXPECT_GT(I(t[1]["rejected"]), 2 * I(t[0]["rejected"]));
  ExpectNothingLost(r);
}

TEST(Failures, BadFaultSectionsNameTheField) {
  auto bad = ParseScenario(Yaml("  scripted: [{at: 1s, kind: meltdown, unit: 1}]\n"), "f.yaml");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("faults.scripted[0].kind"), std::string::npos) << bad.status();
  EXPECT_NE(bad.status().message().find("f.yaml:"), std::string::npos);
  auto s = ParseScenario(Yaml("  scripted: [{at: 1s, kind: crash, unit: 99}]\n"), "f.yaml");
  ASSERT_TRUE(s.ok()) << s.status();
  auto r = RunScenario(*s);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("faults.scripted[0].unit"), std::string::npos) << r.status();
  auto no_unit = ParseScenario(Yaml("  scripted: [{at: 1s, kind: hang}]\n"), "f.yaml");
  EXPECT_FALSE(no_unit.ok());
  // The controller scrapes every heartbeat interval: bounded as `myriad control`'s scrapes.
  for (const std::string d : {"heartbeat_interval: 1ms", "heartbeat_interval: 11m", "heartbeat_timeout: 2h",
                               "watchdog_timeout: 2h", "probe_interval: 500ms"}) {
    auto b = ParseScenario(Yaml("  detection: {" + d + "}\n"), "f.yaml");
    ASSERT_FALSE(b.ok()) << d;
    EXPECT_NE(b.status().message().find("faults.detection." + d.substr(0, d.find(':')) + ": must be"), std::string::npos)
        << b.status();
  }
  // The limiter's unit is a multiple of the nominal prefill throughput, bounded as the gateway's.
  auto limit = ParseScenario(Yaml("  recompute_limit: 101\n"), "f.yaml");
  ASSERT_FALSE(limit.ok());
  EXPECT_NE(limit.status().message().find("faults.recompute_limit: must be in [0, 100]"), std::string::npos)
      << limit.status();
}

TEST(SharedBandwidth, LoadersShareTheLinkAndSpeedUpWhenOthersFinish) {
  EventQueue q;
  SharedBandwidth link(q, 10e9);  // 10 GB/s
  Nanos a_done = -1, b_done = -1;
  link.Start(10e9, 1, 1e12, [&] { a_done = q.now(); });
  link.Start(20e9, 1, 1e12, [&] { b_done = q.now(); });
  while (q.Step()) {
  }
  // Both at 5 GB/s until A finishes at 2 s; B has 10 GB left, alone at 10 GB/s: 3 s.
  EXPECT_NEAR(NanosToSeconds(a_done), 2.0, 1e-6);
  EXPECT_NEAR(NanosToSeconds(b_done), 3.0, 1e-6);
  EXPECT_EQ(link.peak_flows(), 2);
}

}  // namespace
}  // namespace myriad::sim
