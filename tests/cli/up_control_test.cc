// `myriad up --control`: the controller runs beside the local cluster with a local actuator. An
// engine that crashes (the emulator's fault API) is drained, restarted by `myriad up` itself on
// the same port, passes the warmup gate and is re-admitted.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <thread>

#include <nlohmann/json.hpp>

#include "../test_util/child_process.h"
#include "../test_util/temp_dir.h"
#include "../test_util/wait_for.h"
#include "net/http_client.h"

namespace {

using namespace std::chrono_literals;
using json = nlohmann::json;

using myriad::test::ReadFile;
using myriad::test::WaitFor;

// The action lines (JSON) the controller printed for `target`.
std::vector<json> Lines(const std::string& out, const std::string& target) {
  std::vector<json> lines;
  std::istringstream in(out);
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] != '{') continue;
    json j = json::parse(line, nullptr, false);
    if (j.is_object() && j.value("target", "") == target) lines.push_back(std::move(j));
  }
  return lines;
}

TEST(UpControlCli, CrashedEngineIsRestartedOnItsPortAndReadmitted) {
  const auto dir = myriad::testing::TestTempDir();
  const std::string config = (dir / "control.yaml").string();
  std::ofstream(config) << "scrape: {interval: 100ms, timeout: 300ms}\n"
                           "detect: {crash_after_failed_probes: 2}\n"
                           "gate: {warmup_requests: 1, timeout: 5s}\n";
  const std::string out_path = (dir / "up.out").string();
  myriad::test::ChildProcess up({MYRIAD_BINARY, "up", "--engines", "2", "--port", "0", "--speed", "50", "--control",
                                 "--control-config", config},
                                out_path);
  std::smatch m;
  std::string text;
  ASSERT_TRUE(WaitFor(
      [&] {
        text = ReadFile(out_path);
        return text.find("controller on") != std::string::npos &&
               std::regex_search(text, m, std::regex(R"(engine-0\s+\S+\s+http://127\.0\.0\.1:(\d+))"));
      },
      10000ms))
      << text;
  const uint16_t port = static_cast<uint16_t>(std::stoi(m[1]));
  // Admitted first (its known answer recorded), then crashed.
  ASSERT_TRUE(WaitFor([&] { return !Lines(ReadFile(out_path), "engine-0").empty(); }, 5000ms)) << ReadFile(out_path);
  myriad::net::HttpClient engine(myriad::net::HostPort{"127.0.0.1", port},
                                 myriad::net::HttpClientOptions{.timeout = 1 * myriad::kSecond});
  (void)engine.Post("/admin/fault", R"({"kind":"crash"})");
  ASSERT_TRUE(WaitFor(
      [&] {
        for (const json& j : Lines(ReadFile(out_path), "engine-0")) {
          if (j["action"] == "readmit") return true;
        }
        return false;
      },
      15000ms))
      << ReadFile(out_path);
  std::vector<std::string> actions;
  for (const json& j : Lines(ReadFile(out_path), "engine-0")) {
    actions.push_back(j["action"].get<std::string>());
    if (j["action"] == "restart") {
      EXPECT_EQ(j["ok"], true) << j.dump();
    }
  }
  EXPECT_EQ(actions, (std::vector<std::string>{"record_answer", "drain", "restart", "warmup", "readmit"}));
  // The new engine on the old port.
  myriad::net::HttpClient again(myriad::net::HostPort{"127.0.0.1", port});
  auto health = again.Get("/health");
  ASSERT_TRUE(health.ok());
  EXPECT_EQ(health->status, 200);
  const int status = up.Kill(SIGTERM);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
}

TEST(UpControlCli, ControlConfigErrorsExit2) {
  const auto dir = myriad::testing::TestTempDir();
  const std::string bad = (dir / "bad.yaml").string();
  std::ofstream(bad) << "detect:\n  hang_after: 2h\n";
  std::ofstream(dir / "engines.yaml") << "engines:\n  - {name: x, url: 'http://127.0.0.1:1'}\n";
  struct Case {
    std::string args, expect;
  };
  const Case cases[] = {
      {"--control --control-config " + bad, "bad.yaml:2: detect.hang_after: must be in [1ms, 1h] (got 2h)"},
      {"--control --control-config " + (dir / "engines.yaml").string(), "engines.yaml:2: engines: the cluster's own: leave it out"},
      {"--control-config " + bad, "--control-config needs --control"},
      {"--control --control-listen nowhere", "--control-listen: 'nowhere' is not HOST:PORT"},
  };
  for (const Case& c : cases) {
    FILE* p = popen((std::string("timeout -s KILL 20 ") + MYRIAD_BINARY + " up --port 0 " + c.args + " 2>&1").c_str(),
                    "r");
    std::string text;
    char buf[4096];
    while (size_t n = fread(buf, 1, sizeof buf, p)) text.append(buf, n);
    const int status = pclose(p);
    EXPECT_EQ(WEXITSTATUS(status), 2) << c.args << "\n" << text;
    EXPECT_NE(text.find(c.expect), std::string::npos) << c.args << "\n" << text;
  }
}

}  // namespace
