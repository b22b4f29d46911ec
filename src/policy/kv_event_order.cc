#include "policy/kv_event_order.h"

#include "absl/container/flat_hash_map.h"

namespace myriad::policy {

std::vector<size_t> ParentFirstOrder(std::span<const uint64_t> hashes,
                                     std::span<const std::optional<uint64_t>> parents) {
  const size_t n = hashes.size();
  std::vector<size_t> order;
  order.reserve(n);
  absl::flat_hash_map<uint64_t, size_t> at;
  at.reserve(n);
  for (size_t i = 0; i < n; ++i) at.emplace(hashes[i], i);
  std::vector<bool> placed(n, false);
  std::vector<size_t> chain;
  for (size_t i = 0; i < n; ++i) {
    // Climb to the first ancestor in the batch not placed yet, then place the chain down. The
    // `placed` marks (set on the way up) stop a malformed cycle as well as shared ancestors.
    chain.clear();
    for (size_t j = i; !placed[j];) {
      placed[j] = true;
      chain.push_back(j);
      if (j >= parents.size() || !parents[j]) break;
      const auto it = at.find(*parents[j]);
      if (it == at.end()) break;
      j = it->second;
    }
    order.insert(order.end(), chain.rbegin(), chain.rend());
  }
  return order;
}

}  // namespace myriad::policy
