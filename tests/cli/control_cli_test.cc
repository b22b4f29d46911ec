// `myriad control` as an operator runs it: config errors exit 2 naming the file, line and key;
// --dry-run logs each action as a JSON line and carries none out (the gateway keeps serving
// the backend, the exec hook never runs).
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <filesystem>
#include <sstream>
#include <string>

#include "../gateway/gateway_test_util.h"
#include "run_myriad.h"

namespace {

using myriad::testing::RunMyriad;
using myriad::testing::RunShell;
using myriad::testing::WriteTempFile;
using json = nlohmann::json;

constexpr int kDeadlineS = 30;

// A bound loopback port nobody listens on: connections to it are refused.
class RefusingPort {
 public:
  RefusingPort() {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(a);
    if (::bind(fd_, reinterpret_cast<sockaddr*>(&a), len) == 0 &&
        ::getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len) == 0) {
      port_ = ntohs(a.sin_port);
    }
  }
  ~RefusingPort() { ::close(fd_); }
  int port() const { return port_; }

 private:
  int fd_ = -1;
  int port_ = 0;
};

TEST(ControlCli, ConfigErrorsExit2NamingFileLineAndKey) {
  struct Case {
    std::string yaml, expect;
  };
  const Case cases[] = {
      {"engines:\n  - {name: e0, url: http://127.0.0.1:1}\ndetect:\n  hang_after: 2h\n",
       "control.yaml:4: detect.hang_after: must be in [1ms, 1h] (got 2h)"},
      {"engines:\n  - {name: e0, url: http://127.0.0.1:1}\nscrape:\n  interval: 1ms\n",
       "control.yaml:4: scrape.interval: must be in [10ms, 10m]"},
      {"engines:\n  - {name: e0, url: http://127.0.0.1:1}\ngate:\n  warmup_requests: 5000\n",
       "control.yaml:4: gate.warmup_requests: must be in [0, 1000] (got 5000)"},
      {"engines:\n  - {name: e0, url: http://127.0.0.1:1}\n  - {name: e0, url: http://127.0.0.1:2}\n",
       "control.yaml:3: engines[1].name: duplicate engine name 'e0'"},
      {"engines:\n  - {name: e0, url: 127.0.0.1:1}\n", "control.yaml:2: engines[0].url: '127.0.0.1:1' is not an http"},
      {"engines:\n  - {name: e0, url: http://127.0.0.1:1}\nactuators:\n  exec:\n    reboot: x\n",
       "control.yaml:5: actuators.exec.reboot: unknown key"},
      {"listen: 127.0.0.1:0\n", "engines: required"},
      {"gateway: {url: 'http://127.0.0.1:1'}\nrollout:\n  model: m\n  min_requests: 0\n",
       "control.yaml:4: rollout.min_requests: 0 is not in [1, 100000000]"},
  };
  for (const Case& c : cases) {
    const std::string path = WriteTempFile("control.yaml", c.yaml);
    const auto r = RunMyriad("control --config " + path + " --check", "", kDeadlineS);
    EXPECT_EQ(r.code, 2) << c.yaml << r.out;
    EXPECT_NE(r.out.find(c.expect), std::string::npos) << c.yaml << r.out;
  }
  const auto missing = RunMyriad("control --config /nonexistent/control.yaml", "", kDeadlineS);
  EXPECT_EQ(missing.code, 2);
  EXPECT_NE(missing.out.find("/nonexistent/control.yaml: cannot open"), std::string::npos) << missing.out;
}

TEST(ControlCli, DryRunLogsTheActionsAndCarriesNoneOut) {
  myriad::gateway::GatewayConfig gc;
  gc.admin_token = "t0k";
  myriad::gateway::gwtest::Harness h(1, gc);
  RefusingPort dead;
  ASSERT_NE(dead.port(), 0);
  const std::filesystem::path hook = myriad::testing::TestTempDir() / "hook_ran";
  const std::string cfg = WriteTempFile(
      "control.yaml", fmt::format("listen: 127.0.0.1:0\n"
                                  "scrape: {{interval: 50ms, timeout: 200ms}}\n"
                                  "detect: {{crash_after_failed_probes: 2}}\n"
                                  "gateway: {{url: 'http://127.0.0.1:{}', admin_token: t0k}}\n"
                                  "engines:\n  - {{name: b0, url: 'http://127.0.0.1:{}'}}\n"
                                  "actuators:\n  exec: {{drain: 'touch {}'}}\n",
                                  h.gw->port(), dead.port(), hook.string()));
  // Runs until the deadline's SIGTERM (124 from timeout(1)), well after 2 failed scrapes.
  const auto r = RunShell(fmt::format("timeout -s TERM 2 {} control --config {} --dry-run", MYRIAD_BINARY, cfg));
  EXPECT_EQ(r.code, 124) << r.out;
  std::vector<json> lines;
  std::istringstream in(r.out);
  for (std::string line; std::getline(in, line);) {
    if (!line.empty() && line[0] == '{') lines.push_back(json::parse(line));
  }
  ASSERT_EQ(lines.size(), 2u) << r.out;
  EXPECT_EQ(lines[0]["action"], "drain");
  EXPECT_EQ(lines[0]["target"], "b0");
  EXPECT_EQ(lines[0]["reason"], "crash");
  EXPECT_EQ(lines[0]["dry_run"], true);
  EXPECT_EQ(lines[1]["action"], "restart");
  EXPECT_FALSE(std::filesystem::exists(hook));
  // The gateway was not asked to drain.
  myriad::net::HttpClient c = h.Client();
  auto b = c.Request("GET", "/admin/backends", "", {}, {{"Authorization", "Bearer t0k"}});
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(json::parse(b->body)["backends"][0]["draining"], false);
}

}  // namespace
