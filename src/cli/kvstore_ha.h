#pragma once
// The high-availability side of `myriad kvstore`:
//   myriad kvstore master ... --etcd http://127.0.0.1:2379 [--election-key KEY]
//                         [--advertise http://HOST:PORT] [--lease-ttl S] [--sync-standbys N]
//                         [--sync-timeout S]
// runs the master as one of a group elected through etcd (kvstore/ha_server.h), and
//   myriad kvstore load --master URL1,URL2,... [--duration S] [--clients N] [--kill-after S]
// is the failover experiment's client: puts (start + end) as fast as it can through clients
// that follow the leader, the longest time without an acknowledged put (the write outage), and
// at the end how many acknowledged objects the leader no longer knows (lost).
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <CLI/CLI.hpp>

#include "absl/status/statusor.h"
#include "core/time.h"
#include "kvstore/master_server.h"
#include "net/http.h"

namespace myriad::cli {

struct KvstoreHaFlags {
  std::string etcd;
  std::string election_key = "/myriad/kvstore/leader";
  std::string advertise;
  int64_t lease_ttl_s = 3;
  int sync_standbys = 1;
  double sync_timeout_s = 2;

  void Add(CLI::App* master);
  bool enabled() const { return !etcd.empty(); }
};

// The one-shot client commands' connection (put, get, stat): `--master` may list several
// masters, comma-separated; a standby's 421 sends the request on to the leader it names, a
// master that cannot be reached to the next in the list. Each request is sent at most once to
// a master that may have executed it (421 guarantees it was not).
class LeaderFollowingHttp {
 public:
  // "http://a:7700,http://b:7700"; an error naming the bad URL.
  // `auth_token`: the cluster's shared secret (kvstore/auth.h), sent with every request.
  static absl::StatusOr<std::unique_ptr<LeaderFollowingHttp>> Create(std::string_view urls,
                                                                     Nanos timeout,
                                                                     std::string auth_token = {});
  absl::StatusOr<net::HttpResponse> Get(std::string_view target);
  absl::StatusOr<net::HttpResponse> Post(std::string_view target, std::string body);
  absl::StatusOr<net::HttpResponse> Delete(std::string_view target);

 private:
  absl::StatusOr<net::HttpResponse> Send(std::string_view method, std::string_view target,
                                         const std::string& body);
  std::vector<std::string> urls_;
  std::string auth_token_;
  Nanos timeout_ = 0;
  size_t current_ = 0;
};

// Serves as an HA master until SIGINT or SIGTERM (resigning on the way out). Exit code.
int RunHaMaster(const KvstoreHaFlags& flags, kvstore::MasterServerOptions options);

class KvstoreLoad {
 public:
  void Add(CLI::App* kvstore);
  bool selected() const { return cmd_ != nullptr && cmd_->parsed(); }
  int Run();

 private:
  CLI::App* cmd_ = nullptr;
  std::vector<std::string> masters_;
  std::string namespace_ = "failover";
  double duration_s_ = 20;
  int clients_ = 4;
  uint64_t size_ = 4096;
  double timeout_s_ = 2;
  std::string auth_token_file_;
};

// The --auth-token-file FLAG (or MYRIAD_KVSTORE_TOKEN) of a kvstore subcommand, added to `app`.
void AddAuthTokenFile(CLI::App* app, std::string* file);
// The token (empty: none); nullopt after printing why not, for `myriad kvstore WHAT` (exit 2).
// `server`: warn, when there is none, that WHAT is open to anyone who reaches its port.
std::optional<std::string> LoadAuthTokenFor(const char* what, const std::string& file,
                                            bool server = false);

}  // namespace myriad::cli
