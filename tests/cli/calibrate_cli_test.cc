// `myriad calibrate` as a user runs it: vLLM benchmark results in, a hardware profile out, and a
// scenario that names the profile.
#include <gtest/gtest.h>

#include <fstream>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "perf/calibration_fit.h"
#include "run_myriad.h"

namespace {

using myriad::testing::RunMyriad;
using myriad::testing::WriteTempFile;
using nlohmann::json;

// Hardware slower than the built-in calibration says: what a user's own cluster measured.
myriad::perf::Calibration Truth() {
  myriad::perf::Calibration c;
  c.gemm_efficiency = 0.45;
  c.attention_efficiency = 0.35;
  c.hbm_efficiency = 0.45;
  c.step_overhead = 4 * myriad::kMillisecond;
  return c;
}

double Measured(const myriad::perf::FitSample& s) {
  static const auto model = *myriad::perf::StepModel::Create(*myriad::perf::FindGpu("H100"),
                                                             *myriad::perf::FindModel("Llama-3.1-8B"), {}, {}, Truth());
  return myriad::perf::PredictSeconds(model, s);
}

// benchmark_serving --save-result --save-detailed at --max-concurrency 4; one failed request.
json Serving() {
  json j = {{"backend", "vllm"}, {"model_id", "meta-llama/Llama-3.1-8B-Instruct"}, {"request_rate", "inf"},
            {"burstiness", 1.0}, {"max_concurrency", 4}, {"request_throughput", 2.5}};
  const std::vector<int> inputs = {128, 256, 512, 1024, 2048, 4096, 8192, 16384};
  for (int i = 0; i < 40; ++i) {
    const int in = inputs[i % inputs.size()], out = 64;
    using myriad::perf::FitMetric;
    const double ttft = Measured({.metric = FitMetric::kTtft, .input_tokens = in, .output_tokens = out, .concurrency = 4});
    const double itl = Measured({.metric = FitMetric::kItl, .input_tokens = in, .output_tokens = out, .concurrency = 4});
    j["input_lens"].push_back(in);
    j["output_lens"].push_back(out);
    j["ttfts"].push_back(ttft);
    j["itls"].push_back(std::vector<double>(out - 1, itl));
  }
  j["input_lens"].push_back(100);
  j["output_lens"].push_back(0);
  j["ttfts"].push_back(0.0);
  j["itls"].push_back(json::array());
  return j;
}

json Latency(int batch, int in, int out) {
  const double t = Measured({.metric = myriad::perf::FitMetric::kLatency, .input_tokens = in, .output_tokens = out,
                             .concurrency = batch});
  return {{"avg_latency", t}, {"latencies", {t, t}}, {"percentiles", {{"50", t}, {"99", t}}}};
}

std::string Write(const std::string& name, const json& j) { return WriteTempFile(name, j.dump()); }

constexpr const char* kArgs = " --gpu H100 --model Llama-3.1-8B";

double TpotP50(const std::string& scenario) {
  const auto r = RunMyriad("sim " + scenario + " --json");
  EXPECT_EQ(r.code, 0) << r.out;
  return json::parse(r.out)["latency_s"]["tpot"]["p50"].get<double>();
}

TEST(CalibrateCli, FitsVllmBenchmarksWritesAProfileAndAScenarioSimulatesWithIt) {
  const std::string serving = Write("serve.json", Serving());
  // benchmark_latency's shape from the flags, or from keys a user added to the file.
  const std::string lat8 = Write("lat8.json", Latency(8, 32, 128));
  json lat32 = Latency(32, 1024, 128);
  lat32["batch_size"] = 32, lat32["input_len"] = 1024, lat32["output_len"] = 128;
  const std::string lat32_path = Write("lat32.json", lat32);
  const std::string profile = (myriad::testing::TestTempDir() / "h100.yaml").string();

  auto r = RunMyriad("calibrate " + serving + " " + lat8 + " " + lat32_path + kArgs +
                     " --batch-size 8 --input-len 32 --output-len 128 --json -o " + profile);
  ASSERT_EQ(r.code, 0) << r.out;
  const json report = json::parse(r.out);
  EXPECT_EQ(report["inputs"][0]["format"], "benchmark_serving");
  EXPECT_EQ(report["inputs"][0]["failed_requests"], 1);
  EXPECT_EQ(report["inputs"][1]["format"], "benchmark_latency");
  EXPECT_NEAR(report["fitted"]["hbm_efficiency"].get<double>(), 0.45, 0.45 * 0.03);
  EXPECT_NEAR(report["fitted"]["gemm_efficiency"].get<double>(), 0.45, 0.45 * 0.05);
  EXPECT_NEAR(report["fitted"]["step_overhead_s"].get<double>(), 0.004, 0.0004);
  for (const char* m : {"ttft", "itl"}) {
    EXPECT_GT(report["relative_error"][m]["out_of_sample"]["count"].get<int>(), 0) << m;
    EXPECT_LT(report["relative_error"][m]["out_of_sample"]["median"].get<double>(), 0.02) << m;
    EXPECT_GT(report["relative_error"][m]["built_in_out_of_sample"]["median"].get<double>(), 0.1) << m;
  }
  ASSERT_TRUE(std::ifstream(profile).good());

  // The same fit, printed for a person, with a file held out instead of every 4th sample.
  r = RunMyriad("calibrate " + serving + " " + lat8 + " " + lat32_path + kArgs +
                " --batch-size 8 --input-len 32 --output-len 128 --holdout " + lat32_path + " -o " + profile);
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("the --holdout files"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("hbm_efficiency"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("latency"), std::string::npos) << r.out;

  const std::string body = R"(
seed: 2
duration: 20s
model: Llama-3.1-8B
pools:
  - {name: u, role: colocated, count: 4, layout: {tp: 1, dp: 1, ep: 1}}
workload: {type: synthetic, rate: 10}
)";
  const std::string built_in = WriteTempFile("builtin.yaml", "hardware: {gpu: H100, nodes: 1}" + body);
  const std::string calibrated = WriteTempFile("calibrated.yaml", "hardware: {nodes: 1, calibration: h100.yaml}" + body);
  // Decode is memory-bound here: 45% of HBM bandwidth and 4 ms per step against 60% and 2 ms
  // make each step some 45% longer.
  const double before = TpotP50(built_in), after = TpotP50(calibrated);
  EXPECT_GT(after, before * 1.3) << before << " " << after;
  EXPECT_LT(after, before * 1.7) << before << " " << after;
}

// Vidur's mlp.csv for one Llama-2-7B layer, its GEMM times split over the four columns.
std::string VidurMlp(const std::string& gated = "True") {
  std::string csv =
      "n_head,n_kv_head,n_embd,n_expanded_embd,vocab_size,use_gated_mlp,num_tokens,num_tensor_parallel_workers,"
      "time_stats.attn_pre_proj.median,time_stats.attn_post_proj.median,time_stats.mlp_up_proj.median,"
      "time_stats.mlp_down_proj.median,time_stats.mlp_act.median\n";
  for (int tp : {1, 2, 4}) {
    for (int tokens : {1, 16, 128, 512, 2048, 4096}) {
      myriad::perf::FitSample s{.metric = myriad::perf::FitMetric::kLinearOps, .input_tokens = tokens,
                                .layer = {.hidden = 4096, .ffn = 11008, .heads = 32, .kv_heads = 32, .tp = tp}};
      const double ms = Measured(s) * 1e3;
      csv += fmt::format("32,32,4096,11008,32768,{},{},{},{},{},{},{},0.01\n", gated, tokens, tp, ms * 0.3, ms * 0.1,
                         ms * 0.4, ms * 0.2);
    }
  }
  return csv;
}

TEST(CalibrateCli, FitsVidurOperatorProfiles) {
  const std::string mlp = WriteTempFile("mlp.csv", VidurMlp());
  const auto r = RunMyriad("calibrate " + mlp + kArgs + " --json -o " +
                           (myriad::testing::TestTempDir() / "vidur.yaml").string());
  ASSERT_EQ(r.code, 0) << r.out;
  const json report = json::parse(r.out);
  EXPECT_EQ(report["inputs"][0]["format"], "vidur_mlp_csv");
  EXPECT_EQ(report["inputs"][0]["samples"], 18);
  // The GEMMs pin the GEMM efficiency and (at few tokens, reading the weights) HBM's.
  EXPECT_NEAR(report["fitted"]["gemm_efficiency"].get<double>(), 0.45, 0.45 * 0.03);
  EXPECT_NEAR(report["fitted"]["hbm_efficiency"].get<double>(), 0.45, 0.45 * 0.03);
  EXPECT_LT(report["relative_error"]["vidur_linear"]["out_of_sample"]["max"].get<double>(), 0.01);
}

// Every bad input is exit 2 with the file and the field named.
TEST(CalibrateCli, BadInputsNameTheFileAndField) {
  const std::string out = " -o " + (myriad::testing::TestTempDir() / "never.yaml").string();
  auto expect_bad = [&](const std::string& args, const std::string& says) {
    const auto r = RunMyriad("calibrate " + args + out);
    EXPECT_EQ(r.code, 2) << args << "\n" << r.out;
    EXPECT_NE(r.out.find(says), std::string::npos) << args << "\n" << r.out;
  };
  json s = Serving();
  s.erase("itls");
  expect_bad(Write("no_itls.json", s) + kArgs, "no_itls.json: itls: missing");
  s = Serving();
  s["ttfts"][2] = "fast";
  expect_bad(Write("str_ttft.json", s) + kArgs, "str_ttft.json: ttfts[2]: expected a number, got string");
  s = Serving();
  s["input_lens"] = "many";
  expect_bad(Write("str_lens.json", s) + kArgs, "str_lens.json: input_lens: expected a list, got string");
  s = Serving();
  s["input_lens"] = json::array();
  expect_bad(Write("empty.json", s) + kArgs, "empty.json: input_lens: is empty");
  s = Serving();
  s["input_lens"][0] = -5;
  expect_bad(Write("neg.json", s) + kArgs, "neg.json: input_lens[0]: must be between 1 and 10000000 (got -5)");
  s = Serving();
  s["output_lens"].erase(0);
  expect_bad(Write("short.json", s) + kArgs, "short.json: output_lens: has 40 entries but input_lens has 41");
  s = Serving();
  s["max_concurrency"] = 1.5;
  expect_bad(Write("conc.json", s) + kArgs, "conc.json: max_concurrency: expected an integer, got 1.5");
  s = Serving();
  s.erase("max_concurrency");
  s["request_rate"] = 4;
  s.erase("request_throughput");
  expect_bad(Write("paced.json", s) + kArgs, "paced.json: request_throughput: missing");
  expect_bad(Write("summary.json", json{{"mean_ttft_ms", 12.0}}) + kArgs, "summary.json: input_lens: missing");
  expect_bad(Write("other.json", json{{"tokens", 3}}) + kArgs, "other.json: unknown benchmark format");
  expect_bad(WriteTempFile("syntax.json", "{\n  \"avg_latency\": 1.0,\n  oops\n}") + kArgs, "syntax.json:3: not valid JSON");
  expect_bad(Write("list.json", json::array()) + kArgs, "list.json: expected a JSON object at the top, got array");
  const std::string lat = Write("lat.json", Latency(8, 32, 128));
  expect_bad(lat + kArgs, "lat.json: batch_size: missing");
  json bad_lat = Latency(8, 32, 128);
  bad_lat["avg_latency"] = "1s";
  expect_bad(Write("lat_str.json", bad_lat) + kArgs + " --batch-size 8 --input-len 32 --output-len 128",
             "lat_str.json: avg_latency: expected a number, got string");
  bad_lat = Latency(8, 32, 128);
  bad_lat["latencies"] = json::array();
  expect_bad(Write("lat_empty.json", bad_lat) + kArgs + " --batch-size 8 --input-len 32 --output-len 128",
             "lat_empty.json: latencies: is empty");
  expect_bad(lat + kArgs + " --batch-size 0 --input-len 32 --output-len 128", "--batch-size: must be between 1 and 65536 (got 0)");
  expect_bad((myriad::testing::TestTempDir() / "absent.json").string() + kArgs, "absent.json: cannot open");
  expect_bad(lat + " --gpu TPU --model Llama-3.1-8B", "--gpu: unknown GPU 'TPU'");
  expect_bad(lat + " --gpu H100 --model GPT-9", "--model: ");
  expect_bad(lat + kArgs + " --tp 0", "--tp: must be between 1 and 1024 (got 0)");
  expect_bad(lat + kArgs + " --holdout elsewhere.json", "--holdout: elsewhere.json is not one of the input files");
  expect_bad(lat + kArgs + " --batch-size 8 --input-len 32 --output-len 128 --holdout " + lat,
             "no sample left to fit to");

  std::string csv = VidurMlp();
  expect_bad(WriteTempFile("nocol.csv", csv.substr(csv.find(',') + 1)) + kArgs, "nocol.csv:1: n_head: missing column");
  std::string untimed = "n_head,n_kv_head,n_embd,n_expanded_embd,use_gated_mlp,num_tokens,num_tensor_parallel_workers\n"
                        "32,32,4096,11008,True,8,1\n";
  expect_bad(WriteTempFile("untimed.csv", untimed) + kArgs, "untimed.csv:1: time_stats.attn_pre_proj.median: missing column");
  std::string bad_cell = csv;
  bad_cell.replace(bad_cell.find("32,32,4096,11008,32768,True,16,"), 31, "32,32,4096,11008,32768,True,x6,");
  expect_bad(WriteTempFile("cell.csv", bad_cell) + kArgs, "cell.csv:3: num_tokens: expected an integer, got 'x6'");
  expect_bad(WriteTempFile("short.csv", csv + "32,32\n") + kArgs, "short.csv:20: row: has 2 cells but the header has 13");
  expect_bad(WriteTempFile("plain.csv", VidurMlp("False")) + kArgs, "plain.csv:2: use_gated_mlp: 'False'");
  expect_bad(WriteTempFile("header.csv", csv.substr(0, csv.find('\n') + 1)) + kArgs, "header.csv:1: rows: none");
}

}  // namespace
