// HaServer: what winning and losing the election (net/etcd_election.h) means to a master
// (catching up before promotion, stepping down) and the standby's side of log shipping
// (pulling, applying, snapshots).
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <nlohmann/json.hpp>
#include <thread>
#include <tuple>

#include "kvstore/auth.h"
#include "kvstore/ha_server.h"
#include "net/http_client.h"

namespace myriad::kvstore {

namespace {

// The standby's puller backs off in real time: it waits on the network, decides nothing.
void Sleep(Nanos d) { std::this_thread::sleep_for(std::chrono::nanoseconds(d)); }

}  // namespace

void HaServer::BecomeLeader(uint64_t term, const std::vector<std::string>& peers) {
  // Catch up first: a peer may have applied batches (acknowledged writes) this master has not,
  // or this master may be far behind (it restarted empty and won the race to the key). Peers
  // are taken most up to date first, by the (term, next batch) of their logs as Raft compares
  // logs, and only those ahead of this master: a peer's snapshot replaces this master's state,
  // so it must never come from a peer that knows less.
  // From here on the standby's own puller stands aside: only this catch-up changes the state.
  promoting_ = true;
  struct Peer {
    std::string url;
    uint64_t term = 0, next = 0;
  };
  std::vector<Peer> ahead;
  for (const std::string& url : peers) {
    auto c = net::HttpClient::FromUrl(url, net::HttpClientOptions{.timeout = options_.etcd_timeout});
    if (!c.ok()) continue;
    auto r = (*c)->Request("GET", "/v1/ha", {}, {}, AuthHeaders(options_.master.auth_token));
    if (!r.ok() || r->status != 200) continue;  // dead or unreachable: nothing to get from it
    const nlohmann::json j = nlohmann::json::parse(r->body, nullptr, false);
    if (!j.is_object()) continue;
    ahead.push_back({url, j.value("term", uint64_t{0}), j.value("next_seq", uint64_t{0})});
  }
  std::sort(ahead.begin(), ahead.end(), [](const Peer& a, const Peer& b) {
    return std::tie(a.term, a.next) > std::tie(b.term, b.next);
  });
  for (const Peer& peer : ahead) {
    if (std::tie(peer.term, peer.next) <= std::make_tuple(log_.last_term(), log_.next_seq())) break;
    for (int round = 0; round < 100'000 && !stop_.load(); ++round) {
      auto n = PullOnce(peer.url, /*wait=*/0, /*ack=*/false);
      if (!n.ok() && n.status().code() == absl::StatusCode::kFailedPrecondition) {
        // Its log does not continue ours (ours is too short, or diverged): take its state.
        if (absl::Status st = InstallSnapshot(peer.url, /*catching_up=*/true); !st.ok()) {
          SetError(fmt::format("catching up from {}: {}", peer.url, std::string(st.message())));
          break;
        }
        continue;
      }
      if (!n.ok() || *n == 0) break;
    }
  }
  {
    std::lock_guard lock(state_mu_);
    master()->Promote();
    log_.ClearAcks();
    term_ = term;
    role_ = static_cast<int>(HaRole::kLeader);
    promoting_ = false;
  }
  std::lock_guard lock(info_mu_);
  leader_ = advertise_;
  counters_.elections_won++;
}

void HaServer::StepDown(std::string why) {
  {
    std::lock_guard lock(state_mu_);
    role_ = static_cast<int>(HaRole::kStandby);
  }
  std::lock_guard lock(info_mu_);
  leader_.clear();
  counters_.step_downs++;
  counters_.last_step_down = why;
  counters_.last_error = fmt::format("stepped down: {}", why);
}

absl::StatusOr<uint64_t> HaServer::PullOnce(const std::string& url, Nanos wait, bool ack) {
  // One kept-alive connection per pulling thread and peer.
  thread_local std::unique_ptr<net::HttpClient> client;
  thread_local std::string client_url;
  thread_local Nanos client_timeout = 0;
  const Nanos timeout = wait + 2 * kSecond;
  if (!client || client_url != url || client_timeout != timeout) {
    auto c = net::HttpClient::FromUrl(url, net::HttpClientOptions{.timeout = timeout});
    if (!c.ok()) return c.status();
    client = std::move(*c);
    client_url = url;
    client_timeout = timeout;
  }
  const uint64_t from = log_.next_seq();
  std::string target = fmt::format("/v1/log?from={}&term={}&wait_ms={}", from, log_.last_term(),
                                   wait / kMillisecond);
  if (ack) target += "&standby=" + advertise_;
  auto r = client->Request("GET", target, {}, {}, AuthHeaders(options_.master.auth_token));
  if (!r.ok()) return r.status();
  if (r->status == 410) {
    return absl::FailedPreconditionError(fmt::format("{}: {}", url, r->body.substr(0, 300)));
  }
  if (r->status != 200) {
    return absl::UnavailableError(fmt::format("{}{}: HTTP {}", url, target, r->status));
  }
  auto batches = DecodeFrames(r->body, from);
  if (!batches.ok()) {
    std::lock_guard lock(info_mu_);
    counters_.batches_rejected++;
    counters_.last_error = fmt::format("log from {} rejected: {}", url, std::string(batches.status().message()));
    return batches.status();
  }
  std::lock_guard lock(state_mu_);
  // The standby's puller (ack) stops applying once this master leads or is catching up to.
  if (stop_.load() || (ack && (role_.load() == static_cast<int>(HaRole::kLeader) || promoting_.load()))) {
    return 0;
  }
  uint64_t applied = 0;
  std::shared_ptr<MasterServer> m = master();
  for (LogBatch& b : *batches) {
    if (b.seq != log_.next_seq()) break;  // another pull applied it meanwhile
    if (absl::Status st = m->ApplyLog(b.records); !st.ok()) {
      // Part of the batch may be applied: only a snapshot restores a known state.
      need_snapshot_ = true;
      std::lock_guard info(info_mu_);
      counters_.batches_rejected++;
      counters_.last_error = fmt::format("batch {} from {} does not apply: {}", b.seq, url, std::string(st.message()));
      return absl::DataLossError(counters_.last_error);
    }
    log_.AppendApplied(std::move(b));
    ++applied;
  }
  return applied;
}

absl::Status HaServer::InstallSnapshot(const std::string& url, bool catching_up) {
  auto c = net::HttpClient::FromUrl(url, net::HttpClientOptions{.timeout = 60 * kSecond,
                                                                 .max_response_bytes = size_t{16} << 30});
  if (!c.ok()) return c.status();
  auto r = (*c)->Request("GET", "/v1/snapshot", {}, {}, AuthHeaders(options_.master.auth_token));
  if (!r.ok()) return r.status();
  if (r->status != 200) return absl::UnavailableError(fmt::format("{}/v1/snapshot: HTTP {}", url, r->status));
  auto frames = DecodeFrames(r->body, 0);
  if (!frames.ok()) return frames.status();
  if (frames->size() != 1) return absl::DataLossError("a snapshot must be exactly one frame");
  LogBatch& snap = frames->front();
  auto fresh = std::make_shared<MasterServer>(options_.master);
  if (absl::Status st = fresh->ApplyLog(snap.records); !st.ok()) {
    return absl::DataLossError(fmt::format("snapshot from {} does not apply: {}", url, std::string(st.message())));
  }
  std::lock_guard lock(state_mu_);
  if (role_.load() == static_cast<int>(HaRole::kLeader) || (!catching_up && promoting_.load())) {
    return absl::OkStatus();
  }
  {
    std::lock_guard p(ptr_mu_);
    master_ = std::move(fresh);
  }
  log_.Reset(snap.seq, snap.term);
  need_snapshot_ = false;
  std::lock_guard info(info_mu_);
  counters_.snapshots++;
  return absl::OkStatus();
}

void HaServer::PullLoop() {
  while (!stop_.load()) {
    std::string leader;
    {
      std::lock_guard lock(info_mu_);
      leader = leader_;
    }
    if (role_.load() == static_cast<int>(HaRole::kLeader) || promoting_.load() || leader.empty() ||
        leader == advertise_) {
      Sleep(20 * kMillisecond);
      continue;
    }
    if (need_snapshot_.load()) {
      if (absl::Status st = InstallSnapshot(leader); !st.ok()) {
        SetError(fmt::format("snapshot from {}: {}", leader, std::string(st.message())));
        Sleep(200 * kMillisecond);
      }
      continue;
    }
    auto n = PullOnce(leader, options_.pull_wait, /*ack=*/true);
    if (!n.ok()) {
      if (n.status().code() == absl::StatusCode::kFailedPrecondition) {
        need_snapshot_ = true;
      } else {
        SetError(n.status().ToString());
        Sleep(100 * kMillisecond);
      }
    }
  }
}

}  // namespace myriad::kvstore
