#pragma once
// `myriad kvstore master --listen HOST:PORT [--threads N]` serves the KV store's metadata API
// (kvstore/master_server.h) until SIGINT or SIGTERM. The client subcommands talk to one:
//   myriad kvstore stat --master http://HOST:PORT[,http://HOST2:PORT,...] (a group: the leader
//                                                   is found through the standbys' 421s)
//   myriad kvstore put  --master URL --namespace NS --keys K1,K2,... --size BYTES
//                       [--replicas N] [--pinned] [--create-namespace]
//   myriad kvstore get  --master URL --namespace NS --keys K1,K2,...
//   myriad kvstore namespace --master URL (--create NAME | --drop NAME)
//                       a namespace per model version: a new version writes (and its canary
//                       reads) its own; dropping one hides it at once and its bytes go back to
//                       the nodes once the last read lease in it expires
// `put` is the metadata half of a put (start, then end): it reserves replicas and marks the
// object complete; it moves no bytes, unless --file names the bytes: then they are written to
// every replica node (kvstore/store_client.h). `get --out FILE` reads the first key's object
// from a replica node into FILE. Answers are printed as JSON. Exit codes: 0 ok, 1 the master
// or a node refused or could not be reached, 2 bad arguments.
// The storage side (kvstore_node_command.cc):
//   myriad kvstore node   --master URL --id N --fault-domain D --capacity BYTES
//                         --listen HOST:PORT [--segment-bytes B] [--metrics-listen PORT] ...
//   myriad kvstore repair --master URL [--workers N]
#include <cstdint>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "cli/kvstore_ha.h"

namespace myriad::cli {

class KvstoreCommand {
 public:
  explicit KvstoreCommand(CLI::App& app);
  bool selected() const { return cmd_->parsed(); }
  int Run();

 private:
  int RunMaster();
  int RunStat();
  int RunPut();
  int RunGet();
  int RunNamespace();
  // kvstore_node_command.cc
  void AddStorageCommands();
  int RunNode();
  int RunRepair();
  int RunPutData();
  int RunGetData();

  CLI::App* cmd_;
  CLI::App* master_;
  CLI::App* stat_;
  CLI::App* put_;
  CLI::App* get_;
  CLI::App* namespace_cmd_;
  KvstoreHaFlags ha_;  // master: the HA group through etcd (cli/kvstore_ha.h)
  KvstoreLoad load_;
  CLI::App* node_;
  CLI::App* repair_;
  // master
  std::string listen_ = "127.0.0.1:7480";
  int threads_ = 2;
  uint64_t max_body_bytes_ = uint64_t{8} << 20;
  // clients
  std::string url_;
  std::string namespace_;
  std::string create_ns_, drop_ns_;  // namespace --create / --drop
  std::vector<std::string> keys_;
  uint64_t size_ = 0;
  int replicas_ = 1;
  bool pinned_ = false;
  bool create_namespace_ = false;
  double timeout_s_ = 10;
  std::string file_;  // put --file
  std::string out_;   // get --out
  std::string auth_token_file_;  // every subcommand: --auth-token-file
  // node
  uint32_t node_id_ = 0;
  std::string fault_domain_;
  uint64_t capacity_bytes_ = uint64_t{1} << 30;
  uint64_t segment_bytes_ = uint64_t{256} << 20;
  std::string advertise_;
  std::string shm_socket_;
  int shm_spin_us_ = 200;
  int metrics_port_ = -1;
  double heartbeat_s_ = 1;
  double reconcile_s_ = 5;
  int workers_ = 4;
};

}  // namespace myriad::cli
