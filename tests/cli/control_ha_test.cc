// Two `myriad control` processes on a real etcd: one leads and acts, the other follows; the
// leader is SIGKILLed mid-incident (an engine down, restarted by its hook, not back yet) and the
// follower takes over within 5 s without carrying out again what the dead one recorded: the
// exec hooks, which append to one file, show each action once.
#include <fcntl.h>
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <fstream>
#include <mutex>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "../test_util/child_process.h"
#include "../test_util/etcd_process.h"
#include "../test_util/temp_dir.h"
#include "net/http_client.h"
#include "net/http_server.h"
#include "../test_util/wait_for.h"

namespace {

using myriad::test::ReadFile;

using namespace std::chrono_literals;
using myriad::test::EtcdProcess;
using myriad::test::WaitUntil;

// An engine as the controller sees it: vLLM's metrics while up, 503 while down, and the
// known answer.
class FakeEngine {
 public:
  FakeEngine()
      : http_(myriad::net::HttpServerOptions{}, [this](const myriad::net::HttpRequest& r) { return Handle(r); }) {
    EXPECT_TRUE(http_.Start().ok());
  }
  ~FakeEngine() { http_.Stop(); }
  void set_up(bool up) { up_ = up; }
  // What the known-answer probe gets from now on (silent corruption when it changes).
  void set_answer(const std::string& text) {
    std::lock_guard l(mu_);
    answer_ = text;
  }
  uint16_t port() const { return http_.port(); }

 private:
  myriad::net::HttpResponse Handle(const myriad::net::HttpRequest& r) {
    if (!up_) return {503, "text/plain", "down", {}};
    if (r.path() == "/metrics") {
      return {200, "text/plain",
              "vllm:num_requests_running{model_name=\"m\"} 0\nvllm:num_requests_waiting{model_name=\"m\"} 0\n"
              "vllm:generation_tokens_total{model_name=\"m\"} 7\n",
              {}};
    }
    std::lock_guard l(mu_);
    return {200, "application/json", fmt::format(R"({{"choices":[{{"index":0,"text":"{}"}}]}})", answer_), {}};
  }
  std::atomic<bool> up_{true};
  std::mutex mu_;
  std::string answer_ = " Paris";
  myriad::net::HttpServer http_;
};

// A `myriad control` process, its stdout (the action lines) and stderr in files of its own.
class ControlProcess {
 public:
  ControlProcess(const std::string& config, const std::string& name)
      : out_(myriad::testing::TestTempDir() / (name + ".out")),
        err_(myriad::testing::TestTempDir() / (name + ".err")),
        process_({MYRIAD_BINARY, "control", "--config", config}, out_.string(), err_.string()) {}
  void Kill(int sig) { process_.Kill(sig); }
  std::string out() const { return ReadFile(out_); }
  // The port of its /metrics, once it printed it.
  uint16_t port() const {
    std::smatch m;
    const std::string err = ReadFile(err_);
    if (!std::regex_search(err, m, std::regex(R"(\(port (\d+)\))"))) return 0;
    return static_cast<uint16_t>(std::stoi(m[1]));
  }
  // Its myriad_control_leader gauge: 1, 0, or -1 when it does not answer.
  int leader() const {
    const uint16_t p = port();
    if (p == 0) return -1;
    myriad::net::HttpClient c(myriad::net::HostPort{"127.0.0.1", p},
                              myriad::net::HttpClientOptions{.timeout = 500 * myriad::kMillisecond});
    auto r = c.Get("/metrics");
    if (!r.ok() || r->status != 200) return -1;
    std::smatch m;
    if (!std::regex_search(r->body, m, std::regex(R"(\nmyriad_control_leader (\d))"))) return -1;
    return std::stoi(m[1]);
  }

 private:
  std::filesystem::path out_, err_;
  myriad::test::ChildProcess process_;
};

size_t Count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

TEST(ControlHaCli, NewLeaderTakesOverWithin5sAndDoesNotRepeatARecordedAction) {
  const std::string etcd_bin = EtcdProcess::Binary();
  if (etcd_bin.empty()) {
    if (std::getenv("CI") != nullptr) FAIL() << "etcd not found (install etcd-server)";
    GTEST_SKIP() << "etcd not found (install etcd-server; scripts/setup.sh does)";
  }
  EtcdProcess etcd(etcd_bin);
  ASSERT_TRUE(etcd.Start().ok());
  FakeEngine engine;
  const auto dir = myriad::testing::TestTempDir();
  const std::string hooks = (dir / "hooks").string();
  const std::string config = (dir / "control.yaml").string();
  std::ofstream(config) << fmt::format(
      "listen: 127.0.0.1:0\n"
      "scrape: {{interval: 100ms, timeout: 300ms}}\n"
      "detect: {{crash_after_failed_probes: 2, restart_timeout: 1h}}\n"
      "gate: {{warmup_requests: 0, timeout: 1s}}\n"
      "engines:\n  - {{name: e0, url: 'http://127.0.0.1:{1}'}}\n"
      "actuators:\n  exec:\n"
      "    drain: 'echo \"drain $MYRIAD_TARGET\" >> {0}'\n"
      "    restart: 'echo \"restart $MYRIAD_TARGET\" >> {0}'\n"
      "    readmit: 'echo \"readmit $MYRIAD_TARGET\" >> {0}'\n"
      "ha: {{etcd: '{2}', prefix: /test/control, lease_ttl: 2s}}\n",
      hooks, engine.port(), etcd.endpoint());
  ControlProcess a(config, "a");
  ASSERT_TRUE(WaitUntil([&] { return a.leader() == 1; }, 10000ms)) << a.out();
  ControlProcess b(config, "b");
  ASSERT_TRUE(WaitUntil([&] { return b.leader() == 0; }, 10000ms)) << b.out();

  engine.set_up(false);
  ASSERT_TRUE(WaitUntil([&] { return Count(ReadFile(hooks), "restart e0") == 1; }, 10000ms)) << a.out();
  a.Kill(SIGKILL);
  const auto killed = std::chrono::steady_clock::now();
  ASSERT_TRUE(WaitUntil([&] { return b.leader() == 1; }, 10000ms)) << b.out();
  const auto took = std::chrono::steady_clock::now() - killed;
  EXPECT_LT(took, 5s) << std::chrono::duration_cast<std::chrono::milliseconds>(took).count() << " ms";
  // The follower, now leading, decides the same drain and restart and skips both.
  ASSERT_TRUE(WaitUntil([&] { return Count(b.out(), "recorded by an earlier leader") == 2; }, 5000ms)) << b.out();
  engine.set_up(true);
  ASSERT_TRUE(WaitUntil([&] { return Count(ReadFile(hooks), "readmit e0") == 1; }, 5000ms)) << b.out();
  std::this_thread::sleep_for(300ms);  // a few more rounds: nothing else runs
  EXPECT_EQ(ReadFile(hooks), "drain e0\nrestart e0\nreadmit e0\n") << "A:\n" << a.out() << "B:\n" << b.out();
}

// The known answers live in etcd: the leader stores the answer it recorded at admission, and a
// new leader probes against it instead of recording the answer of an engine that went wrong
// meanwhile (it would then never notice): the engine is cordoned.
TEST(ControlHaCli, NewLeaderProbesAgainstTheAnswerRecordedByTheOldOneAndCordons) {
  const std::string etcd_bin = EtcdProcess::Binary();
  if (etcd_bin.empty()) {
    if (std::getenv("CI") != nullptr) FAIL() << "etcd not found (install etcd-server)";
    GTEST_SKIP() << "etcd not found (install etcd-server; scripts/setup.sh does)";
  }
  EtcdProcess etcd(etcd_bin);
  ASSERT_TRUE(etcd.Start().ok());
  FakeEngine engine;
  const auto dir = myriad::testing::TestTempDir();
  const std::string config = (dir / "answers.yaml").string();
  std::ofstream(config) << fmt::format(
      "listen: 127.0.0.1:0\n"
      "scrape: {{interval: 100ms, timeout: 300ms}}\n"
      "gate: {{warmup_requests: 0, timeout: 1s, probe_period: 0s}}\n"
      "engines:\n  - {{name: e0, url: 'http://127.0.0.1:{}'}}\n"
      "actuators: {{gateway: false}}\n"
      "ha: {{etcd: '{}', prefix: /test/answers, lease_ttl: 2s}}\n",
      engine.port(), etcd.endpoint());
  ControlProcess a(config, "answers_a");
  ASSERT_TRUE(WaitUntil([&] { return a.leader() == 1 && Count(a.out(), "record_answer") == 1; }, 10000ms))
      << a.out();
  ControlProcess b(config, "answers_b");
  ASSERT_TRUE(WaitUntil([&] { return b.leader() == 0; }, 10000ms)) << b.out();
  a.Kill(SIGKILL);
  engine.set_answer(" Lyon");  // corrupt before the new leader looks at it
  ASSERT_TRUE(WaitUntil([&] { return Count(b.out(), "\"action\":\"cordon\"") == 1; }, 10000ms)) << b.out();
  EXPECT_EQ(Count(b.out(), "record_answer"), 0u) << b.out();
  EXPECT_NE(b.out().find("known answer from an earlier leader"), std::string::npos) << b.out();
  EXPECT_NE(b.out().find("\"probe\":\"mismatch\""), std::string::npos) << b.out();
}

}  // namespace
