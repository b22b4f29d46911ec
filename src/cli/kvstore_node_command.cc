// `myriad kvstore node`, `myriad kvstore repair`, and the data halves of `put --file` and
// `get --out` (see cli/kvstore_command.h).
#include <fmt/format.h>

#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <sstream>

#include "cli/kvstore_command.h"
#include "cli/stop_signals.h"
#include "kvstore/api_json.h"
#include "kvstore/repair_agent.h"
#include "kvstore/storage_node.h"
#include "kvstore/store_client.h"
#include "net/http.h"

namespace myriad::cli {

namespace {

int Fail(const char* what, const absl::Status& st, int code = 1) {
  std::fprintf(stderr, "myriad kvstore %s: %s\n", what, std::string(st.message()).c_str());
  return code;
}

// The --keys as block keys; nullopt (after printing which) when one does not parse.
std::optional<std::vector<BlockKey>> ParseKeys(const char* what, const std::vector<std::string>& keys) {
  std::vector<BlockKey> out;
  for (const std::string& k : keys) {
    std::optional<BlockKey> key = kvstore::api::ParseKey(k);
    if (!key) {
      std::fprintf(stderr, "myriad kvstore %s: --keys: '%s' is not a block key\n", what, k.c_str());
      return std::nullopt;
    }
    out.push_back(*key);
  }
  return out;
}

}  // namespace

void KvstoreCommand::AddStorageCommands() {
  put_->add_option("--file", file_, "Write this file's bytes to every replica node");
  get_->add_option("--out", out_, "Read the first key's object from a replica node into this file");

  node_ = cmd_->add_subcommand("node", "Serve a storage node's bytes until SIGINT or SIGTERM");
  node_->add_option("--master", url_, "The master's URL, http://HOST:PORT, or a group's masters comma-separated (the leader is followed)")->required();
  node_->add_option("--id", node_id_, "Node id, unique in the cluster")->required();
  node_->add_option("--fault-domain", fault_domain_, "Fault domain (rack, power, switch)")->required();
  node_->add_option("--capacity", capacity_bytes_, "Bytes of memory to hold objects in (at most 1 PiB)")
      ->capture_default_str();
  node_->add_option("--segment-bytes", segment_bytes_,
                    "Bytes per preallocated segment (the largest object; 4096 to 4 GiB + 64)")
      ->capture_default_str();
  node_->add_option("--listen", listen_, "HOST:PORT of the data path (port 0: any free port)")
      ->required();
  node_->add_option("--advertise", advertise_, "HOST:PORT to register (default: --listen's)");
  node_->add_option("--shm-socket", shm_socket_,
                    "Unix socket PATH for clients on this host: they map the node's memory and "
                    "copy objects directly, bypassing TCP (default: none, TCP only)");
  node_->add_option("--shm-spin-us", shm_spin_us_,
                    "Microseconds a shm connection's thread polls for the client before it sleeps: "
                    "faster answers for up to that much of a core per wait (0: sleep at once)")
      ->check(CLI::Range(0, 100000))
      ->capture_default_str();
  node_->add_option("--threads", threads_, "Data-path I/O threads")
      ->check(CLI::Range(1, 256))
      ->capture_default_str();
  node_->add_option("--metrics-port", metrics_port_, "HTTP port for /metrics (-1: none, 0: any)")
      ->capture_default_str();
  node_->add_option("--heartbeat", heartbeat_s_, "Seconds between heartbeats")->capture_default_str();
  node_->add_option("--reconcile", reconcile_s_, "Seconds between reconciliation sweeps")
      ->capture_default_str();
  AddAuthTokenFile(node_, &auth_token_file_);

  repair_ = cmd_->add_subcommand("repair", "Carry out the master's repair tasks until SIGINT or SIGTERM");
  repair_->add_option("--master", url_, "The master's URL, http://HOST:PORT, or a group's masters comma-separated (the leader is followed)")->required();
  repair_->add_option("--workers", workers_, "Copies in flight")
      ->check(CLI::Range(1, 256))
      ->capture_default_str();
  AddAuthTokenFile(repair_, &auth_token_file_);
}

int KvstoreCommand::RunNode() {
  absl::StatusOr<net::HostPort> listen = net::ParseHostPort(listen_);
  if (!listen.ok()) return Fail("node", listen.status(), 2);
  if (capacity_bytes_ == 0 || capacity_bytes_ > kvstore::kMaxNodeCapacityBytes) {
    std::fprintf(stderr, "myriad kvstore node: --capacity %llu is outside [1, %llu] (1 PiB)\n",
                 static_cast<unsigned long long>(capacity_bytes_),
                 static_cast<unsigned long long>(kvstore::kMaxNodeCapacityBytes));
    return 2;
  }
  // A segment holds one object and its 64-byte tag.
  constexpr uint64_t kMaxSegment = kvstore::kMaxObjectBytes + 64;
  if (segment_bytes_ < 4096 || segment_bytes_ > kMaxSegment) {
    std::fprintf(stderr, "myriad kvstore node: --segment-bytes %llu is outside [4096, %llu]\n",
                 static_cast<unsigned long long>(segment_bytes_),
                 static_cast<unsigned long long>(kMaxSegment));
    return 2;
  }
  std::optional<std::string> token = LoadAuthTokenFor("node", auth_token_file_, /*server=*/true);
  if (!token) return 2;
  StopSignals signals;
  kvstore::StorageNodeOptions o;
  o.auth_token = *std::move(token);
  o.master_url = url_;
  o.id = node_id_;
  o.fault_domain = fault_domain_;
  o.capacity_bytes = capacity_bytes_;
  o.segment_bytes = segment_bytes_;
  o.data.address = listen->host;
  o.data.port = listen->port;
  o.data.threads = threads_;
  o.data.max_body_bytes = segment_bytes_ + 64;
  o.advertise = advertise_;
  o.shm_socket = shm_socket_;
  o.shm_spin = int64_t{shm_spin_us_} * kMicrosecond;
  o.http_port = metrics_port_;
  o.heartbeat_interval = SecondsToNanos(heartbeat_s_);
  o.reconcile_interval = SecondsToNanos(reconcile_s_);
  kvstore::StorageNode node(std::move(o));
  if (absl::Status st = node.Start(); !st.ok()) return Fail("node", st);
  std::printf("myriad kvstore node %u: data path on %s", node_id_, node.address().c_str());
  if (!shm_socket_.empty()) std::printf(", same-host shared memory on %s", shm_socket_.c_str());
  if (metrics_port_ >= 0) std::printf(", metrics on http://%s:%u/metrics", listen->host.c_str(), node.http_port());
  std::printf("\n");
  std::fflush(stdout);
  const int signal = signals.Wait();
  std::printf("myriad kvstore node %u: %s, stopping\n", node_id_, signal == SIGINT ? "SIGINT" : "SIGTERM");
  std::fflush(stdout);
  node.Stop();
  return 0;
}

int KvstoreCommand::RunRepair() {
  std::optional<std::string> token = LoadAuthTokenFor("repair", auth_token_file_);
  if (!token) return 2;
  StopSignals signals;
  kvstore::RepairAgentOptions o;
  o.auth_token = *std::move(token);
  o.master_url = url_;
  o.workers = workers_;
  kvstore::RepairAgent agent(o);
  if (absl::Status st = agent.Start(); !st.ok()) return Fail("repair", st, 2);
  std::printf("myriad kvstore repair: carrying out repairs for %s\n", url_.c_str());
  std::fflush(stdout);
  signals.Wait();
  agent.Stop();
  const kvstore::RepairAgentStats s = agent.stats();
  std::printf("myriad kvstore repair: %llu copies done, %llu failed, %llu bytes\n",
              static_cast<unsigned long long>(s.done), static_cast<unsigned long long>(s.failed),
              static_cast<unsigned long long>(s.bytes));
  return 0;
}

int KvstoreCommand::RunPutData() {
  std::optional<std::vector<BlockKey>> keys = ParseKeys("put", keys_);
  if (!keys) return 2;
  // A directory opens as a stream on Linux and throws only when read: check the kind first,
  // and the size before allocating for it.
  std::error_code ec;
  const auto kind = std::filesystem::status(file_, ec).type();
  if (ec || kind != std::filesystem::file_type::regular) {
    std::fprintf(stderr, "myriad kvstore put: --file: '%s' is %s\n", file_.c_str(),
                 kind == std::filesystem::file_type::directory ? "a directory, not a file"
                 : ec ? "not readable" : "not a regular file");
    return 2;
  }
  const uintmax_t file_bytes = std::filesystem::file_size(file_, ec);
  if (!ec && file_bytes > kvstore::kMaxObjectBytes) {
    std::fprintf(stderr, "myriad kvstore put: --file: '%s' has %ju bytes, above the maximum object size %llu (4 GiB)\n",
                 file_.c_str(), file_bytes, static_cast<unsigned long long>(kvstore::kMaxObjectBytes));
    return 2;
  }
  std::ifstream in(file_, std::ios::binary);
  if (!in) {
    std::fprintf(stderr, "myriad kvstore put: --file: cannot read '%s'\n", file_.c_str());
    return 2;
  }
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::optional<std::string> token = LoadAuthTokenFor("put", auth_token_file_);
  if (!token) return 2;
  auto client = kvstore::StoreClient::Connect(url_, {.master_timeout = SecondsToNanos(timeout_s_),
                                                     .node_timeout = SecondsToNanos(timeout_s_),
                                                     .auth_token = *token});
  if (!client.ok()) return Fail("put", client.status(), 2);
  if (create_namespace_) {
    absl::Status st = (*client)->master().CreateNamespace(namespace_);
    if (!st.ok() && st.code() != absl::StatusCode::kFailedPrecondition) return Fail("put", st);
  }
  if (absl::Status st = (*client)->Put(namespace_, *keys, bytes, replicas_, pinned_); !st.ok()) {
    return Fail("put", st);
  }
  std::printf("{\"object\": \"%s\", \"bytes\": %zu, \"replicas\": %d}\n",
              kvstore::api::FormatKey(keys->back()).c_str(), bytes.size(), replicas_);
  return 0;
}

int KvstoreCommand::RunGetData() {
  std::optional<std::vector<BlockKey>> keys = ParseKeys("get", keys_);
  if (!keys) return 2;
  std::optional<std::string> token = LoadAuthTokenFor("get", auth_token_file_);
  if (!token) return 2;
  auto client = kvstore::StoreClient::Connect(url_, {.master_timeout = SecondsToNanos(timeout_s_),
                                                     .node_timeout = SecondsToNanos(timeout_s_),
                                                     .auth_token = *token});
  if (!client.ok()) return Fail("get", client.status(), 2);
  absl::StatusOr<std::string> bytes = (*client)->Get(namespace_, keys->front());
  if (!bytes.ok()) return Fail("get", bytes.status());
  std::ofstream out(out_, std::ios::binary);
  out.write(bytes->data(), static_cast<std::streamsize>(bytes->size()));
  if (!out) {
    std::fprintf(stderr, "myriad kvstore get: --out: cannot write '%s'\n", out_.c_str());
    return 1;
  }
  std::printf("{\"key\": \"%s\", \"bytes\": %zu, \"out\": \"%s\"}\n",
              kvstore::api::FormatKey(keys->front()).c_str(), bytes->size(), out_.c_str());
  return 0;
}

}  // namespace myriad::cli
