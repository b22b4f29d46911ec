#include "kvstore/storage_node.h"

#include <fmt/format.h>

#include <algorithm>
#include <unistd.h>

#include <chrono>

#include "kvstore/master_client.h"
#include "core/rng.h"
#include "net/http_server.h"
#include "net/prometheus.h"

namespace myriad::kvstore {

namespace {

// A frame never needs to be larger than a put of a whole segment.
StorageNodeOptions Clamped(StorageNodeOptions o) {
  o.data.max_body_bytes = std::min<uint64_t>(o.data.max_body_bytes, o.segment_bytes + 64);
  o.data.auth_token = o.auth_token;
  return o;
}

}  // namespace

StorageNode::StorageNode(StorageNodeOptions options)
    : options_(Clamped(std::move(options))),
      store_(options_.capacity_bytes, options_.segment_bytes, !options_.shm_socket.empty()),
      data_(&store_, options_.data),
      clock_(OrDefaultClock(options_.clock)),
      sleeper_(clock_->NewSleeper()) {
  data_.set_on_no_room([this] { RequestReconcile(); });
  data_.set_copy_destinations([this](std::string_view address) { return KnownPeer(address); });
}

StorageNode::~StorageNode() { Stop(); }

absl::Status StorageNode::Start() {
  if (options_.fault_domain.empty()) {
    return absl::InvalidArgumentError("storage node: 'fault_domain' is empty");
  }
  if (options_.capacity_bytes == 0) {
    return absl::InvalidArgumentError("storage node: 'capacity_bytes' must be > 0");
  }
  if (!options_.shm_socket.empty()) {
    uint64_t seed = options_.shm_seed;
    if (seed == 0) {
      seed = Mix64(static_cast<uint64_t>(
                       std::chrono::steady_clock::now().time_since_epoch().count()) ^
                   (static_cast<uint64_t>(getpid()) << 32));
    }
    ShmServerOptions so;
    so.path = options_.shm_socket;
    so.token = Rng(seed).Next();
    so.max_batch = options_.data.max_batch;
    so.spin = options_.shm_spin;
    so.auth_token = options_.auth_token;
    shm_ = std::make_unique<ShmServer>(&store_, so);
    shm_->set_on_no_room([this] { RequestReconcile(); });
    if (absl::Status st = shm_->Start(); !st.ok()) {
      shm_.reset();
      return st;
    }
    data_.set_shm_socket(so.path, so.token);
  }
  if (absl::Status st = data_.Start(); !st.ok()) {
    if (shm_) shm_->Stop();
    return st;
  }
  advertise_ = options_.advertise.empty()
                   ? fmt::format("{}:{}", options_.data.address, data_.port())
                   : options_.advertise;
  if (options_.http_port >= 0) {
    net::HttpServerOptions h;
    h.address = options_.data.address;
    h.port = static_cast<uint16_t>(options_.http_port);
    http_ = std::make_unique<net::HttpServer>(h, [this](const net::HttpRequest& r) {
      net::HttpResponse out;
      if (r.path() == "/metrics") {
        out.content_type = std::string(net::kPrometheusContentType);
        out.body = MetricsText();
      } else if (r.path() == "/health") {
        out.body = registered_ ? R"({"status":"ok"})" : R"({"status":"unregistered"})";
      } else {
        out.status = 404;
        out.body = R"({"error":{"message":"no such path; try /metrics or /health"}})";
      }
      return out;
    });
    if (absl::Status st = http_->Start(); !st.ok()) {
      data_.Stop();
      if (shm_) shm_->Stop();
      return st;
    }
  }
  started_ = true;
  control_ = std::thread([this] { ControlLoop(); });
  return absl::OkStatus();
}

void StorageNode::Stop() {
  if (!started_.exchange(false)) return;
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  sleeper_->Wake();
  if (control_.joinable()) control_.join();
  if (http_) http_->Stop();
  data_.Stop();
  if (shm_) shm_->Stop();
}

uint16_t StorageNode::http_port() const { return http_ ? http_->port() : 0; }

void StorageNode::RequestReconcile() {
  {
    std::lock_guard lock(mu_);
    reconcile_now_ = true;
  }
  sleeper_->Wake();
}

bool StorageNode::KnownPeer(std::string_view address) {
  {
    std::lock_guard lock(mu_);
    if (peers_.contains(std::string(address))) return true;
    peers_now_ = true;
  }
  sleeper_->Wake();
  return false;
}

bool StorageNode::RefreshPeers(MasterClient& master) {
  absl::StatusOr<std::vector<std::string>> addresses = master.NodeAddresses();
  if (!addresses.ok()) return false;
  absl::flat_hash_set<std::string> peers(addresses->begin(), addresses->end());
  std::lock_guard lock(mu_);
  peers_ = std::move(peers);
  return true;
}

void StorageNode::ControlLoop() {
  const Nanos heartbeat = options_.heartbeat_interval;
  const Nanos reconcile = options_.reconcile_interval;
  const Nanos retry = std::min<Nanos>(heartbeat, 200 * kMillisecond);
  // Sweeps forced by puts without room come at most this often, so a node that is really full
  // does not turn every refused put into a sweep.
  const Nanos forced_gap = std::min<Nanos>(reconcile, 200 * kMillisecond);
  std::unique_ptr<MasterClient> master;
  Nanos next_heartbeat = clock_->Now();
  Nanos next_reconcile = clock_->Now();
  Nanos last_sweep = clock_->Now() - forced_gap;
  bool forced = false;
  // The peer list: asked again when a COPY_TO names an address not on it (a node registered
  // since), at most every 200 ms, and every minute so that departed nodes leave it.
  const Nanos peers_gap = 200 * kMillisecond;
  const Nanos peers_every = 60 * kSecond;
  Nanos last_peers = clock_->Now() - peers_every;
  bool peers_wanted = false;
  for (;;) {
    {
      std::lock_guard lock(mu_);
      if (stop_) return;
    }
    if (!master) {
      auto c = MasterClient::Connect(options_.master_url, options_.master_timeout, options_.auth_token);
      if (c.ok()) master = std::move(*c);
    }
    if (master && !registered_) {
      absl::Status st = master->RegisterNode(options_.id, options_.fault_domain,
                                             options_.capacity_bytes, advertise_);
      if (st.ok()) {
        registered_ = true;
        ++registrations_;
        next_heartbeat = clock_->Now() + heartbeat;
        // What the master placed here before is gone (a death drops a node's replicas).
        next_reconcile = clock_->Now();
      } else {
        ++master_errors_;
      }
    } else if (master && clock_->Now() >= next_heartbeat) {
      absl::Status st = master->Heartbeat(options_.id);
      next_heartbeat = clock_->Now() + heartbeat;
      if (st.ok()) {
        ++heartbeats_;
      } else {
        ++master_errors_;
        if (st.code() == absl::StatusCode::kNotFound) {
          registered_ = false;  // declared dead or a new master: register again at once
          continue;
        }
      }
    }
    {
      std::lock_guard lock(mu_);
      forced = forced || reconcile_now_;
      reconcile_now_ = false;
      peers_wanted = peers_wanted || peers_now_;
      peers_now_ = false;
    }
    const Nanos t = clock_->Now();
    if (master && registered_ &&
        (t - last_peers >= peers_every || (peers_wanted && t - last_peers >= peers_gap))) {
      if (!RefreshPeers(*master)) ++master_errors_;
      peers_wanted = false;
      last_peers = clock_->Now();
    }
    if (master && registered_ &&
        (t >= next_reconcile || (forced && t - last_sweep >= forced_gap))) {
      if (!Reconcile(*master)) ++master_errors_;
      forced = false;
      last_sweep = clock_->Now();
      next_reconcile = last_sweep + reconcile;
    }
    Nanos wake = registered_ ? std::min(next_heartbeat, next_reconcile) : clock_->Now() + retry;
    if (forced) wake = std::min(wake, last_sweep + forced_gap);
    if (registered_) wake = std::min(wake, last_peers + (peers_wanted ? peers_gap : peers_every));
    {
      // A flag raised since the read above must not wait for the deadline; one raised after this
      // check wakes the sleeper (a wake is never lost).
      std::lock_guard lock(mu_);
      if (stop_) return;
      if (reconcile_now_ || peers_now_) continue;
    }
    sleeper_->SleepUntil(wake);
  }
}

bool StorageNode::Reconcile(MasterClient& master) {
  std::vector<HeldObject> held;
  std::vector<uint64_t> generations;
  uint32_t cursor = 0;
  Nanos heartbeat_at = clock_->Now() + options_.heartbeat_interval;
  do {
    // A long sweep (many objects) must not starve the heartbeats.
    if (clock_->Now() >= heartbeat_at) {
      if (master.Heartbeat(options_.id).ok()) ++heartbeats_;
      heartbeat_at = clock_->Now() + options_.heartbeat_interval;
    }
    held.clear();
    generations.clear();
    cursor = store_.List(cursor, options_.reconcile_batch, &held, &generations);
    if (held.empty()) break;
    absl::StatusOr<std::vector<uint32_t>> drop = master.Reconcile(options_.id, held);
    if (!drop.ok()) {
      if (drop.status().code() == absl::StatusCode::kNotFound) registered_ = false;
      return false;
    }
    for (uint32_t i : *drop) {
      if (store_.DeleteIfGeneration({held[i].ns, held[i].object}, generations[i])) ++freed_;
    }
  } while (cursor != 0);
  ++sweeps_;
  return true;
}

StorageNodeStats StorageNode::stats() const {
  return {registrations_.load(), heartbeats_.load(), master_errors_.load(), sweeps_.load(),
          freed_.load()};
}

std::string StorageNode::MetricsText() {
  const NodeStoreStats s = store_.stats();
  const DataServerStats d = data_.stats();
  using net::MetricType;
  net::PrometheusWriter w;
  w.Gauge("myriad_kvnode_capacity_bytes", "Bytes of the node's segments",
          static_cast<double>(s.capacity_bytes));
  w.Gauge("myriad_kvnode_used_bytes", "Object bytes held, writes in progress included",
          static_cast<double>(s.used_bytes));
  w.Gauge("myriad_kvnode_arena_bytes", "Segment bytes in use, block tags and alignment included",
          static_cast<double>(s.arena_bytes));
  w.Gauge("myriad_kvnode_objects", "Objects held", static_cast<double>(s.objects));
  w.Counter("myriad_kvnode_allocation_failures_total", "Puts that found no room",
            s.allocation_failures);
  w.Gauge("myriad_kvnode_connections", "Open data-path connections",
          static_cast<double>(data_.connections()));
  w.Family("myriad_kvnode_ops_total", "Data-path operations by kind", MetricType::kCounter);
  w.Sample("myriad_kvnode_ops_total", {{"op", "put"}}, d.puts);
  w.Sample("myriad_kvnode_ops_total", {{"op", "get"}}, d.gets);
  w.Sample("myriad_kvnode_ops_total", {{"op", "delete"}}, d.deletes);
  w.Sample("myriad_kvnode_ops_total", {{"op", "copy_to"}}, d.copies);
  w.Counter("myriad_kvnode_get_objects_total", "Objects asked for in GET batches", d.get_objects);
  w.Counter("myriad_kvnode_get_misses_total", "Objects asked for and not held", d.get_misses);
  w.Family("myriad_kvnode_bytes_total", "Payload bytes by direction", MetricType::kCounter);
  w.Sample("myriad_kvnode_bytes_total", {{"direction", "in"}}, d.bytes_in);
  w.Sample("myriad_kvnode_bytes_total", {{"direction", "out"}}, d.bytes_out);
  w.Family("myriad_kvnode_errors_total", "Data-path failures by kind", MetricType::kCounter);
  w.Sample("myriad_kvnode_errors_total", {{"kind", "error_reply"}}, d.errors);
  w.Sample("myriad_kvnode_errors_total", {{"kind", "bad_frame"}}, d.bad_frames);
  w.Sample("myriad_kvnode_errors_total", {{"kind", "timeout"}}, d.timeouts);
  w.Sample("myriad_kvnode_errors_total", {{"kind", "truncated"}}, d.truncated);
  w.Sample("myriad_kvnode_errors_total", {{"kind", "copy_failed"}}, d.copy_failures);
  if (shm_) {
    const ShmServerStats m = shm_->stats();
    w.Gauge("myriad_kvnode_shm_connections", "Open same-host shared-memory connections",
            static_cast<double>(shm_->connections()));
    w.Gauge("myriad_kvnode_shm_held", "Objects pinned or reserved by shared-memory clients now",
            static_cast<double>(m.held));
    w.Family("myriad_kvnode_shm_ops_total", "Shared-memory operations by kind",
             MetricType::kCounter);
    w.Sample("myriad_kvnode_shm_ops_total", {{"op", "get"}}, m.gets);
    w.Sample("myriad_kvnode_shm_ops_total", {{"op", "put"}}, m.puts);
    w.Sample("myriad_kvnode_shm_ops_total", {{"op", "abort"}}, m.aborts);
    w.Family("myriad_kvnode_shm_bytes_total", "Shared-memory payload bytes by direction",
             MetricType::kCounter);
    w.Sample("myriad_kvnode_shm_bytes_total", {{"direction", "in"}}, m.bytes_in);
    w.Sample("myriad_kvnode_shm_bytes_total", {{"direction", "out"}}, m.bytes_out);
    w.Family("myriad_kvnode_shm_errors_total", "Shared-memory path failures by kind",
             MetricType::kCounter);
    w.Sample("myriad_kvnode_shm_errors_total", {{"kind", "error_reply"}}, m.errors);
    w.Sample("myriad_kvnode_shm_errors_total", {{"kind", "bad_frame"}}, m.bad_frames);
    w.Sample("myriad_kvnode_shm_errors_total", {{"kind", "timeout"}}, m.timeouts);
  }
  w.Counter("myriad_kvnode_registrations_total", "Registrations with the master",
            registrations_.load());
  w.Counter("myriad_kvnode_master_errors_total", "Failed calls to the master",
            master_errors_.load());
  w.Counter("myriad_kvnode_reconcile_sweeps_total", "Completed reconciliation sweeps",
            sweeps_.load());
  w.Counter("myriad_kvnode_objects_freed_total",
            "Objects freed because the master no longer places them here", freed_.load());
  return w.Take();
}

}  // namespace myriad::kvstore
