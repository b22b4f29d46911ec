// `myriad gateway` and `myriad up` as an operator starts them: a config that cannot start must
// fail at once with a clear error and an exit code (a process that hangs with SIGTERM blocked
// is never restarted by systemd or Kubernetes), and `--check` refuses what start would refuse.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>

#include "run_myriad.h"

namespace {

using myriad::testing::RunMyriad;
using myriad::testing::WriteTempFile;

// Hangs are what these tests look for: every command gets a deadline (killed: code 137).
constexpr int kDeadlineS = 30;

// A listening socket on an ephemeral loopback port, held for the test: the port is busy.
class BusyPort {
 public:
  BusyPort() {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(a);
    if (::bind(fd_, reinterpret_cast<sockaddr*>(&a), len) == 0 && ::listen(fd_, 4) == 0 &&
        ::getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len) == 0) {
      port_ = ntohs(a.sin_port);
    }
  }
  ~BusyPort() { ::close(fd_); }
  int port() const { return port_; }

 private:
  int fd_ = -1;
  int port_ = 0;
};

std::string Config(const std::string& name, const std::string& body) {
  return WriteTempFile(name, "access_log: ''\n" + body);
}

const char kBackend[] =
    "backends:\n  - {name: e0, url: 'http://127.0.0.1:9', model: m}\n";

TEST(GatewayCli, BusyListenPortExitsWithAnErrorInsteadOfHanging) {
  BusyPort busy;
  ASSERT_NE(busy.port(), 0);
  auto cfg = Config("busy.yaml", "listen: 127.0.0.1:" + std::to_string(busy.port()) + "\n" + kBackend);
  auto r = RunMyriad("gateway --config " + cfg, "", kDeadlineS);
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("cannot listen"), std::string::npos) << r.out;
}

TEST(GatewayCli, BusyListenPortWithUpstreamThreadsAndEventsExits) {
  BusyPort busy;
  ASSERT_NE(busy.port(), 0);
  auto cfg = Config("busy2.yaml", "listen: 127.0.0.1:" + std::to_string(busy.port()) +
                                      "\nupstream_threads: 2\nbackends:\n"
                                      "  - {name: e0, url: 'http://127.0.0.1:9', model: m, "
                                      "kv_events: 'tcp://127.0.0.1:9'}\n");
  auto r = RunMyriad("gateway --config " + cfg, "", kDeadlineS);
  EXPECT_EQ(r.code, 1) << r.out;
}

TEST(GatewayCli, UpOnABusyPortExitsWithAnError) {
  BusyPort busy;
  ASSERT_NE(busy.port(), 0);
  auto r = RunMyriad("up --engines 1 --port " + std::to_string(busy.port()), "", kDeadlineS);
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("cannot listen"), std::string::npos) << r.out;
}

// Each of these said "config ok" (or hung at start) before; now --check and start alike exit 2
// naming the field.
TEST(GatewayCli, CheckRefusesWhatStartWouldRefuse) {
  struct Case {
    std::string name, body, expect;
  };
  const Case cases[] = {
      {"kvurl.yaml",
       "backends:\n  - {name: e0, url: 'http://127.0.0.1:9', model: m, kv_events: 'not a url'}\n",
       "kv_events"},
      {"threads.yaml", std::string("threads: 1e8\n") + kBackend, "threads"},
      {"upthreads.yaml", std::string("upstream_threads: 100000\n") + kBackend, "upstream_threads"},
      {"model.yaml", std::string("routing: {perf_model: no-such-model}\n") + kBackend, "no-such-model"},
      {"gpu.yaml", std::string("routing: {perf_gpu: Z80}\n") + kBackend, "Z80"},
      {"tp.yaml", std::string("routing: {perf_tp: 0}\n") + kBackend, "perf_tp"},
      {"tok.yaml", std::string("routing: {tokenizer: /nonexistent/tokenizer.json}\n") + kBackend,
       "routing.tokenizer"},
      {"body.yaml", std::string("max_body_bytes: 18446744073709551615\n") + kBackend, "max_body_bytes"},
      {"dup.yaml", std::string("threads: 2\nthreads: 3\n") + kBackend, "duplicate key"},
      {"nan.yaml", std::string("routing: {reject_factor: .nan}\n") + kBackend, "reject_factor"},
  };
  for (const Case& c : cases) {
    auto cfg = Config(c.name, c.body);
    for (const std::string flags : {" --check", ""}) {
      auto r = RunMyriad("gateway --listen 127.0.0.1:0 --config " + cfg + flags, "", kDeadlineS);
      EXPECT_EQ(r.code, 2) << c.name << flags << ": " << r.out;
      EXPECT_NE(r.out.find(c.expect), std::string::npos) << c.name << flags << ": " << r.out;
      EXPECT_EQ(r.out.find("config ok"), std::string::npos) << c.name << flags << ": " << r.out;
    }
  }
}

TEST(GatewayCli, CheckRefusesADirectoryAndAComplexKey) {
  auto r = RunMyriad("gateway --check --config " + myriad::testing::TestTempDir().string(), "", kDeadlineS);
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("is a directory"), std::string::npos) << r.out;
  auto complex = Config("complex.yaml", std::string("? [a, b]\n: 1\n") + kBackend);
  r = RunMyriad("gateway --check --config " + complex, "", kDeadlineS);
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("complex.yaml:"), std::string::npos) << r.out;
}

// A rollout's share is a fraction: 25 (meant as percent) is refused, naming the line and key.
TEST(GatewayCli, CheckRefusesARolloutShareOutOfBounds) {
  auto cfg = Config("rollout.yaml", std::string(kBackend) +
                                        "rollouts:\n  - {model: m, stable: v1, canary: v2, share: 25}\n");
  auto r = RunMyriad("gateway --check --config " + cfg, "", kDeadlineS);
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("rollouts[0].share: 25 is not in [0, 1]"), std::string::npos) << r.out;
}

TEST(GatewayCli, CheckAcceptsAGoodConfig) {
  auto cfg = Config("good.yaml", std::string("threads: 4\n") + kBackend);
  auto r = RunMyriad("gateway --check --config " + cfg, "", kDeadlineS);
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("config ok"), std::string::npos) << r.out;
}

}  // namespace
