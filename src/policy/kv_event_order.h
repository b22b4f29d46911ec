#pragma once
// The order a tier publishes the blocks it stored in: a block's BlockStored never precedes its
// parent's when both are published together. An indexer keys a block from its parent
// (policy/kv_event_indexer.h), so a child published first finds no parent and is dropped as an
// orphan. HBM evicts in its own order (CLOCK over a hash table: a child often goes before its
// parent), and an offloading tier writes what HBM evicted. Pure.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

namespace myriad::policy {

// A permutation of [0, n): every block whose parent is among `hashes` comes after that parent;
// otherwise the given order is kept. `parents[i]` is block i's parent (nullopt: a chain's
// first block). Sizes must match.
std::vector<size_t> ParentFirstOrder(std::span<const uint64_t> hashes,
                                     std::span<const std::optional<uint64_t>> parents);

}  // namespace myriad::policy
