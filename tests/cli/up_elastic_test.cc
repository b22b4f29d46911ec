// `myriad up --control` with the elasticity policies, driven as a user would: `myriad loadgen`
// at a base rate, then x3 for a step. The controller adds engines through the local actuator
// within the policy's lead time of the step, and after it drains and stops them, one per dwell,
// down to the pool's min. A P/D cluster whose prefill engine is pressed by long prompts while
// its decode engines idle gets a decode engine switched to prefill. Times are compared on the
// monotonic clock the controller stamps its lines with (t_s); the bounds are generous, for a
// loaded machine.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>

#include <chrono>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "../test_util/child_process.h"
#include "run_myriad.h"
#include "../test_util/temp_dir.h"
#include "../test_util/wait_for.h"
#include "core/steady_now.h"
#include "net/http_client.h"

namespace {

using namespace std::chrono_literals;
using json = nlohmann::json;
using myriad::NanosToSeconds;
using myriad::SteadyNow;
using myriad::test::ReadFile;
using myriad::test::WaitFor;

constexpr const char* kToken = "elastic-test-token";

// The controller's action lines (JSON), all targets.
std::vector<json> Actions(const std::string& out) {
  std::vector<json> lines;
  std::istringstream in(out);
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] != '{') continue;
    json j = json::parse(line, nullptr, false);
    if (j.is_object() && j.contains("action") && j.contains("t_s")) lines.push_back(std::move(j));
  }
  return lines;
}

std::vector<json> Named(const std::vector<json>& lines, const std::string& action) {
  std::vector<json> out;
  for (const json& j : lines) {
    if (j.value("action", "") == action) out.push_back(j);
  }
  return out;
}

// The gateway's backends as its admin API lists them: name -> role.
std::map<std::string, std::string> Backends(uint16_t port) {
  myriad::net::HttpClient c(myriad::net::HostPort{"127.0.0.1", port},
                            myriad::net::HttpClientOptions{.timeout = 5 * myriad::kSecond});
  auto r = c.Request("GET", "/admin/backends", "", {}, {{"Authorization", std::string("Bearer ") + kToken}});
  std::map<std::string, std::string> out;
  if (!r.ok() || r->status != 200) {
    ADD_FAILURE() << "GET /admin/backends: " << (r.ok() ? r->body : r.status().ToString());
    return out;
  }
  const json list = json::parse(r->body);
  for (const json& b : list["backends"]) out[b.value("name", "")] = b.value("role", "");
  return out;
}

struct Up {
  std::string out_path;
  std::unique_ptr<myriad::test::ChildProcess> proc;
  uint16_t port = 0;

  Up(const std::filesystem::path& dir, const std::string& config, std::vector<std::string> engines) {
    const std::string cfg = (dir / "control.yaml").string();
    std::ofstream(cfg) << config;
    out_path = (dir / "up.out").string();
    std::vector<std::string> args = {MYRIAD_BINARY, "up", "--port", "0", "--speed", "1", "--admin-token", kToken,
                                     "--control", "--control-config", cfg};
    args.insert(args.end(), engines.begin(), engines.end());
    proc = std::make_unique<myriad::test::ChildProcess>(args, out_path);
    std::smatch m;
    std::string text;
    EXPECT_TRUE(WaitFor(
        [&] {
          text = ReadFile(out_path);
          return text.find("controller on") != std::string::npos &&
                 std::regex_search(text, m, std::regex(R"(gateway on http://127\.0\.0\.1:(\d+))"));
        },
        10000ms))
        << text;
    if (!m.empty()) port = static_cast<uint16_t>(std::stoi(m[1]));
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port); }
  std::vector<json> Lines() const { return Actions(ReadFile(out_path)); }
  ~Up() {
    const int status = proc->Kill(SIGTERM);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  }
};

// Waits for a loadgen's report (it ends with its error count).
bool Reported(const std::filesystem::path& out, std::chrono::milliseconds within) {
  return WaitFor([&] { return ReadFile(out.string()).find(" errors") != std::string::npos; }, within);
}

std::unique_ptr<myriad::test::ChildProcess> Loadgen(const std::filesystem::path& dir, const std::string& name,
                                                    const std::string& url, std::vector<std::string> extra) {
  std::vector<std::string> args = {MYRIAD_BINARY, "loadgen", "--url", url, "--model", "emu-model", "-c", "64"};
  args.insert(args.end(), extra.begin(), extra.end());
  return std::make_unique<myriad::test::ChildProcess>(args, (dir / name).string());
}

// Requests of 64 tokens take about 0.6 s on an emulated H100 at speed 1: 4 requests/s keep
// 2.4 in flight (utilisation 0.4 of 6), 12 requests/s 7.2 (saturated).
constexpr const char* kScaleConfig =
    "scrape: {interval: 200ms, timeout: 1s}\n"
    "gate: {warmup_requests: 1, timeout: 5s}\n"
    "signals: {engine_concurrency: 6, smoothing: 1s}\n"
    "autoscale:\n"
    "  pools: {colocated: {min: 1, max: 3}}\n"
    "  target_utilisation: 1\n"
    "  headroom: 0\n"
    "  lead_time: 2s\n"
    "  scale_in_dwell: 3s\n"
    "  smoothing: 1s\n"
    "  trend_window: 2s\n";

TEST(UpElasticCli, LoadStepAddsEnginesWithinTheLeadTimeAndDrainsThemAfter) {
  const auto dir = myriad::testing::TestTempDir();
  Up up(dir, kScaleConfig, {"--engines", "1"});
  ASSERT_NE(up.port, 0);
  ASSERT_TRUE(WaitFor([&] { return !Named(up.Lines(), "record_answer").empty(); }, 5000ms)) << ReadFile(up.out_path);
  auto base = Loadgen(dir, "base.out", up.url(), {"--rate", "4", "--duration", "26s", "--max-tokens", "64"});
  std::this_thread::sleep_for(6s);
  EXPECT_TRUE(Named(up.Lines(), "scale_out").empty()) << "the base rate fits one engine\n" << ReadFile(up.out_path);
  // The step: 8 more requests/s for 8 s.
  const double step_at = NanosToSeconds(SteadyNow());
  auto step = Loadgen(dir, "step.out", up.url(),
                      {"--rate", "8", "--duration", "8s", "--max-tokens", "64", "--seed", "2"});
  const double step_end = step_at + 8;
  ASSERT_TRUE(WaitFor([&] { return !Named(up.Lines(), "scale_out").empty(); }, 8000ms)) << ReadFile(up.out_path);
  const json first = Named(up.Lines(), "scale_out").front();
  EXPECT_EQ(first["ok"], true) << first.dump();
  EXPECT_EQ(first["role"], "colocated");
  // Within the lead time (2 s) of the step, plus the smoothing (1 s) and slack for a busy machine.
  EXPECT_LE(first["t_s"].get<double>(), step_at + 5) << first.dump();
  EXPECT_GE(first["t_s"].get<double>(), step_at) << first.dump();
  const std::string added = first["target"];
  EXPECT_EQ(added, "engine-1") << "a new engine, the next index";
  // The new engine is in the gateway and admitted by the controller's gate.
  EXPECT_TRUE(Backends(up.port).count(added)) << added;
  // Back to min after the step: every engine added is drained, then stopped; the last scale-in
  // a dwell (3 s) after the step at least.
  ASSERT_TRUE(WaitFor(
      [&] {
        const auto lines = up.Lines();
        return !Named(lines, "scale_out").empty() &&
               Named(lines, "stop").size() == Named(lines, "scale_out").size();
      },
      30000ms))
      << ReadFile(up.out_path);
  EXPECT_TRUE(Reported(dir / "step.out", 10000ms));
  EXPECT_TRUE(Reported(dir / "base.out", 20000ms));
  const auto lines = up.Lines();
  const auto outs = Named(lines, "scale_out"), ins = Named(lines, "scale_in"), stops = Named(lines, "stop");
  EXPECT_LE(outs.size(), 2u) << "max 3 engines";
  ASSERT_EQ(ins.size(), outs.size()) << ReadFile(up.out_path);
  // Not drained while the step runs: the dwell (3 s) counts from when the controller's smoothed
  // rate fell, which can be before the loadgen's own end (2.3 s after it was seen once).
  EXPECT_GE(ins.back()["t_s"].get<double>(), step_end) << ins.back().dump();
  for (size_t i = 0; i < ins.size(); ++i) {
    EXPECT_EQ(ins[i]["ok"], true) << ins[i].dump();
    EXPECT_EQ(stops[i]["ok"], true) << stops[i].dump();
    // Each drained engine is stopped after its drain, and the next drain waits a dwell.
    EXPECT_EQ(stops[i]["target"], ins[i]["target"]);
    EXPECT_GE(stops[i]["t_s"].get<double>(), ins[i]["t_s"].get<double>());
    if (i > 0) {
      EXPECT_GE(ins[i]["t_s"].get<double>(), ins[i - 1]["t_s"].get<double>() + 3 - 0.1);
    }
  }
  for (const json& s : stops) EXPECT_FALSE(Backends(up.port).count(s["target"])) << s.dump();
  EXPECT_EQ(Backends(up.port).size(), 1u);
  EXPECT_TRUE(Backends(up.port).count("engine-0")) << "the first engine stays: min 1";
  // The clients saw no errors through the scale-out and the scale-in.
  EXPECT_NE(ReadFile((dir / "step.out").string()).find(" 0 errors"), std::string::npos)
      << ReadFile((dir / "step.out").string());
  EXPECT_NE(ReadFile((dir / "base.out").string()).find(" 0 errors"), std::string::npos)
      << ReadFile((dir / "base.out").string());
}

// Prompts of 3000 words (about 4,000 tokens) at 12 requests/s keep the one prefill engine busy
// while the two decode engines, asked for 2 tokens each, idle.
constexpr const char* kPdConfig =
    "scrape: {interval: 200ms, timeout: 1s}\n"
    "gate: {warmup_requests: 1, timeout: 5s}\n"
    "signals: {engine_concurrency: 2, smoothing: 500ms}\n"
    "pd_ratio: {high: 0.85, low: 0.5, confirm: 1s, dwell: 1m, min_engines: 1}\n";

TEST(UpElasticCli, PdImbalanceIsCorrectedByARoleSwitch) {
#if defined(__SANITIZE_ADDRESS__)
  // The switch follows a real-time prefill-pressure signal from 3,000-word prompts; under the
  // sanitizer the engines and loadgen run several times slower and no pressure built within the
  // test's 15 s (seen 2026-12-02). The decision is covered under ASan by ElasticDriver.* and
  // ControllerElastic.* on virtual time; this end-to-end timing runs in the release build.
  GTEST_SKIP() << "real-time P/D signal; runs in the release build";
#endif
  const auto dir = myriad::testing::TestTempDir();
  Up up(dir, kPdConfig, {"--prefill", "1", "--decode", "2"});
  ASSERT_NE(up.port, 0);
  ASSERT_TRUE(WaitFor([&] { return Named(up.Lines(), "record_answer").size() == 3; }, 5000ms))
      << ReadFile(up.out_path);
  std::this_thread::sleep_for(2s);
  EXPECT_TRUE(Named(up.Lines(), "switch_role").empty()) << "idle: balanced\n" << ReadFile(up.out_path);
  const double load_at = NanosToSeconds(SteadyNow());
  auto load = Loadgen(dir, "load.out", up.url(),
                      {"--rate", "12", "--duration", "6s", "--max-tokens", "2", "--prompt-words", "3000"});
  ASSERT_TRUE(WaitFor(
      [&] {
        for (const json& j : up.Lines()) {
          if (j.value("action", "") == "readmit" && j.value("reason", "") == "warmup passed") return true;
        }
        return false;
      },
      15000ms))
      << ReadFile(up.out_path);
  const auto lines = up.Lines();
  const auto switches = Named(lines, "switch_role");
  ASSERT_EQ(switches.size(), 1u) << "one switch, then the dwell\n" << ReadFile(up.out_path);
  const json& sw = switches.front();
  EXPECT_EQ(sw["role"], "prefill");
  // One of the two decode engines (the newest idle one: which is idle depends on where the
  // router put the last decode).
  const std::string moved = sw["target"];
  ASSERT_TRUE(moved == "engine-1" || moved == "engine-2") << sw.dump();
  const std::string stays = moved == "engine-1" ? "engine-2" : "engine-1";
  EXPECT_NE(sw["reason"].get<std::string>().find("prefill pressure"), std::string::npos) << sw.dump();
  // Confirmed for 1 s first; within a few seconds of the load on a busy machine.
  EXPECT_GE(sw["t_s"].get<double>(), load_at + 1) << sw.dump();
  EXPECT_LE(sw["t_s"].get<double>(), load_at + 8) << sw.dump();
  // Carried out as a role change: drained, restarted with the role, through the gate, readmitted.
  std::vector<std::string> after;
  for (const json& j : lines) {
    if (j.value("target", "") == moved && j["t_s"].get<double>() >= sw["t_s"].get<double>()) {
      after.push_back(j["action"]);
    }
  }
  EXPECT_EQ(after, (std::vector<std::string>{"switch_role", "drain", "change_role", "warmup", "readmit"}))
      << ReadFile(up.out_path);
  const auto roles = Backends(up.port);
  EXPECT_EQ(roles.at(moved), "prefill");
  EXPECT_EQ(roles.at(stays), "decode");
  EXPECT_EQ(roles.at("engine-0"), "prefill");
  EXPECT_TRUE(Reported(dir / "load.out", 20000ms));
}

TEST(UpElasticCli, ElasticConfigErrorsExit2NamingFileLineAndKey) {
  const std::string bad = myriad::testing::WriteTempFile(
      "elastic_bad.yaml", "autoscale:\n  pools:\n    colocated: {min: 4, max: 3}\n");
  const auto r = myriad::testing::RunMyriad("up --port 0 --control --control-config " + bad, "", 20);
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("elastic_bad.yaml:3: autoscale.pools.colocated.min: must be in [1, 3] (got 4)"),
            std::string::npos)
      << r.out;
}

}  // namespace
