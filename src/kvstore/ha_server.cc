// HaServer: the HTTP side (routing by role, the write path with its semi-synchronous
// acknowledgement, the log and snapshot endpoints) and the leader's housekeeping. The election
// and the standby's pulling are in ha_election.cc.
#include "kvstore/ha_server.h"

#include <fmt/format.h>

#include <charconv>
#include <chrono>
#include <nlohmann/json.hpp>

#include "core/steady_now.h"
#include "kvstore/api_json.h"
#include "kvstore/auth.h"
#include "net/prometheus.h"

namespace myriad::kvstore {

using nlohmann::json;

namespace {

// The value of `name` in a query string ("a=1&b=2"); empty when absent. No percent-decoding:
// the parameters here are numbers and URLs sent without reserved characters.
std::string_view QueryParam(std::string_view query, std::string_view name) {
  while (!query.empty()) {
    const size_t amp = query.find('&');
    const std::string_view pair = query.substr(0, amp);
    const size_t eq = pair.find('=');
    if (pair.substr(0, eq) == name) return eq == std::string_view::npos ? "" : pair.substr(eq + 1);
    if (amp == std::string_view::npos) break;
    query.remove_prefix(amp + 1);
  }
  return {};
}

uint64_t QueryU64(std::string_view query, std::string_view name, uint64_t fallback) {
  const std::string_view v = QueryParam(query, name);
  uint64_t out = 0;
  auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), out);
  return ec == std::errc() && p == v.data() + v.size() && !v.empty() ? out : fallback;
}

bool IsRead(std::string_view method, std::string_view path) {
  return method == "GET" || path == "/v1/get" || path == "/v1/exists";
}

net::HttpServerOptions HttpOptions(net::HttpServerOptions o) {
  if (o.threads < 8) o.threads = 8;
  return o;
}

}  // namespace

HaServer::HaServer(HaOptions options)
    : options_(std::move(options)),
      clock_(OrDefaultClock(options_.master.clock)),
      http_(HttpOptions(options_.master.http),
            net::AsyncHttpHandler([this](net::HttpRequest r, std::shared_ptr<net::HttpResponder> responder) {
              HandleAsync(std::move(r), std::move(responder));
            })),
      log_(options_.log),
      master_(std::make_shared<MasterServer>(options_.master)),
      tick_sleeper_(clock_->NewSleeper()) {
  options_.master.clock = clock_;  // the masters a snapshot install creates share it
}

HaServer::~HaServer() { Shutdown(resign_.load()); }

absl::Status HaServer::Start() {
  if (options_.etcd.empty() && options_.sync_standbys > 0) {
    return absl::InvalidArgumentError(
        "sync_standbys > 0 needs standbys, and standbys need etcd: set etcd or sync_standbys = 0");
  }
  if (options_.lease_ttl_seconds < 1) return absl::InvalidArgumentError("lease_ttl_seconds must be >= 1");
  log_.set_on_ack([this] { AnswerAcked(); });
  acker_ = std::thread([this] { AckLoop(); });
  if (absl::Status st = http_.Start(); !st.ok()) return st;
  advertise_ = options_.advertise.empty()
                   ? fmt::format("http://{}:{}", options_.master.http.address, http_.port())
                   : options_.advertise;
  started_.store(true, std::memory_order_release);  // advertise_ is set: Handle may read it
  ticker_ = std::thread([this, started = clock_->Now()] { TickLoop(started); });
  if (options_.etcd.empty()) {
    // Alone: the leader of a group of one, forever.
    term_ = 1;
    {
      std::lock_guard lock(info_mu_);
      leader_ = advertise_;
    }
    role_ = static_cast<int>(HaRole::kLeader);
    return absl::OkStatus();
  }
  net::EtcdElectionOptions eo{.etcd = options_.etcd,
                              .key = options_.election_key,
                              .value = advertise_,
                              .lease_ttl_seconds = options_.lease_ttl_seconds,
                              .campaign = options_.campaign,
                              .fence_margin = options_.fence_margin,
                              .poll_interval = options_.poll_interval,
                              .etcd_timeout = options_.etcd_timeout};
  election_ = std::make_unique<net::EtcdElection>(
      std::move(eo), clock_,
      net::EtcdElectionHooks{
          .on_elected = [this](uint64_t term, const std::vector<std::string>& peers) { BecomeLeader(term, peers); },
          .on_step_down = [this](const std::string& why) { StepDown(why); },
          .on_follow =
              [this](const std::string& leader) {
                std::lock_guard lock(info_mu_);
                leader_ = leader;
              },
          .on_error = [this](const std::string& error) { SetError(error); }});
  election_->Start();
  puller_ = std::thread([this] { PullLoop(); });
  return absl::OkStatus();
}

void HaServer::Stop() { Shutdown(true); }
void HaServer::Kill() { Shutdown(false); }

void HaServer::Shutdown(bool resign) {
  if (stop_.exchange(true)) return;
  resign_ = resign;  // from now on FenceUntil() is 0: no write is acknowledged
  {
    // Writes still waiting for standbys are answered (503: not confirmed) before the
    // listener goes.
    std::lock_guard lock(pending_mu_);
    acker_stop_ = true;
  }
  pending_cv_.notify_all();
  if (acker_.joinable()) acker_.join();
  http_.Stop();
  tick_sleeper_->Wake();
  if (election_) election_->Stop(resign);  // revokes the lease when resigning
  if (puller_.joinable()) puller_.join();
  if (ticker_.joinable()) ticker_.join();
}

std::shared_ptr<MasterServer> HaServer::master() const {
  std::lock_guard lock(ptr_mu_);
  return master_;
}

Nanos HaServer::FenceUntil() const {
  if (stop_.load()) return 0;
  return election_ ? election_->fence_until() : INT64_MAX;
}

bool HaServer::is_leader() const {
  return role_.load() == static_cast<int>(HaRole::kLeader) && clock_->Now() < FenceUntil();
}

HaStatus HaServer::status() const {
  std::lock_guard lock(info_mu_);
  HaStatus s = counters_;
  s.role = static_cast<HaRole>(role_.load());
  s.leader = leader_;
  s.term = log_.last_term();
  s.next_seq = log_.next_seq();
  return s;
}

uint64_t HaServer::CanonicalHash() const {
  std::lock_guard lock(state_mu_);
  return master()->CanonicalHash();
}

void HaServer::SetError(std::string error) {
  std::lock_guard lock(info_mu_);
  counters_.last_error = std::move(error);
}

net::HttpResponse HaServer::NotLeader() const {
  std::string leader;
  {
    std::lock_guard lock(info_mu_);
    leader = leader_;
  }
  if (leader == advertise_) leader.clear();  // a fenced leader does not send clients to itself
  net::HttpResponse r = api::Json(
      421, {{"error",
             {{"message", leader.empty()
                              ? fmt::format("{} is not the leader and knows of none (election "
                                            "in progress); retry shortly",
                                            advertise_)
                              : fmt::format("{} is a standby; the leader is {}", advertise_, leader)},
              {"type", "not_leader"},
              {"leader", leader}}}});
  if (!leader.empty()) r.headers.emplace_back("X-Myriad-Leader", leader);
  return r;
}

net::HttpResponse HaServer::Handle(const net::HttpRequest& request) {
  if (!started_.load(std::memory_order_acquire)) {
    return api::Error(503, api::ErrorType::kUnavailable, "the master is starting");
  }
  const std::string_view path = request.path();
  if (path != "/health" && path != "/metrics" &&
      !HttpAuthorized(request, options_.master.auth_token)) {
    return Unauthorized();
  }
  if (path == "/v1/log") return Log(request);
  if (path == "/v1/snapshot") return Snapshot();
  if (path == "/v1/ha") return State();
  if (path == "/health") return master()->Handle(request);
  if (path == "/metrics") {
    net::HttpResponse r = master()->Handle(request);
    if (r.status == 200) r.body += Metrics();
    return r;
  }
  if (!is_leader()) return NotLeader();
  if (IsRead(request.method, path)) return master()->Handle(request);
  return Write(request);
}

bool HaServer::IsWrite(const net::HttpRequest& request) const {
  const std::string_view path = request.path();
  return started_.load(std::memory_order_acquire) && path != "/v1/log" && path != "/v1/snapshot" &&
         path != "/v1/ha" && path != "/health" && path != "/metrics" && is_leader() &&
         !IsRead(request.method, path);
}

void HaServer::HandleAsync(net::HttpRequest request, std::shared_ptr<net::HttpResponder> r) {
  // Handle refuses a request without the token before anything else.
  if (!IsWrite(request) || !HttpAuthorized(request, options_.master.auth_token)) {
    return r->Respond(Handle(request));
  }
  net::HttpResponse response;
  const uint64_t seq = ApplyWrite(request, &response);
  if (seq == 0 || options_.sync_standbys <= 0) return r->Respond(Confirmed(seq, true, std::move(response)));
  {
    std::lock_guard lock(pending_mu_);
    if (!acker_stop_) {
      pending_.push_back({seq, SteadyNow() + options_.sync_timeout, std::move(response), std::move(r)});
    }
  }
  if (r) return r->Respond(Confirmed(seq, false, std::move(response)));  // stopping
  pending_cv_.notify_one();  // its deadline
  AnswerAcked();             // acks that came in meanwhile
}

void HaServer::AnswerAcked() {
  std::vector<PendingWrite> done;
  {
    std::lock_guard lock(pending_mu_);
    // Batches are in order and acks only grow: the confirmed ones are a prefix.
    while (!pending_.empty() && log_.Acked(pending_.front().seq) >= options_.sync_standbys) {
      done.push_back(std::move(pending_.front()));
      pending_.pop_front();
    }
  }
  for (PendingWrite& w : done) w.r->Respond(Confirmed(w.seq, true, std::move(w.response)));
}

void HaServer::AckLoop() {
  std::unique_lock lock(pending_mu_);
  for (;;) {
    if (pending_.empty()) {
      if (acker_stop_) return;
      pending_cv_.wait(lock);
      continue;
    }
    const Nanos now = SteadyNow();
    if (!acker_stop_ && pending_.front().deadline > now) {
      pending_cv_.wait_for(lock, std::chrono::nanoseconds(pending_.front().deadline - now));
      continue;
    }
    PendingWrite w = std::move(pending_.front());
    pending_.pop_front();
    lock.unlock();
    // Past its deadline (or stopping): confirmed only if the acks are there after all.
    const bool acked = !stop_.load() && log_.Acked(w.seq) >= options_.sync_standbys;
    w.r->Respond(Confirmed(w.seq, acked, std::move(w.response)));
    lock.lock();
  }
}

uint64_t HaServer::ApplyWrite(const net::HttpRequest& request, net::HttpResponse* response) {
  std::lock_guard lock(state_mu_);
  if (!is_leader()) {
    *response = NotLeader();
    return 0;
  }
  std::shared_ptr<MasterServer> m = master();
  *response = m->Handle(request);
  std::string records = m->TakeLog();
  return records.empty() ? 0 : log_.Append(term_.load(), std::move(records));
}

net::HttpResponse HaServer::Write(const net::HttpRequest& request) {
  net::HttpResponse response;
  const uint64_t seq = ApplyWrite(request, &response);
  if (seq == 0) return response;  // nothing changed: nothing to replicate
  const bool acked =
      log_.WaitAcks(seq, options_.sync_standbys, SteadyNow() + options_.sync_timeout);
  return Confirmed(seq, acked, std::move(response));
}

net::HttpResponse HaServer::Confirmed(uint64_t seq, bool acked, net::HttpResponse response) {
  if (!acked) {
    unconfirmed_++;
    return api::Error(503, api::ErrorType::kUnavailable,
                      fmt::format("the write (log batch {}) is applied on the leader but fewer "
                                  "than {} standby(s) confirmed it within {} ms; it may be lost "
                                  "in a failover",
                                  seq, options_.sync_standbys,
                                  options_.sync_timeout / kMillisecond));
  }
  if (clock_->Now() >= FenceUntil()) {
    unconfirmed_++;
    return api::Error(503, api::ErrorType::kUnavailable,
                      fmt::format("the leader's etcd lease may have expired before the write "
                                  "(log batch {}) was confirmed; its outcome is unknown",
                                  seq));
  }
  return response;
}

net::HttpResponse HaServer::Log(const net::HttpRequest& request) {
  if (request.method != "GET") {
    return api::Error(405, api::ErrorType::kMethodNotAllowed, "use GET /v1/log?from=SEQ&term=T");
  }
  const std::string_view q = request.query();
  const uint64_t from = QueryU64(q, "from", 0);
  const uint64_t term = QueryU64(q, "term", 0);
  const Nanos wait = static_cast<Nanos>(std::min<uint64_t>(QueryU64(q, "wait_ms", 0), 5000)) *
                     kMillisecond;
  const std::string standby(QueryParam(q, "standby"));
  if (from == 0) {
    return api::Error(400, api::ErrorType::kInvalidRequest, "'from' must be a batch number >= 1",
                      "from");
  }
  const bool leader = role_.load() == static_cast<int>(HaRole::kLeader);
  net::HttpResponse r;
  r.content_type = "application/octet-stream";
  const ReplicationLog::ReadResult result =
      log_.Read(from, term, options_.pull_max_bytes, wait, leader && !standby.empty() ? &standby : nullptr,
                &r.body);
  if (result == ReplicationLog::ReadResult::kNeedSnapshot) {
    return net::JsonError(410, "snapshot_needed",
                      fmt::format("this master's log does not continue batch {} of term {} "
                                  "(its log holds {}..{}): install GET /v1/snapshot",
                                  from - 1, term, log_.first_seq(), log_.next_seq() - 1));
  }
  r.headers.emplace_back("X-Myriad-Log-Next", std::to_string(log_.next_seq()));
  r.headers.emplace_back("X-Myriad-Role", leader ? "leader" : "standby");
  return r;
}

net::HttpResponse HaServer::Snapshot() {
  LogBatch snap;
  {
    std::lock_guard lock(state_mu_);
    snap.records = master()->SnapshotLog();
    snap.seq = log_.next_seq();  // the snapshot reflects every batch before this one
    snap.term = log_.last_term();
  }
  net::HttpResponse r;
  r.content_type = "application/octet-stream";
  AppendFrame(snap, &r.body);
  return r;
}

net::HttpResponse HaServer::State() const {
  const HaStatus s = status();
  json standbys = json::object();
  for (const auto& [name, next] : log_.standbys()) standbys[name] = next;
  return api::Json(200, {{"url", advertise_},
                         {"role", s.role == HaRole::kLeader ? "leader" : "standby"},
                         {"leading", is_leader()},
                         {"leader", s.leader},
                         {"term", s.term},
                         {"next_seq", s.next_seq},
                         {"first_seq", log_.first_seq()},
                         {"log_bytes", log_.bytes()},
                         {"standbys", std::move(standbys)},
                         {"snapshots", s.snapshots},
                         {"batches_rejected", s.batches_rejected},
                         {"elections_won", s.elections_won},
                         {"step_downs", s.step_downs},
                         {"last_error", s.last_error},
                         {"last_step_down", s.last_step_down}});
}

std::string HaServer::Metrics() const {
  const HaStatus s = status();
  net::PrometheusWriter w;
  w.Gauge("myriad_kvstore_ha_leader", "1 while this master leads (inside its lease fence)",
          is_leader() ? 1 : 0);
  w.Gauge("myriad_kvstore_ha_term", "Term (etcd create revision) of the last log batch",
          static_cast<double>(s.term));
  w.Gauge("myriad_kvstore_ha_log_next_seq", "Next replication log batch number",
          static_cast<double>(s.next_seq));
  w.Gauge("myriad_kvstore_ha_log_bytes", "Bytes of log batches held in memory",
          static_cast<double>(log_.bytes()));
  w.Gauge("myriad_kvstore_ha_standbys", "Standbys that have pulled from this leader",
          static_cast<double>(log_.standbys().size()));
  w.Counter("myriad_kvstore_ha_elections_won_total", "Elections this master won", s.elections_won);
  w.Counter("myriad_kvstore_ha_step_downs_total", "Times this master stopped leading", s.step_downs);
  w.Counter("myriad_kvstore_ha_snapshots_total", "Snapshots installed from a leader", s.snapshots);
  w.Counter("myriad_kvstore_ha_batches_rejected_total",
            "Pulled log batches refused (corrupt, or not applying)", s.batches_rejected);
  w.Counter("myriad_kvstore_ha_writes_unconfirmed_total",
            "Writes answered 503: standbys did not confirm in time, or the fence passed",
            unconfirmed_.load());
  return w.Take();
}

void HaServer::TickLoop(Nanos started) {
  Nanos last = started;
  while (!stop_.load()) {
    tick_sleeper_->SleepUntil(last + options_.master.tick_interval);
    last = clock_->Now();
    if (stop_.load() || !is_leader()) continue;  // a standby's housekeeping arrives through the log
    std::lock_guard lock(state_mu_);
    if (!is_leader()) continue;
    std::shared_ptr<MasterServer> m = master();
    m->Tick();
    std::string records = m->TakeLog();
    // Not waited for: nobody is waiting on a tick's effects.
    if (!records.empty()) log_.Append(term_.load(), std::move(records));
  }
}

}  // namespace myriad::kvstore
