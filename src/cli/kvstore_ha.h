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
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "kvstore/master_server.h"

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
};

}  // namespace myriad::cli
