// MasterServer's replication payload: what a standby needs beyond the master's own operation
// log. The KvMaster records (kvstore_core/op_log.h) carry the metadata; the storage nodes' data
// addresses live in the server (the master never needs them, clients do) and travel beside:
//
//   payload := records length (LEB128) | KvMaster records | { node id (LEB128) | address (str) }*
//
// an empty address meaning "none registered". A snapshot is the same shape, with the master's
// SnapshotLog and every address known.
#include <fmt/format.h>

#include "kvstore/master_server.h"

namespace myriad::kvstore {

namespace {

std::string Encode(std::string_view records,
                   const std::vector<std::pair<NodeId, std::string>>& addresses) {
  LogWriter w;
  w.U64(records.size());
  w.buffer().append(records);
  for (const auto& [node, address] : addresses) {
    w.U64(node);
    w.Str(address);
  }
  return w.Take();
}

}  // namespace

std::string MasterServer::TakeLog() {
  std::lock_guard lock(mu_);
  std::string records = master_.TakeLog();
  if (records.empty() && address_log_.empty()) return {};
  std::string out = Encode(records, address_log_);
  address_log_.clear();
  return out;
}

std::string MasterServer::SnapshotLog() const {
  std::lock_guard lock(mu_);
  std::vector<std::pair<NodeId, std::string>> all(addresses_.begin(), addresses_.end());
  return Encode(master_.SnapshotLog(), all);
}

absl::Status MasterServer::ApplyLog(std::string_view payload) {
  LogReader in(payload);
  const uint64_t length = in.U64();
  if (in.failed() || length > payload.size() - in.position()) {
    return absl::DataLossError(fmt::format("replication payload of {} bytes: bad records length {}",
                                           payload.size(), length));
  }
  const size_t start = in.position();
  std::lock_guard lock(mu_);
  if (absl::Status st = master_.Apply(payload.substr(start, length)); !st.ok()) return st;
  LogReader rest(payload.substr(start + length));
  while (!rest.done()) {
    const auto node = static_cast<NodeId>(rest.U64());
    const std::string_view address = rest.Str();
    if (rest.failed()) {
      return absl::DataLossError(fmt::format("replication payload: truncated node address at byte {}",
                                             start + length + rest.position()));
    }
    if (address.empty()) {
      addresses_.erase(node);
    } else {
      addresses_[node] = std::string(address);
    }
  }
  return absl::OkStatus();
}

void MasterServer::Promote() {
  const Nanos now = clock_->Now();
  std::lock_guard lock(mu_);
  master_.Promote(now);
}

uint64_t MasterServer::CanonicalHash() const {
  std::lock_guard lock(mu_);
  return master_.CanonicalHash();
}

}  // namespace myriad::kvstore
