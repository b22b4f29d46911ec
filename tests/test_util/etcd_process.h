#pragma once
// Test helpers around a REAL etcd (Debian's etcd-server, v3.4) started on loopback by the tests
// themselves: finding the binary, a free port, bounded polling, and EtcdProcess (one
// single-member etcd with its own data dir that can be killed and started again).
// Tests without an etcd binary skip, or fail when CI is set (EtcdMissing below).
#include <fmt/format.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/escaping.h"
#include "core/time.h"
#include "net/http_client.h"

namespace myriad::test {

using namespace std::chrono_literals;

inline std::string FindEtcd() {
  // An explicit ETCD_BINARY that is not executable counts as missing (this is how the skip and
  // CI-failure paths are exercised on a machine that has etcd).
  if (const char* e = std::getenv("ETCD_BINARY"); e != nullptr && *e) {
    return access(e, X_OK) == 0 ? e : "";
  }
  if (const char* path = std::getenv("PATH")) {
    std::string p = path;
    size_t start = 0;
    while (start <= p.size()) {
      size_t end = p.find(':', start);
      if (end == std::string::npos) end = p.size();
      std::string cand = p.substr(start, end - start) + "/etcd";
      if (access(cand.c_str(), X_OK) == 0) return cand;
      start = end + 1;
    }
  }
  return access("/usr/bin/etcd", X_OK) == 0 ? "/usr/bin/etcd" : "";
}

inline uint16_t FreePort() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = 0;
  socklen_t len = sizeof(a);
  if (bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    close(fd);
    return 0;
  }
  close(fd);
  return ntohs(a.sin_port);
}

// Polls `done` until it holds or the deadline passes: every wait in these tests is on a
// condition, bounded.
inline bool WaitUntil(const std::function<bool()>& done, std::chrono::milliseconds limit = 5000ms) {
  using Clock = std::chrono::steady_clock;
  const auto deadline = Clock::now() + limit;
  while (!done()) {
    if (Clock::now() > deadline) return false;
    std::this_thread::sleep_for(5ms);
  }
  return true;
}

// One single-member etcd on loopback, with its own data dir; it can be killed and started
// again on the same data (and on another client port, to change data behind a watcher's back).
class EtcdProcess {
 public:
  static std::string Binary() { return FindEtcd(); }

  explicit EtcdProcess(std::string binary) : binary_(std::move(binary)) {
    char tmpl[] = "/tmp/myriad_etcd_XXXXXX";
    dir_ = mkdtemp(tmpl) ? tmpl : "";
    client_port_ = FreePort();
    peer_port_ = FreePort();
  }
  ~EtcdProcess() {
    Kill();
    std::error_code ec;
    if (!dir_.empty()) std::filesystem::remove_all(dir_, ec);
  }

  std::string endpoint() const { return fmt::format("http://127.0.0.1:{}", client_port_); }
  uint16_t client_port() const { return client_port_; }

  // Starts etcd on `port` (default: its own client port) and waits until it answers.
  absl::Status Start(uint16_t port = 0) {
    if (port == 0) port = client_port_;
    const std::string client = fmt::format("http://127.0.0.1:{}", port);
    const std::string peer = fmt::format("http://127.0.0.1:{}", peer_port_);
    std::vector<std::string> args = {binary_,
                                     "--name", "default",
                                     "--data-dir", dir_ + "/data",
                                     "--listen-client-urls", client,
                                     "--advertise-client-urls", client,
                                     "--listen-peer-urls", peer,
                                     "--initial-advertise-peer-urls", peer,
                                     "--initial-cluster", "default=" + peer,
                                     "--log-level", "error",
                                     // A lone member elects itself after one election timeout:
                                     // shorter than the 1 s default keeps each start quick.
                                     "--heartbeat-interval", "20",
                                     "--election-timeout", "200"};
    const std::string log = dir_ + "/etcd.log";
    pid_ = fork();
    if (pid_ == 0) {
      FILE* f = freopen(log.c_str(), "a", stdout);
      (void)f;
      dup2(fileno(stdout), fileno(stderr));
      std::vector<char*> argv;
      for (auto& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      execv(binary_.c_str(), argv.data());
      _exit(127);
    }
    if (pid_ < 0) return absl::InternalError("fork failed");
    net::HttpClient c(net::HostPort{"127.0.0.1", port}, net::HttpClientOptions{.timeout = 500 * kMillisecond});
    const bool up = WaitUntil(
        [&] {
          auto r = c.Post("/v3/kv/range", nlohmann::json({{"key", absl::Base64Escape("probe")}}).dump());
          return r.ok() && r->status == 200;
        },
        10000ms);
    if (!up) return absl::DeadlineExceededError("etcd did not answer within 10 s; see " + log);
    return absl::OkStatus();
  }

  // SIGKILL: a crash, not a clean shutdown.
  void Kill() {
    if (pid_ <= 0) return;
    kill(pid_, SIGKILL);
    int status = 0;
    waitpid(pid_, &status, 0);
    pid_ = -1;
  }

 private:
  std::string binary_;
  std::string dir_;
  uint16_t client_port_ = 0, peer_port_ = 0;
  pid_t pid_ = -1;
};

}  // namespace myriad::test
