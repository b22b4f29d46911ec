// ParentFirstOrder: the order an offloading tier publishes its stored blocks in.
#include "policy/kv_event_order.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <optional>
#include <vector>

namespace myriad::policy {
namespace {

// The positions of `order` by block index.
std::vector<size_t> PositionOf(const std::vector<size_t>& order) {
  std::vector<size_t> at(order.size());
  for (size_t k = 0; k < order.size(); ++k) at[order[k]] = k;
  return at;
}

TEST(KvEventOrder, ChildrenAfterTheirParentsOtherwiseAsGiven) {
  // Two chains, evicted interleaved and children first: 1 <- 2 <- 3 and 10 <- 11; 20 has a
  // parent outside the batch; 30 is a chain's first block.
  const std::vector<uint64_t> hashes = {3, 11, 20, 2, 30, 10, 1};
  const std::vector<std::optional<uint64_t>> parents = {2, 10, 99, 1, std::nullopt, std::nullopt, 0};
  const std::vector<size_t> order = ParentFirstOrder(hashes, parents);
  ASSERT_EQ(order.size(), hashes.size());
  const std::vector<size_t> at = PositionOf(order);
  for (size_t i = 0; i < hashes.size(); ++i) {
    for (size_t j = 0; j < hashes.size(); ++j) {
      if (parents[i] && *parents[i] == hashes[j]) {
        EXPECT_LT(at[j], at[i]) << hashes[j] << " before " << hashes[i];
      }
    }
  }
  // A parent moves up to just before its first child; the rest keep their order.
  EXPECT_EQ(order, (std::vector<size_t>{6, 3, 0, 5, 1, 2, 4}));
}

TEST(KvEventOrder, EmptyAndMalformedInputsTerminate) {
  EXPECT_TRUE(ParentFirstOrder({}, {}).empty());
  // A cycle (never produced by a real chain) still yields a permutation.
  const std::vector<uint64_t> hashes = {1, 2};
  const std::vector<std::optional<uint64_t>> parents = {2, 1};
  std::vector<size_t> order = ParentFirstOrder(hashes, parents);
  std::sort(order.begin(), order.end());
  EXPECT_EQ(order, (std::vector<size_t>{0, 1}));
}

}  // namespace
}  // namespace myriad::policy
