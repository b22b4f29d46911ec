// The storage node's memory: the segment allocator and the object store above it.
#include "kvstore/node_store.h"

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "core/rng.h"
#include "kvstore/segment_arena.h"

namespace myriad::kvstore {
namespace {

TEST(SegmentArenaTest, FreedBlocksCoalesceBackToOneSegment) {
  SegmentArena arena(1 << 20);
  std::vector<uint64_t> blocks;
  while (auto b = arena.Allocate(10'000)) blocks.push_back(*b);
  ASSERT_GT(blocks.size(), 90u);
  EXPECT_FALSE(arena.Allocate(10'000).has_value());
  // Free in an interleaved order so both left and right merges happen.
  for (size_t i = 0; i < blocks.size(); i += 2) arena.Free(blocks[i]);
  EXPECT_FALSE(arena.Allocate(30'000).has_value()) << "holes of one block must not fit three";
  for (size_t i = 1; i < blocks.size(); i += 2) arena.Free(blocks[i]);
  EXPECT_EQ(arena.used(), 0u);
  EXPECT_EQ(arena.free_blocks(), 1u);
  auto whole = arena.Allocate(arena.max_payload());
  ASSERT_TRUE(whole.has_value());
  EXPECT_EQ(*whole % SegmentArena::kAlign, 0u);
}

TEST(SegmentArenaTest, RandomAllocFreeKeepsPayloadsIntact) {
  SegmentArena arena(4 << 20);
  Rng rng(7);
  struct Live {
    uint64_t offset, size;
    uint8_t fill;
  };
  std::vector<Live> live;
  for (int step = 0; step < 5000; ++step) {
    if (!live.empty() && rng.Below(2) == 0) {
      const size_t i = rng.Below(live.size());
      const Live l = live[i];
      for (uint64_t j = 0; j < l.size; j += 97) ASSERT_EQ(static_cast<uint8_t>(*arena.At(l.offset + j)), l.fill);
      arena.Free(l.offset);
      live[i] = live.back();
      live.pop_back();
    } else {
      const uint64_t size = 1 + rng.Below(60'000);
      if (auto b = arena.Allocate(size)) {
        const auto fill = static_cast<uint8_t>(step);
        std::memset(arena.At(*b), fill, size);
        live.push_back({*b, size, fill});
      }
    }
  }
  for (const Live& l : live) arena.Free(l.offset);
  EXPECT_EQ(arena.used(), 0u);
  EXPECT_EQ(arena.free_blocks(), 1u);
}

TEST(NodeStoreTest, PinnedObjectOutlivesItsDeleteAndRewrite) {
  NodeStore store(1 << 20, 1 << 20);
  auto w = store.Reserve({1, 0xa}, 1000);
  ASSERT_TRUE(w.ok());
  std::memset(w->data, 'x', 1000);
  EXPECT_FALSE(store.Pin({1, 0xa}).has_value()) << "invisible until committed";
  store.Commit(*w);
  auto r = store.Pin({1, 0xa});
  ASSERT_TRUE(r.has_value());
  // A newer version replaces it for new readers; the pinned bytes stay until unpinned.
  auto w2 = store.Reserve({1, 0xa}, 500);
  ASSERT_TRUE(w2.ok());
  std::memset(w2->data, 'y', 500);
  store.Commit(*w2);
  EXPECT_EQ(store.stats().used_bytes, 1500u);
  EXPECT_EQ(static_cast<char>(r->data[999]), 'x');
  store.Unpin(*r);
  EXPECT_EQ(store.stats().used_bytes, 500u);
  EXPECT_EQ(store.stats().objects, 1u);
  EXPECT_TRUE(store.Delete({1, 0xa}));
  EXPECT_EQ(store.stats().used_bytes, 0u);
  EXPECT_FALSE(store.Delete({1, 0xa}));
}

TEST(NodeStoreTest, FullStoreRefusesAndOversizeNamesTheSegment) {
  NodeStore store(1 << 20, 256 << 10);  // four segments
  EXPECT_EQ(store.stats().segments, 4u);
  auto big = store.Reserve({0, 1}, 300 << 10);
  ASSERT_FALSE(big.ok());
  EXPECT_EQ(big.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(big.status().message().find("segment"), std::string::npos);
  int stored = 0;
  for (uint64_t k = 0; k < 100; ++k) {
    auto w = store.Reserve({0, k}, 100 << 10);
    if (!w.ok()) {
      EXPECT_EQ(w.status().code(), absl::StatusCode::kResourceExhausted);
      break;
    }
    store.Commit(*w);
    ++stored;
  }
  EXPECT_EQ(stored, 8);  // two per 256 KiB segment, the tags leave no room for a third
  EXPECT_EQ(store.stats().allocation_failures, 1u);
}

TEST(NodeStoreTest, ListAndDeleteIfGenerationSkipRewrittenObjects) {
  NodeStore store(1 << 20, 1 << 20);
  for (uint64_t k = 1; k <= 5; ++k) {
    auto w = store.Reserve({2, k}, 100);
    ASSERT_TRUE(w.ok());
    store.Commit(*w);
  }
  std::vector<HeldObject> held;
  std::vector<uint64_t> gens;
  uint32_t cursor = store.List(0, 3, &held, &gens);
  EXPECT_NE(cursor, 0u);
  cursor = store.List(cursor, 3, &held, &gens);
  EXPECT_EQ(cursor, 0u);
  ASSERT_EQ(held.size(), 5u);
  // Object 1 is written again after the listing: its old generation must not delete it.
  auto w = store.Reserve({2, 1}, 100);
  ASSERT_TRUE(w.ok());
  store.Commit(*w);
  EXPECT_FALSE(store.DeleteIfGeneration({2, 1}, gens[0]));
  EXPECT_TRUE(store.DeleteIfGeneration({2, held[1].object}, gens[1]));
  EXPECT_EQ(store.stats().objects, 4u);
  EXPECT_EQ(store.DropNamespace(2), 4u);
  EXPECT_EQ(store.stats().used_bytes, 0u);
}

}  // namespace
}  // namespace myriad::kvstore
