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

}  // namespace myriad::sim::fault_test
