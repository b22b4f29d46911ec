// A store over two independent cells (a master and its storage nodes each): prefixes spread
// over the cells by their root key, each found in its own cell only.
#include "kvstore/sharded_store.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "kv_cluster.h"
#include "kvstore_core/routing.h"

namespace myriad::kvstore {
namespace {

using testing::KvCluster;

TEST(ShardedStore, PrefixesLiveInTheCellOfTheirRootKey) {
  KvCluster a, b;
  for (KvCluster* c : {&a, &b}) {
    c->AddNode(1, "rack-1");
    c->AddNode(2, "rack-2");
  }
  const std::vector<std::string> cells = {a.url(), b.url()};
  auto store = ShardedStore::Connect(cells);
  ASSERT_TRUE(store.ok()) << store.status();
  ASSERT_TRUE((*store)->CreateNamespace("ns").ok());
  ASSERT_TRUE((*store)->CreateNamespace("ns").ok()) << "an existing namespace is fine";
  // 40 prompts of two blocks; the second block's run is found by either of its keys.
  std::vector<BlockKey> roots, tails;
  size_t in_b = 0;
  for (uint64_t p = 0; p < 40; ++p) {
    const BlockKey root = HashContentBlock(kRootBlockKey, p), tail = HashContentBlock(root, 1);
    const BlockKey run[] = {root, tail};
    ASSERT_TRUE((*store)->Put(root, "ns", run, fmt::format("prompt {}", p), 2).ok()) << p;
    roots.push_back(root);
    tails.push_back(tail);
    in_b += (*store)->CellOf(root);
  }
  EXPECT_GT(in_b, 5u);
  EXPECT_LT(in_b, 35u) << "both cells take prefixes";
  for (size_t p = 0; p < roots.size(); ++p) {
    auto got = (*store)->Get(roots[p], "ns", tails[p]);
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_EQ(*got, fmt::format("prompt {}", p));
    // The other cell never saw it.
    StoreClient& other = (*store)->cell(1 - (*store)->CellOf(roots[p]));
    EXPECT_EQ(other.Get("ns", tails[p]).status().code(), absl::StatusCode::kNotFound);
  }
  std::vector<std::string> values;
  std::vector<absl::Status> statuses;
  std::vector<BlockKey> keys = tails;
  std::vector<BlockKey> batch_roots = roots;
  keys.push_back(HashContentBlock(kRootBlockKey, 999));  // never put
  batch_roots.push_back(keys.back());
  ASSERT_TRUE((*store)->BatchGet(batch_roots, "ns", keys, &values, &statuses).ok());
  for (size_t p = 0; p < roots.size(); ++p) {
    ASSERT_TRUE(statuses[p].ok()) << statuses[p];
    EXPECT_EQ(values[p], fmt::format("prompt {}", p));
  }
  EXPECT_EQ(statuses.back().code(), absl::StatusCode::kNotFound);
  EXPECT_FALSE((*store)->BatchGet(roots, "ns", std::span(keys).first(3), &values, &statuses).ok());
  EXPECT_FALSE(ShardedStore::Connect(std::vector<std::string>{}).ok());
}

}  // namespace
}  // namespace myriad::kvstore
