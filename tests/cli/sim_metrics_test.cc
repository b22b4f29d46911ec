// `myriad sim`'s report figures against hand calculations on runs small enough to follow step
// by step: token counts exact, rates over the measured span, and utilisation as capacity used.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "run_myriad.h"
#include "../test_util/read_file.h"

namespace {

using myriad::test::ReadFile;

using myriad::testing::RunMyriad;
using myriad::testing::WriteTempFile;

double D(const nlohmann::json& j) { return j.get<double>(); }

// One Llama-3.1-8B engine on one H100 (TP1), eight sequences at most: the vLLM nightly
// latency test's shape (batch 8, 32 tokens in, 128 out).
std::string EngineScenario(const std::string& workload, int seed = 1) {
  return "name: batch8\nseed: " + std::to_string(seed) +
         "\nduration: 1s\ndrain: 60s\n"
         "hardware: {gpu: H100, nodes: 1, gpus_per_node: 8}\n"
         "model: Llama-3.1-8B\n"
         "pools:\n"
         "  - {name: engine, role: colocated, count: 1, layout: {tp: 1, dp: 1}, max_seqs: 8}\n"
         "workload:\n" +
         workload + "router: least-loaded\nslo: {ttft: 2s, tpot: 100ms}\n";
}

TEST(SimMetricsCli, FixedLengthPromptsSumExactlyWithSystemPromptsOn) {
  // Seed 30 draws 8 arrivals in the second; system prompts are on (the default), so some
  // prompts start with one. A fixed 32-token prompt used to become 33 tokens then (a 1-token
  // system prompt plus input.min of user message): 8 prompts summed to 259.
  const std::string scenario = WriteTempFile(
      "fixed.yaml", EngineScenario("  type: synthetic\n  rate: 8\n"
                                   "  input: {mean: 32, cv: 0, min: 32, max: 32}\n"
                                   "  output: {mean: 128, cv: 0, min: 128, max: 128}\n",
                                   30));
  const auto run = RunMyriad("sim " + scenario + " --json", "", 60);
  ASSERT_EQ(run.code, 0) << run.out;
  const auto r = nlohmann::json::parse(run.out);
  ASSERT_EQ(r["requests"]["arrived"].get<int>(), 8);
  EXPECT_EQ(r["tokens"]["arrived_input"].get<int>(), 8 * 32);
  EXPECT_EQ(r["tokens"]["completed_input"].get<int>(), 8 * 32);
  EXPECT_EQ(r["tokens"]["completed_output"].get<int>(), 8 * 128);
}

TEST(SimMetricsCli, RatesAndUtilisationMatchAHandCalculation) {
  // Eight requests at t = 0, 32 tokens in and 128 out each, on one engine that seats all eight.
  std::string trace;
  for (int i = 0; i < 8; ++i) {
    trace += "{\"timestamp\": 0, \"input_length\": 32, \"output_length\": 128, \"hash_ids\": [" + std::to_string(i) +
             "]}\n";
  }
  const std::string trace_path = WriteTempFile("batch8.jsonl", trace);
  const std::string scenario =
      WriteTempFile("batch8.yaml", EngineScenario("  type: mooncake\n  path: " + trace_path + "\n"));
  const std::string log = WriteTempFile("requests.jsonl", "");
  const std::string out = WriteTempFile("report.json", "");
  const auto run = RunMyriad("sim " + scenario + " --quiet -o " + out + " --request-log " + log, "", 60);
  ASSERT_EQ(run.code, 0) << run.out;
  const auto r = nlohmann::json::parse(ReadFile(out));
  ASSERT_EQ(r["requests"]["completed"].get<int>(), 8);

  // The measured span: from the first arrival (0) to the last completion, here past the 1 s
  // arrival window. Throughput x span gives back the exact token counts.
  double last_end = 0, running_s = 0, kv_token_s = 0;
  std::istringstream lines(ReadFile(log));
  std::string line;
  while (std::getline(lines, line)) {
    const auto q = nlohmann::json::parse(line);
    const double end = D(q["end_s"]), first_token = D(q["arrival_s"]) + D(q["ttft_s"]);
    last_end = std::max(last_end, end);
    // Running (a seat taken) from the prefill step's end, when it joins the batch, to its last step.
    running_s += end - first_token;
    // KV: the prompt's 32 tokens from arrival (within a step of admission), plus one token per
    // decode step, growing evenly to 127 over the decode time.
    kv_token_s += 32 * (end - D(q["arrival_s"])) + 127.0 / 2 * (end - first_token);
  }
  const auto& sc = r["scenario"];
  EXPECT_DOUBLE_EQ(D(sc["measured_from_s"]), 0.0);
  EXPECT_NEAR(D(sc["measured_to_s"]), last_end, 1e-9);
  const double span = D(sc["measured_span_s"]);
  EXPECT_NEAR(span, last_end, 1e-9);
  EXPECT_GT(span, D(sc["duration_s"]));
  EXPECT_NEAR(D(r["throughput"]["output_tokens_per_s"]) * span, 1024, 1e-6);
  EXPECT_NEAR(D(r["throughput"]["input_tokens_per_s"]) * span, 256, 1e-6);
  EXPECT_NEAR(D(r["throughput"]["requests_per_s"]) * span, 8, 1e-9);

  const auto& p = r["pools"][0];
  EXPECT_FALSE(p.contains("busy_fraction"));  // renamed: stepping_fraction
  // The engine steps without a gap from the first arrival to the last completion.
  EXPECT_NEAR(D(p["stepping_fraction"]["mean"]), 1.0, 1e-6);
  EXPECT_NEAR(D(p["batch_occupancy"]), running_s / (8 * span), 1e-6);
  const double kv_capacity = D(p["kv_capacity_tokens_per_unit"]);
  EXPECT_NEAR(D(p["kv_in_use_fraction"]), kv_token_s / (kv_capacity * span), 0.03 * kv_token_s / (kv_capacity * span));

  // FLOPs and HBM bytes by hand, from Llama-3.1-8B's config: 32 layers, hidden 4096, 32 heads
  // and 8 KV heads of 128, FFN 14336, vocabulary 128256, BF16 weights and KV.
  const double dense = 32 * (4096.0 * 128 * (2 * 32 + 2 * 8)) + 32 * (3.0 * 4096 * 14336);  // 6.98e9
  const double head = 128256.0 * 4096;
  const double core_per_position = 32 * (2.0 * 32 * 128 * 2);
  const double kv_bytes_per_token = 2.0 * 8 * 128 * 32 * 2;
  // One prompt alone in the first step, the other seven in the second; then 127 decode steps
  // each (the first token comes from the prefill step): 1016 decode tokens, 1024 outputs.
  const double decode_tokens = D(r["tokens"]["decoded"]) - 8;
  ASSERT_EQ(decode_tokens, 1016);
  const double prompt_positions = 8 * (32.0 * 33 / 2);
  const double decode_positions = 8 * (127 * 31 + 127 * 128 / 2.0);  // contexts 32 .. 158
  const double flops = 2 * (256 + decode_tokens) * dense + 2 * (1016 + 8) * head +
                       (prompt_positions + decode_positions) * core_per_position;
  EXPECT_NEAR(D(p["model_flops_utilisation"]), flops / (989e12 * span), 1e-3 * flops / (989e12 * span));
  // Every step reads the weights once (BF16), and each decode step the KV it attends to.
  const double steps = D(p["steps"]);
  ASSERT_EQ(steps, 129);
  const double bytes = steps * (dense + head) * 2 + (decode_positions + 256) * kv_bytes_per_token;
  EXPECT_NEAR(D(p["hbm_bandwidth_utilisation"]), bytes / (3.35e12 * span), 1e-3 * bytes / (3.35e12 * span));
  // Memory-bound decode at 60% of HBM bandwidth plus 2 ms a step: about half the bandwidth.
  EXPECT_GT(D(p["hbm_bandwidth_utilisation"]), 0.4);
  EXPECT_LT(D(p["hbm_bandwidth_utilisation"]), 0.6);

  const auto text = RunMyriad("sim " + scenario, "", 60);
  ASSERT_EQ(text.code, 0) << text.out;
  EXPECT_NE(text.out.find("stepping"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("batch occ"), std::string::npos) << text.out;
  EXPECT_EQ(text.out.find("busy"), std::string::npos) << text.out;
}

}  // namespace
