// Bad input through the `myriad` binary: every mistake exits 2 with a message that names the
// file, line and key (or the flag), never a crash, a hang or silent acceptance (README's contract).
#include <gtest/gtest.h>

#include <string>

#include <nlohmann/json.hpp>

#include "run_myriad.h"

namespace {

using myriad::testing::CommandResult;
using myriad::testing::RunMyriad;

// In the test process's own directory, named apart from the other CLI tests' files.
std::string Write(const std::string& name, const std::string& text) {
  return myriad::testing::WriteTempFile("input_" + name, text);
}

bool Has(const CommandResult& r, const std::string& text) { return r.out.find(text) != std::string::npos; }

// A scenario small enough to run in well under a second; `workload` replaces its last lines.
std::string Scenario(const std::string& workload = "workload: {type: synthetic, rate: 5}\n") {
  return "seed: 1\n"                                  // line 1
         "duration: 2s\n"                             // 2
         "hardware: {gpu: H200, nodes: 1}\n"          // 3
         "model: Llama-3.1-8B\n"                      // 4
         "pools:\n"                                   // 5
         "  - {name: u, role: colocated, count: 1, layout: {tp: 1, dp: 1, ep: 1}}\n"  // 6
         + workload;                                  // 7...
}

TEST(CliExitCodes, ParseErrorsExitTwo) {
  const std::string ok = Write("ok.yaml", Scenario());
  CommandResult r = RunMyriad("");  // no subcommand
  EXPECT_EQ(r.code, 2) << r.out;
  r = RunMyriad("sim " + myriad::testing::TestTempDir().string() + "/missing.yaml");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_TRUE(Has(r, "missing.yaml")) << r.out;
  r = RunMyriad("sim " + ok + " --frobnicate");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_TRUE(Has(r, "--frobnicate")) << r.out;
  r = RunMyriad("eplb --loads " + ok + " --gpus 1 --replicas 99999999999");  // beyond an int
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_TRUE(Has(r, "--replicas")) << r.out;
  r = RunMyriad("sim " + ok + " --scale -1");
  EXPECT_EQ(r.code, 2) << r.out;
  // Was accepted, then retried 'zzz' as an etcd address for ever.
  r = RunMyriad("kvstore master --listen 127.0.0.1:0 --etcd zzz", "", 30);
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_TRUE(Has(r, "--etcd")) << r.out;
}

TEST(CliExitCodes, HelpAndVersionExitZero) {
  EXPECT_EQ(RunMyriad("--help").code, 0);
  EXPECT_EQ(RunMyriad("sim --help").code, 0);
  const CommandResult r = RunMyriad("--version");
  EXPECT_EQ(r.code, 0);
  EXPECT_TRUE(Has(r, "myriad")) << r.out;
}

TEST(SimInput, WorkloadErrorsNameFileLineAndKey) {
  struct Case {
    std::string workload;
    std::string expected;
  };
  const Case cases[] = {
      {"workload:\n  type: synthetic\n  rate: -3\n", "x.yaml:9: workload.rate: must be > 0, got -3"},
      {"workload:\n  type: synthetic\n  arrival: uniform\n", "x.yaml:9: workload.arrival: must be poisson or gamma"},
      {"workload:\n  diurnal: {amplitude: 2}\n", "x.yaml:8: workload.diurnal.amplitude: must be in [0, 1], got 2"},
      {"workload:\n  input: {min: 100, max: 50}\n", "x.yaml:8: workload.input.max: must be >= min (100), got 50"},
      {"workload:\n  sessions:\n    turns_mean: 0.5\n", "x.yaml:9: workload.sessions.turns_mean: must be >= 1"},
      // A default that the file's other values make wrong: the nearest line the file has.
      {"workload:\n  system_prompts:\n    count: 0\n", "x.yaml:9: workload.system_prompts.count: must be >= 1"},
      {"workload:\n  tenants: {weights: [0, 0]}\n", "x.yaml:8: workload.tenants.weights: must not all be 0"},
  };
  for (const Case& c : cases) {
    const std::string path = Write("x.yaml", Scenario(c.workload));
    const CommandResult r = RunMyriad("sim " + path + " --quiet");
    EXPECT_EQ(r.code, 2) << c.workload << r.out;
    EXPECT_TRUE(Has(r, c.expected)) << "expected: " << c.expected << "\ngot: " << r.out;
  }
}

TEST(SimInput, HugeValuesAreBoundedBeforeAllocating) {
  const std::string trace = Write(
      "t.jsonl", "{\"timestamp\": 0, \"input_length\": 600, \"output_length\": 5, \"hash_ids\": [1, 2]}\n");
  struct Case {
    std::string file;
    std::string args;
    std::string expected;
  };
  const Case cases[] = {
      {Scenario("workload: {type: synthetic, rate: 1e308}\n"), "", "x.yaml:7: workload.rate: 1e+308/s for 2.00s"},
      {Scenario("workload: {type: mooncake, path: input_t.jsonl, replicas: 2000000000}\n"), "",
       "x.yaml:7: workload.replicas: must be between 1 and 1000000"},
      {Scenario("workload: {type: synthetic, input: {max: 2000000000}}\n"), "",
       "x.yaml:7: workload.input.max: must be at most 16777216"},
      {Scenario(), "--scale 1e6", "--scale: the cluster would have 8000000 GPUs, more than the simulator's maximum"},
      {Scenario(), "--load 1e12", "--load: workload.rate: 5e+12/s for 2.00s is about"},
      {"seed: 1\nduration: 2s\nhardware: {gpu: H200, nodes: 1}\nmodel: Llama-3.1-8B\npools:\n"
       "  - {name: u, count: 1000000000, layout: {tp: 1, dp: 1, ep: 1}}\n",
       "", "x.yaml:6: pools[0].count: must be between 0 and 262144"},
      {"seed: 1\nduration: 2s\nhardware: {gpu: H200, nodes: 100000}\nmodel: Llama-3.1-8B\npools:\n"
       "  - {name: u, count: 1, layout: {tp: 1, dp: 1, ep: 1}}\n",
       "", "x.yaml:3: hardware.nodes: 100000 nodes of 8 GPUs are more than the simulator's maximum of 262144 GPUs"},
      {"seed: 1\nduration: 2s\nhardware: {gpu: H200, nodes: 1}\nmodel: Llama-3.1-8B\npools:\n"
       "  - {name: u, count: 1, layout: {tp: 65536, dp: 65536, ep: 1}}\n",
       "", "x.yaml:6: pools[0].layout.dp: tp*dp = 4294967296 GPUs are more than"},
      // Many units that each fit: their sum is counted in 64 bits, not wrapped.
      {"seed: 1\nduration: 2s\nhardware: {gpu: H200, nodes: 32768}\nmodel: Llama-3.1-8B\npools:\n"
       "  - {name: a, count: 262144, layout: {tp: 8, dp: 1, ep: 1}}\n"
       "  - {name: b, count: 262144, layout: {tp: 8, dp: 1, ep: 1}}\n",
       "", "the units need 4194304 GPUs but the cluster has 262144"},
      {Scenario("faults: {rates: none, timeline_bucket: 1ns}\n"), "",
       "x.yaml:7: faults.timeline_bucket: must leave at most 1000000 buckets in duration + drain"},
      {"seed: 1\nduration: 100000h\nhardware: {gpu: H200, nodes: 1}\nmodel: Llama-3.1-8B\npools:\n"
       "  - {name: u, count: 1, layout: {tp: 1, dp: 1, ep: 1}}\nworkload: {type: synthetic, rate: 0.001}\n",
       "", "x.yaml:2: duration: must be positive and at most"},
  };
  for (const Case& c : cases) {
    const std::string path = Write("x.yaml", c.file);
    const CommandResult r = RunMyriad("sim " + path + " --quiet " + c.args, "", 60);
    EXPECT_EQ(r.code, 2) << c.file << c.args << "\n" << r.out;
    EXPECT_TRUE(Has(r, c.expected)) << "expected: " << c.expected << "\ngot: " << r.out;
  }
}

TEST(SimInput, DuplicateKeysNameBothLines) {
  const std::string path = Write("x.yaml", Scenario("workload:\n  rate: 5\n  rate: 50\n"));
  CommandResult r = RunMyriad("sim " + path + " --quiet");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_TRUE(Has(r, "x.yaml:9: workload.rate: duplicate key (first on line 8)")) << r.out;
  // Overrides re-emit the YAML: the lines named are still the file's.
  r = RunMyriad("sim " + path + " --quiet --set seed=2");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_TRUE(Has(r, "x.yaml:9: workload.rate: duplicate key (first on line 8)")) << r.out;
}

TEST(SimInput, SetWalksTheScenarioAndNamesWhatItCannotSet) {
  const std::string path = Write("set.yaml", Scenario() + "router: kv-aware\n");
  // The shorthand `router: NAME` expands to a mapping, so its other keys can be set.
  CommandResult r = RunMyriad("sim " + path + " --json --set router.learn_cost=false --set router.contention=2");
  ASSERT_EQ(r.code, 0) << r.out;
  r = RunMyriad("sim " + path + " --quiet --set router.contention=101");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_TRUE(Has(r, "router.contention: must be above 0 and at most 100")) << r.out;
  r = RunMyriad("sim " + path + " --quiet --set model.x=1");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_TRUE(Has(r, "--set 'model.x=1': 'model' is a value ('Llama-3.1-8B'), not a mapping or list")) << r.out;
  // A key into a list (was: yaml-cpp turned the list into a mapping and the pools vanished).
  r = RunMyriad("sim " + path + " --quiet --set pools.name.count=2");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_TRUE(Has(r, "--set 'pools.name.count=2': 'pools' is a list: name an entry by its index, not 'name'"))
      << r.out;
  EXPECT_EQ(RunMyriad("sim " + path + " --quiet --set pools.0.count=2").code, 0);
}

TEST(SimInput, SeedMustBeUnsigned) {
  const std::string path = Write("x.yaml", Scenario());
  CommandResult r = RunMyriad("sim " + path + " --quiet --seed -1");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_TRUE(Has(r, "--seed")) << r.out;
  r = RunMyriad("sim " + Write("y.yaml", "seed: -1\n" + Scenario().substr(8)) + " --quiet");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_TRUE(Has(r, "y.yaml:1: seed: -1 is out of range")) << r.out;
  EXPECT_EQ(RunMyriad("sim " + path + " --quiet --seed 18446744073709551615").code, 0);
}

TEST(SimInput, EmptyTraceIsAnError) {
  Write("empty.jsonl", "");
  Write("empty.csv", "TIMESTAMP,ContextTokens,GeneratedTokens\n");
  for (const std::string type : {"mooncake", "azure"}) {
    const std::string file = type == "mooncake" ? "input_empty.jsonl" : "input_empty.csv";
    const std::string path =
        Write("x.yaml", Scenario("workload: {type: " + type + ", path: " + file + "}\n"));
    const CommandResult r = RunMyriad("sim " + path + " --quiet");
    EXPECT_EQ(r.code, 2) << r.out;
    EXPECT_TRUE(Has(r, file + ": the trace has no requests")) << r.out;
  }
}

TEST(SimInput, NonFiniteNumbersAreRejected) {
  struct Case {
    std::string file;
    std::string expected;
  };
  const Case cases[] = {
      {"seed: 1\nduration: 2s\nhardware: {gpu: H200, nodes: 1}\nmodel: Llama-3.1-8B\npools:\n"
       "  - {name: u, count: 1, layout: {tp: 1, dp: 1, ep: 1}, moe: {rebalance_tolerance: .nan}}\n",
       "x.yaml:6: pools[0].moe.rebalance_tolerance: expected a finite number, got '.nan'"},
      {Scenario("workload: {type: synthetic, rate: .inf}\n"), "x.yaml:7: workload.rate: expected a finite number"},
      {Scenario("gpu_hour_price: .nan\n"), "x.yaml:7: gpu_hour_price: expected a finite number"},
      {Scenario("workload: {tenants: {weights: [1, .nan]}}\n"),
       "x.yaml:7: workload.tenants.weights[1]: expected a finite number"},
      {Scenario("drain: nan\n"), "x.yaml:7: drain: 'nan' is not a duration"},
  };
  for (const Case& c : cases) {
    const std::string path = Write("x.yaml", c.file);
    const CommandResult r = RunMyriad("sim " + path + " --quiet");
    EXPECT_EQ(r.code, 2) << c.file << r.out;
    EXPECT_TRUE(Has(r, c.expected)) << "expected: " << c.expected << "\ngot: " << r.out;
  }
}

TEST(SimInput, NonUtf8NamesDoNotAbortTheReport) {
  // A name with bytes that are not UTF-8, and a file whose name (the default scenario name) has some.
  const std::string named = Write("named.yaml", "name: \"caf\xe9 \xff\"\n" + Scenario());
  const std::string unnamed = Write("bad\xff\xfe.yaml", Scenario());
  for (const std::string& path : {named, unnamed}) {
    const std::string out = (myriad::testing::TestTempDir() / "input_out.json").string();
    const CommandResult r = RunMyriad("sim '" + path + "' --quiet --json -o " + out);
    ASSERT_EQ(r.code, 0) << r.out;
    const auto j = nlohmann::json::parse(r.out);
    EXPECT_NE(j["scenario"]["name"].get<std::string>().find("\xef\xbf\xbd"), std::string::npos) << r.out;
  }
}

TEST(EplbInput, DeepJsonIsRefused) {
  const std::string path = Write("deep.json", std::string(100'000, '[') + std::string(100'000, ']'));
  const CommandResult r = RunMyriad("eplb --loads " + path + " --replicas 8 --gpus 8");
  EXPECT_EQ(r.code, 2) << r.out.substr(0, 2000);
  EXPECT_TRUE(Has(r, "deep.json:1:3: nested deeper than 2 levels")) << r.out.substr(0, 2000);
}

TEST(EplbInput, ReplicasAndToleranceAreBounded) {
  const std::string loads = Write("loads.csv", "1,2,3,4\n5,6,7,8\n");
  CommandResult r = RunMyriad("eplb --loads " + loads + " --replicas 2000000000 --gpus 2");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_TRUE(Has(r, "--replicas 2000000000 is more than 64 per logical expert (4 experts: at most 256)")) << r.out;
  r = RunMyriad("eplb --loads " + loads + " --replicas 256 --gpus 2");
  EXPECT_EQ(r.code, 0) << r.out;
  r = RunMyriad("eplb --loads " + loads + " --replicas 8 --gpus 2 --from-loads " + loads + " --tolerance nan");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_TRUE(Has(r, "--tolerance")) << r.out;
}

// The last-resort catch around a command: an allocation that fails (here under a 512 MiB address
// space limit, for a placement within the bounds that needs about 1 GiB of tables) ends with a
// message and exit code 1, not an abort.
TEST(CliExitCodes, OutOfMemoryIsAnErrorNotAnAbort) {
#if defined(__SANITIZE_ADDRESS__)
  // ASan reserves terabytes of shadow address space at start: under `ulimit -v` the binary
  // cannot even start. The release build runs this test.
  GTEST_SKIP() << "ulimit -v and AddressSanitizer do not mix";
#endif
  std::string csv;
  for (int layer = 0; layer < 65; ++layer) {
    csv += "1000000";  // one hot expert gets nearly every replica: log2phy is 65 x 256 x 16129
    for (int e = 1; e < 256; ++e) csv += ",1";
    csv += "\n";
  }
  const std::string loads = Write("loads.csv", csv);
  const CommandResult r = myriad::testing::RunShell("(ulimit -v 524288; exec " + std::string(MYRIAD_BINARY) +
                                                    " eplb --loads " + loads +
                                                    " --replicas 16384 --gpus 64 > /dev/null)");
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_TRUE(Has(r, "myriad eplb: out of memory")) << r.out;
  EXPECT_LT(r.out.size(), 200u) << r.out;
}

}  // namespace
