#include "kvstore_core/node_registry.h"

#include <algorithm>

#include "absl/container/flat_hash_set.h"
#include "fmt/format.h"

namespace myriad::kvstore {

absl::Status NodeRegistry::Add(NodeId id, std::string_view domain, uint64_t capacity,
                               Nanos now) {
  if (id == kNoNode) return absl::InvalidArgumentError(fmt::format("node id {} is reserved", id));
  if (index_.contains(id)) {
    return absl::AlreadyExistsError(fmt::format("node {} is already registered", id));
  }
  if (capacity == 0) {
    return absl::InvalidArgumentError(fmt::format("node {}: capacity must be > 0 bytes", id));
  }
  if (capacity > kMaxNodeCapacityBytes) {
    return absl::InvalidArgumentError(fmt::format(
        "node {}: capacity {} bytes exceeds the maximum {} (1 PiB)", id, capacity,
        kMaxNodeCapacityBytes));
  }
  if (total_capacity_ > UINT64_MAX - capacity) {
    return absl::ResourceExhaustedError(fmt::format(
        "node {}: the cluster's capacity would exceed 2^64-1 bytes", id));
  }
  if (domain.empty()) {
    return absl::InvalidArgumentError(fmt::format("node {}: fault domain must be named", id));
  }
  auto [it, fresh] = domain_ids_.try_emplace(std::string(domain),
                                             static_cast<uint32_t>(domain_names_.size()));
  if (fresh) domain_names_.emplace_back(domain);
  index_[id] = static_cast<uint32_t>(nodes_.size());
  nodes_.push_back(NodeInfo{.id = id, .domain = it->second, .capacity = capacity, .used = 0,
                            .joined_at = now, .last_heartbeat = now});
  total_capacity_ += capacity;
  return absl::OkStatus();
}

absl::Status NodeRegistry::Heartbeat(NodeId id, Nanos now) {
  NodeInfo* n = Find(id);
  if (n == nullptr) {
    // A node declared dead must register again: its replicas were dropped.
    return absl::NotFoundError(fmt::format("heartbeat from unknown node {}", id));
  }
  n->last_heartbeat = std::max(n->last_heartbeat, now);
  return absl::OkStatus();
}

void NodeRegistry::Remove(NodeId id) {
  auto it = index_.find(id);
  if (it == index_.end()) return;
  const uint32_t pos = it->second;
  total_capacity_ -= nodes_[pos].capacity;
  total_used_ -= nodes_[pos].used;
  index_.erase(it);
  if (pos + 1 != nodes_.size()) {
    nodes_[pos] = nodes_.back();
    index_[nodes_[pos].id] = pos;
  }
  nodes_.pop_back();
}

NodeInfo* NodeRegistry::Find(NodeId id) {
  auto it = index_.find(id);
  return it == index_.end() ? nullptr : &nodes_[it->second];
}

const NodeInfo* NodeRegistry::Find(NodeId id) const {
  auto it = index_.find(id);
  return it == index_.end() ? nullptr : &nodes_[it->second];
}

uint32_t NodeRegistry::DomainOf(NodeId id) const {
  const NodeInfo* n = Find(id);
  return n == nullptr ? UINT32_MAX : n->domain;
}

void NodeRegistry::ResetHeartbeats(Nanos now) {
  for (NodeInfo& n : nodes_) n.last_heartbeat = now;
}

std::vector<NodeId> NodeRegistry::Expired(Nanos now, Nanos dead_after) const {
  std::vector<NodeId> out;
  for (const NodeInfo& n : nodes_) {
    if (now - n.last_heartbeat > dead_after) out.push_back(n.id);
  }
  std::sort(out.begin(), out.end());
  return out;
}

void NodeRegistry::AddUsed(NodeId id, int64_t bytes) {
  NodeInfo* n = Find(id);
  if (n == nullptr) return;
  n->used = static_cast<uint64_t>(static_cast<int64_t>(n->used) + bytes);
  total_used_ = static_cast<uint64_t>(static_cast<int64_t>(total_used_) + bytes);
}

double NodeRegistry::Weight(const NodeInfo& n, uint64_t size, Nanos now,
                            const KvMasterOptions& o) const {
  if (n.used + size > n.capacity) return 0;
  double ramp = 1;
  if (o.ramp > 0 && now - n.joined_at < o.ramp) {
    ramp = std::max(o.ramp_floor,
                    static_cast<double>(now - n.joined_at) / static_cast<double>(o.ramp));
  }
  return static_cast<double>(n.capacity - n.used) * ramp;
}

absl::Status NodeRegistry::Place(uint64_t size, int count, std::span<const NodeId> exclude,
                                 Nanos now, const KvMasterOptions& options, Rng& rng,
                                 std::vector<NodeId>* out, std::span<const NodeId> avoid) const {
  auto weight = [&](const NodeInfo& n) {
    if (std::find(avoid.begin(), avoid.end(), n.id) != avoid.end()) return 0.0;
    return Weight(n, size, now, options);
  };
  absl::flat_hash_set<uint32_t> taken;
  for (NodeId id : exclude) taken.insert(DomainOf(id));
  // Domains that could take a replica at all, for the error message and the early check.
  std::vector<uint32_t> qualified;
  for (const NodeInfo& n : nodes_) {
    if (taken.contains(n.domain) || weight(n) <= 0) continue;
    if (std::find(qualified.begin(), qualified.end(), n.domain) == qualified.end()) {
      qualified.push_back(n.domain);
    }
  }
  if (static_cast<int>(qualified.size()) < count) {
    std::sort(qualified.begin(), qualified.end(), [&](uint32_t a, uint32_t b) {
      return domain_names_[a] < domain_names_[b];
    });
    std::string names;
    for (uint32_t d : qualified) names += (names.empty() ? "" : ", ") + domain_names_[d];
    return absl::ResourceExhaustedError(fmt::format(
        "cannot place {} replica(s) of {} bytes on distinct fault domains: {} fault domain(s) "
        "{}have a live node with that much free space{}{}",
        count, size, qualified.size(), exclude.empty() ? "" : "not already holding it ",
        names.empty() ? "" : ": ", names));
  }
  for (int r = 0; r < count; ++r) {
    double total = 0;
    for (const NodeInfo& n : nodes_) {
      if (!taken.contains(n.domain)) total += weight(n);
    }
    double u = rng.Uniform() * total;
    const NodeInfo* pick = nullptr;
    for (const NodeInfo& n : nodes_) {
      if (taken.contains(n.domain)) continue;
      const double w = weight(n);
      if (w <= 0) continue;
      pick = &n;  // the last eligible one absorbs rounding at the top of the range
      if (u < w) break;
      u -= w;
    }
    out->push_back(pick->id);
    taken.insert(pick->domain);
  }
  return absl::OkStatus();
}

size_t NodeRegistry::memory_bytes() const {
  size_t b = nodes_.capacity() * sizeof(NodeInfo) +
             index_.capacity() * (sizeof(std::pair<NodeId, uint32_t>) + 1) +
             domain_ids_.capacity() * (sizeof(std::pair<std::string, uint32_t>) + 1);
  for (const std::string& s : domain_names_) b += sizeof(std::string) + s.capacity();
  return b;
}

}  // namespace myriad::kvstore
