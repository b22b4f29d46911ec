#include "cli/kvstore_ha.h"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>

#include "cli/stop_signals.h"
#include "kvstore/auth.h"
#include "kvstore/ha_server.h"
#include "kvstore/master_client.h"
#include "net/http.h"
#include "net/http_client.h"

namespace myriad::cli {

absl::StatusOr<std::unique_ptr<LeaderFollowingHttp>> LeaderFollowingHttp::Create(
    std::string_view urls, Nanos timeout, std::string auth_token) {
  auto c = std::unique_ptr<LeaderFollowingHttp>(new LeaderFollowingHttp());
  c->timeout_ = timeout;
  c->auth_token_ = std::move(auth_token);
  while (!urls.empty()) {
    const size_t comma = urls.find(',');
    const std::string_view url = urls.substr(0, comma);
    if (!url.empty()) {
      if (auto hp = net::ParseHttpUrl(url); !hp.ok()) return hp.status();
      c->urls_.emplace_back(url);
    }
    if (comma == std::string_view::npos) break;
    urls.remove_prefix(comma + 1);
  }
  if (c->urls_.empty()) return absl::InvalidArgumentError("no master URL given");
  return c;
}

absl::StatusOr<net::HttpResponse> LeaderFollowingHttp::Get(std::string_view target) {
  return Send("GET", target, {});
}

absl::StatusOr<net::HttpResponse> LeaderFollowingHttp::Post(std::string_view target, std::string body) {
  return Send("POST", target, body);
}

absl::StatusOr<net::HttpResponse> LeaderFollowingHttp::Delete(std::string_view target) {
  return Send("DELETE", target, {});
}

absl::StatusOr<net::HttpResponse> LeaderFollowingHttp::Send(std::string_view method,
                                                            std::string_view target,
                                                            const std::string& body) {
  absl::StatusOr<net::HttpResponse> last = absl::UnavailableError("no master tried");
  // Every master once, plus a few redirections and an election's worth of waiting.
  for (size_t attempt = 0; attempt < urls_.size() + 25; ++attempt) {
    auto http = net::HttpClient::FromUrl(urls_[current_], {.timeout = timeout_});
    if (!http.ok()) return http.status();
    last = (*http)->Request(method, target, body, body.empty() ? "" : "application/json",
                            kvstore::AuthHeaders(auth_token_));
    if (last.ok() && last->status != 421) return last;
    if (!last.ok() && method != "GET" && urls_.size() == 1) return last;
    const std::string* leader = last.ok() ? net::FindHeader(last->headers, "X-Myriad-Leader") : nullptr;
    if (leader != nullptr && !leader->empty() && *leader != urls_[current_]) {
      auto it = std::find(urls_.begin(), urls_.end(), *leader);
      if (it == urls_.end()) it = urls_.insert(urls_.end(), *leader);
      current_ = static_cast<size_t>(it - urls_.begin());
      continue;
    }
    // A connection failure may have executed a POST: only a GET moves on after one.
    if (!last.ok() && method != "GET") return last;
    current_ = (current_ + 1) % urls_.size();
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  return last;
}

void KvstoreHaFlags::Add(CLI::App* master) {
  master->add_option("--etcd", etcd, "etcd's client URL: run as one of a group of masters, "
                                     "the leader elected through etcd")
      ->check(CLI::Validator(
          [](const std::string& url) -> std::string {
            auto hp = net::ParseHttpUrl(url);
            return hp.ok() ? std::string()
                           : "'" + url + "' is not an http://HOST:PORT URL (" +
                                 std::string(hp.status().message()) + ")";
          },
          "URL"));
  master->add_option("--election-key", election_key, "The etcd key the leader holds")
      ->capture_default_str();
  master->add_option("--advertise", advertise,
                     "This master's URL for clients and the other masters (default: the "
                     "listen address)");
  master->add_option("--lease-ttl", lease_ttl_s, "Seconds of the leader's etcd lease")
      ->check(CLI::Range(1, 600))
      ->capture_default_str();
  master->add_option("--sync-standbys", sync_standbys,
                     "Standbys that must have applied a write before it is acknowledged")
      ->check(CLI::Range(0, 16))
      ->capture_default_str();
  master->add_option("--sync-timeout", sync_timeout_s,
                     "Seconds the leader waits for those standbys before answering 503")
      ->capture_default_str();
}

int RunHaMaster(const KvstoreHaFlags& flags, kvstore::MasterServerOptions options) {
  StopSignals signals;  // before any thread starts
  kvstore::HaOptions ha;
  ha.master = std::move(options);
  ha.etcd = flags.etcd;
  ha.election_key = flags.election_key;
  ha.advertise = flags.advertise;
  ha.lease_ttl_seconds = flags.lease_ttl_s;
  ha.sync_standbys = flags.sync_standbys;
  ha.sync_timeout = SecondsToNanos(flags.sync_timeout_s);
  kvstore::HaServer server(std::move(ha));
  if (absl::Status st = server.Start(); !st.ok()) {
    std::fprintf(stderr, "myriad kvstore master: %s\n", std::string(st.message()).c_str());
    return 1;
  }
  std::printf("myriad kvstore master: listening on %s (etcd %s, key %s)\n", server.url().c_str(),
              flags.etcd.c_str(), flags.election_key.c_str());
  std::fflush(stdout);
  const int signal = signals.Wait();
  std::printf("myriad kvstore master: %s, resigning and stopping\n",
              signal == SIGINT ? "SIGINT" : "SIGTERM");
  std::fflush(stdout);
  server.Stop();
  return 0;
}

void AddAuthTokenFile(CLI::App* app, std::string* file) {
  app->add_option("--auth-token-file", *file,
                  "File holding the cluster's shared secret (1-256 printable bytes; default: "
                  "$MYRIAD_KVSTORE_TOKEN; none: the store is open to anyone who reaches it)");
}

std::optional<std::string> LoadAuthTokenFor(const char* what, const std::string& file, bool server) {
  absl::StatusOr<std::string> token = kvstore::LoadAuthToken(file);
  if (!token.ok()) {
    std::fprintf(stderr, "myriad kvstore %s: %s\n", what, std::string(token.status().message()).c_str());
    return std::nullopt;
  }
  if (server && token->empty()) {
    std::fprintf(stderr,
                 "myriad kvstore %s: warning: no --auth-token-file or %s: anyone who reaches "
                 "this %s's ports can read, write and delete objects\n",
                 what, std::string(kvstore::kAuthTokenEnv).c_str(), what);
  }
  return *std::move(token);
}

void KvstoreLoad::Add(CLI::App* kvstore) {
  cmd_ = kvstore->add_subcommand(
      "load", "Put objects as fast as possible through leader-following clients; report the "
              "longest write outage and acknowledged objects lost");
  cmd_->add_option("--master", masters_, "The masters' URLs (comma-separated)")
      ->delimiter(',')
      ->required();
  cmd_->add_option("--namespace", namespace_, "Namespace to put into")->capture_default_str();
  cmd_->add_option("--duration", duration_s_, "Seconds of load")->capture_default_str();
  cmd_->add_option("--clients", clients_, "Client threads")->check(CLI::Range(1, 64))->capture_default_str();
  cmd_->add_option("--size", size_, "Bytes per object")->capture_default_str();
  cmd_->add_option("--timeout", timeout_s_, "Seconds per request")->capture_default_str();
  AddAuthTokenFile(cmd_, &auth_token_file_);
}

namespace {

using Clock = std::chrono::steady_clock;

double Ms(Clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

struct LoadState {
  std::mutex mu;
  std::vector<Clock::time_point> acks;  // every acknowledged put, any client
  std::vector<BlockKey> acked;
  uint64_t errors = 0;
  std::string last_error;
};

}  // namespace

int KvstoreLoad::Run() {
  std::optional<std::string> token = LoadAuthTokenFor("load", auth_token_file_);
  if (!token) return 2;
  const kvstore::MasterClientOptions copt{.timeout = SecondsToNanos(timeout_s_),
                                          .failover_timeout = 30 * kSecond,
                                          .auth_token = *token};
  auto admin = kvstore::MasterClient::ConnectAny(masters_, copt);
  if (!admin.ok()) {
    std::fprintf(stderr, "myriad kvstore load: %s\n", std::string(admin.status().message()).c_str());
    return 2;
  }
  // Storage nodes to place on (metadata only: no bytes move), heartbeating through the leader.
  constexpr int kNodes = 3;
  for (int n = 1; n <= kNodes; ++n) {
    absl::Status st = (*admin)->RegisterNode(static_cast<kvstore::NodeId>(n), fmt::format("d{}", n),
                                             uint64_t{1} << 40);
    if (!st.ok() && !absl::IsAlreadyExists(st) && !absl::IsFailedPrecondition(st)) {
      std::fprintf(stderr, "myriad kvstore load: register node %d: %s\n", n, std::string(st.message()).c_str());
      return 1;
    }
  }
  if (absl::Status st = (*admin)->CreateNamespace(namespace_);
      !st.ok() && !absl::IsAlreadyExists(st) && !absl::IsFailedPrecondition(st)) {
    std::fprintf(stderr, "myriad kvstore load: namespace: %s\n", std::string(st.message()).c_str());
    return 1;
  }
  std::atomic<bool> stop{false};
  std::thread heartbeats([&] {
    auto c = kvstore::MasterClient::ConnectAny(masters_, copt);
    while (!stop.load() && c.ok()) {
      for (int n = 1; n <= kNodes; ++n) (void)(*c)->Heartbeat(static_cast<kvstore::NodeId>(n));
      std::this_thread::sleep_for(std::chrono::milliseconds(500));
    }
  });
  LoadState state;
  const auto start = Clock::now();
  const auto end = start + std::chrono::nanoseconds(SecondsToNanos(duration_s_));
  std::vector<std::thread> clients;
  for (int t = 0; t < clients_; ++t) {
    clients.emplace_back([&, t] {
      auto c = kvstore::MasterClient::ConnectAny(masters_, copt);
      if (!c.ok()) return;
      // Unique keys per run and client: the start time's low bits, the client, a counter.
      const uint64_t base = (static_cast<uint64_t>(start.time_since_epoch().count()) << 24) ^
                            (static_cast<uint64_t>(t) << 56);
      for (uint64_t i = 1; Clock::now() < end; ++i) {
        const BlockKey key = base + i;
        auto placed = (*c)->PutStart(namespace_, std::span(&key, 1), size_, 1);
        absl::Status st = placed.status();
        if (st.ok()) st = (*c)->PutEnd(namespace_, key);
        std::unique_lock lock(state.mu);
        if (st.ok()) {
          state.acks.push_back(Clock::now());
          state.acked.push_back(key);
        } else {
          state.errors++;
          state.last_error = std::string(st.message());
          lock.unlock();
          // No hot loop against a master that is down (repeatable calls back off by themselves).
          std::this_thread::sleep_for(std::chrono::milliseconds(10));
        }
      }
    });
  }
  for (auto& th : clients) th.join();
  const auto load_end = Clock::now();
  // Lost: acknowledged objects the leader does not know (checked in batches).
  uint64_t lost = 0;
  absl::Status check;
  for (size_t i = 0; i < state.acked.size() && check.ok(); i += 4096) {
    const size_t n = std::min<size_t>(4096, state.acked.size() - i);
    auto found = (*admin)->Exists(namespace_, std::span(state.acked.data() + i, n));
    if (!found.ok()) {
      check = found.status();
      break;
    }
    for (bool f : *found) lost += f ? 0 : 1;
  }
  stop = true;
  heartbeats.join();
  std::sort(state.acks.begin(), state.acks.end());
  double outage_ms = 0, outage_at_s = 0;
  Clock::time_point prev = start;
  for (const auto& a : state.acks) {
    if (Ms(a - prev) > outage_ms) {
      outage_ms = Ms(a - prev);
      outage_at_s = Ms(prev - start) / 1000;
    }
    prev = a;
  }
  const double elapsed_s = Ms(load_end - start) / 1000;
  nlohmann::json out = {{"puts_acknowledged", state.acked.size()},
                        {"puts_failed", state.errors},
                        {"puts_per_second", static_cast<double>(state.acked.size()) / elapsed_s},
                        {"write_outage_ms", outage_ms},
                        {"write_outage_started_at_s", outage_at_s},
                        {"acknowledged_lost", lost},
                        {"leader_at_end", (*admin)->current_url()},
                        {"last_error", state.last_error}};
  if (!check.ok()) out["check_error"] = std::string(check.message());
  std::printf("%s\n", out.dump(2).c_str());
  return check.ok() && lost == 0 ? 0 : 1;
}

}  // namespace myriad::cli
