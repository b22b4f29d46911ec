// P/D hand-off in the simulator as the gateway does it: after the proxy's second exchange
// (router.handoff_delay), to the decode unit the router has handed the least (policy/decode_load.h).
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "sim/runner.h"

namespace myriad::sim {
namespace {

// Five H100s on nodes of their own: three Llama-3.1-8B prefill units, two decode units.
std::string PdScenario(const std::string& router, const std::string& workload, const std::string& extra = "") {
  return R"(
seed: 5
duration: 60s
drain: 10m
hardware: {gpu: H100, nodes: 5, gpus_per_node: 1, nodes_per_rack: 8}
model: Llama-3.1-8B
pools:
  - {name: prefill, role: prefill, count: 3, layout: {tp: 1}, max_batch_tokens: 8192}
  - {name: decode, role: decode, count: 2, layout: {tp: 1}, max_seqs: 64}
workload: )" + workload + "\nrouter: " + router + "\nslo: {ttft: 2s, tpot: 100ms}\nkv_block_tokens: 16\n" + extra;
}

std::map<uint64_t, RequestOutcome> RunPd(const std::string& yaml, nlohmann::ordered_json* report = nullptr) {
  auto s = ParseScenario(yaml, "handoff.yaml");
  EXPECT_TRUE(s.ok()) << s.status();
  std::map<uint64_t, RequestOutcome> out;
  if (!s.ok()) return out;
  auto r = RunScenario(*s, nullptr, [&](const RequestOutcome& o) { out[o.id] = o; });
  EXPECT_TRUE(r.ok()) << r.status();
  if (report != nullptr && r.ok()) *report = *r;
  return out;
}

constexpr const char* kSparse =
    "{type: synthetic, rate: 0.5, input: {mean: 1000, cv: 0.5, min: 16, max: 4000}, "
    "output: {mean: 8, cv: 0.5, min: 1, max: 16}}";

TEST(SimHandoff, TheDelayAddsToEveryPdRequestsFirstToken) {
  const auto base = RunPd(PdScenario("{policy: least-loaded}", kSparse));
  const auto later = RunPd(PdScenario("{policy: least-loaded, handoff_delay: 25ms}", kSparse));
  ASSERT_GT(base.size(), 10u);
  ASSERT_EQ(base.size(), later.size());
  // Requests far apart meet idle units: each one's first token comes exactly 25 ms later.
  std::vector<Nanos> shift;
  for (const auto& [id, o] : base) {
    const RequestOutcome& l = later.at(id);
    ASSERT_TRUE(o.reason.empty() && l.reason.empty()) << id;
    shift.push_back((l.first_token - l.arrival) - (o.first_token - o.arrival));
  }
  std::sort(shift.begin(), shift.end());
  EXPECT_EQ(shift[shift.size() / 2], 25 * kMillisecond);
  EXPECT_GE(shift.front(), 0);
}

TEST(SimHandoff, APrefillUnitThatDiesDuringTheDelayHasItsRequestsRetried) {
  nlohmann::ordered_json report;
  const std::string busy =
      "{type: synthetic, rate: 20, input: {mean: 2000, cv: 0.5, min: 16, max: 4000}, "
      "output: {mean: 50, cv: 0.5, min: 1, max: 200}}";
  const auto out = RunPd(PdScenario("{policy: least-loaded, handoff_delay: 400ms}", busy,
                                  "faults:\n  rates: none\n  scripted: [{at: 20s, kind: crash, unit: 0}]\n"
                                  "  recovery: {spare_nodes: 0, node_repair: 1000h}\n"),
                       &report);
  const auto& q = report["requests"];
  // Every request ends served or with a reason; none is lost in the delay.
  EXPECT_EQ(q["arrived"].get<int64_t>(), q["completed"].get<int64_t>() + q["rejected"].get<int64_t>());
  EXPECT_EQ(static_cast<int64_t>(out.size()), q["arrived"].get<int64_t>());
  EXPECT_GT(q["completed"].get<int64_t>(), 900);
  // Some were waiting out the delay (or on the wire) when their prefill unit died.
  EXPECT_GT(report["failures"]["failed_kv_transfers"].get<int64_t>(), 0) << report["failures"].dump();
}

TEST(SimHandoff, DecodeChoiceCountsWhatWasHandedOverIncludingKvStillOnTheWire) {
  // Three prompts of one block each reach three prefill units together and finish together; the
  // first will hold far more KV (a long answer). Handed over at one instant, the third goes to
  // the decode unit with the second, the one charged the least KV, though neither unit has
  // received anything yet.
  const std::filesystem::path trace = std::filesystem::path(::testing::TempDir()) / "handoff_trace.jsonl";
  {
    std::ofstream f(trace);
    f << R"({"timestamp": 0, "input_length": 512, "output_length": 4000, "hash_ids": [1]})" << '\n'
      << R"({"timestamp": 0, "input_length": 512, "output_length": 8, "hash_ids": [2]})" << '\n'
      << R"({"timestamp": 0, "input_length": 512, "output_length": 8, "hash_ids": [3]})" << '\n';
  }
  const auto out = RunPd(PdScenario("{policy: least-loaded}", "{type: mooncake, path: " + trace.string() + "}"));
  ASSERT_EQ(out.size(), 3u);
  EXPECT_NE(out.at(0).unit, out.at(1).unit);
  EXPECT_NE(out.at(1).unit, out.at(2).unit);
  EXPECT_NE(out.at(0).decode_unit, out.at(1).decode_unit);
  EXPECT_EQ(out.at(2).decode_unit, out.at(1).decode_unit);
}

TEST(SimHandoff, TheDelayIsBounded) {
  auto s = ParseScenario(PdScenario("{policy: least-loaded, handoff_delay: 11s}", kSparse), "h.yaml");
  ASSERT_FALSE(s.ok());
  EXPECT_NE(std::string(s.status().message()).find("router.handoff_delay: must be between 0 and 10s"),
            std::string::npos)
      << s.status();
}

}  // namespace
}  // namespace myriad::sim
