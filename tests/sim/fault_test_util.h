#pragma once
// Shared by the simulator's fault tests: run an inline scenario, read its report, and check
// that nothing was lost.
#include <gtest/gtest.h>

#include <string>

#include "sim/runner.h"

namespace myriad::sim::fault_test {

inline nlohmann::ordered_json RunFaults(const std::string& yaml) {
  auto s = ParseScenario(yaml, "inline.yaml");
  EXPECT_TRUE(s.ok()) << s.status();
  if (!s.ok()) return {};
  auto r = RunScenario(*s);
  EXPECT_TRUE(r.ok()) << r.status();
  return r.ok() ? *r : nlohmann::ordered_json{};
}

inline int64_t I(const nlohmann::ordered_json& j) { return j.get<int64_t>(); }
inline double D(const nlohmann::ordered_json& j) { return j.get<double>(); }

// Every arrived request ended completed or rejected with a reason, decoded tokens are all
// accounted for, and (when nothing was unfinished at the end) every KV reservation was freed.
inline void ExpectNothingLost(const nlohmann::ordered_json& r) {
  const auto& q = r["requests"];
  ASSERT_GT(I(q["arrived"]), 0);
  EXPECT_EQ(I(q["arrived"]), I(q["completed"]) + I(q["rejected"]));
  int64_t by_reason = 0;
  for (const auto& [reason, n] : q["rejected_by_reason"].items()) by_reason += I(n);
  EXPECT_EQ(by_reason, I(q["rejected"]));
  const auto& t = r["tokens"];
  EXPECT_EQ(I(t["decoded"]), I(t["completed_output"]) + I(t["unfinished_output_produced"]));
  if (I(q["rejected_by_reason"].value("unfinished_at_end", 0)) == 0) {
    for (const auto& p : r["pools"]) EXPECT_EQ(I(p["kv_tokens_in_use_at_end"]), 0) << p["name"];
  }
}

// The faults section of the elastic EP scenarios: no random faults, short recovery stages, the
// given scripted faults and elastic EP settings (YAML flow values).
inline std::string ElasticFaults(const std::string& scripted, const std::string& elastic) {
  return R"(faults:
  rates: none
  recovery: {eject: 1s, stop: 10s, spare_acquire: 60s, comm_init: 30s, warmup: 60s, readiness: 5s,
             peer_gb_per_s: 1000000, node_repair: 1h}
  detection: {eject_after_errors: 0}
  scripted: )" + scripted + R"(
  elastic_ep: )" + elastic + "\n";
}

}  // namespace myriad::sim::fault_test
