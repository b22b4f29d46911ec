// KvEventIndexer: vLLM's events, decoded, feeding the prefix index so that Match finds the right
// holder and length under Myriad's own keys.
#include "policy/kv_event_indexer.h"

#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <numeric>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/block_hash.h"
#include "net/kv_event_publisher.h"
#include "net/kv_event_subscriber.h"

namespace myriad::policy {
namespace {

constexpr PublisherId kEngine = 1;
constexpr HolderId kGpu = 10;
constexpr HolderId kCpu = 11;
constexpr uint32_t kBs = 16;

std::vector<uint32_t> Prompt(size_t blocks, uint32_t salt = 0) {
  std::vector<uint32_t> t(blocks * kBs);
  std::iota(t.begin(), t.end(), 1000 + salt);
  return t;
}

std::vector<uint32_t> Slice(const std::vector<uint32_t>& t, size_t first_block, size_t blocks) {
  return {t.begin() + static_cast<ptrdiff_t>(first_block * kBs),
          t.begin() + static_cast<ptrdiff_t>((first_block + blocks) * kBs)};
}

// Hashes made up like an engine's: unrelated to the tokens, above INT64_MAX.
uint64_t H(int i) { return 0xF000000000000000ULL + static_cast<uint64_t>(i); }

KvEventBatch One(KvEvent e) {
  KvEventBatch b;
  b.events.push_back(std::move(e));
  return b;
}

class IndexerTest : public ::testing::Test {
 protected:
  IndexerTest() : indexer_(&index_) {
    EXPECT_TRUE(indexer_.AddPublisher(kEngine, {{{"GPU", kGpu}, {"CPU", kCpu}}}).ok());
  }

  absl::Status Apply(const KvEventBatch& b) { return indexer_.Apply(kEngine, seq_++, b, now_); }

  std::vector<PrefixMatch> Match(const std::vector<uint32_t>& tokens, uint64_t extra = 0) {
    const auto keys = HashTokenBlocks(tokens, kBs, extra);
    std::vector<PrefixMatch> out;
    index_.Match(keys, now_, &out);
    return out;
  }

  PrefixIndex index_;
  KvEventIndexer indexer_;
  uint64_t seq_ = 0;
  Nanos now_ = 0;
};

TEST_F(IndexerTest, StoredChainWithParentMatchesUnderOurKeys) {
  const auto prompt = Prompt(5);
  // Blocks 0-1 first, then 2-4 continuing from the engine hash of block 1.
  ASSERT_TRUE(Apply(One(BlockStored{.block_hashes = {H(0), H(1)},
                                    .token_ids = Slice(prompt, 0, 2),
                                    .block_size = kBs,
                                    .medium = "GPU"}))
                  .ok());
  ASSERT_TRUE(Apply(One(BlockStored{.block_hashes = {H(2), H(3), H(4)},
                                    .parent_block_hash = H(1),
                                    .token_ids = Slice(prompt, 2, 3),
                                    .block_size = kBs}))  // nil medium: GPU
                  .ok());
  auto m = Match(prompt);
  ASSERT_EQ(m.size(), 1u);
  EXPECT_EQ(m[0].holder, kGpu);
  EXPECT_EQ(m[0].matched_blocks, 5u);
  EXPECT_FALSE(m[0].suspect);
  // A request sharing only the first 3 blocks matches 3.
  auto other = prompt;
  other[3 * kBs] += 1;
  m = Match(other);
  ASSERT_EQ(m.size(), 1u);
  EXPECT_EQ(m[0].matched_blocks, 3u);
  EXPECT_EQ(indexer_.stats().blocks_stored, 5u);
}

TEST_F(IndexerTest, RemovedByEngineHashShortensTheMatch) {
  const auto prompt = Prompt(4);
  ASSERT_TRUE(Apply(One(BlockStored{.block_hashes = {H(0), H(1), H(2), H(3)},
                                    .token_ids = prompt,
                                    .block_size = kBs,
                                    .medium = "GPU"}))
                  .ok());
  ASSERT_TRUE(Apply(One(BlockRemoved{.block_hashes = {H(2), H(3), H(99)}, .medium = "GPU"})).ok());
  auto m = Match(prompt);
  ASSERT_EQ(m.size(), 1u);
  EXPECT_EQ(m[0].matched_blocks, 2u);
  EXPECT_EQ(indexer_.stats().blocks_removed, 2u);
  EXPECT_EQ(indexer_.stats().unknown_removed, 1u);
}

TEST_F(IndexerTest, MediaAreSeparateHoldersAndAParentMayLiveInAnotherTier) {
  const auto prompt = Prompt(3);
  ASSERT_TRUE(Apply(One(BlockStored{.block_hashes = {H(0), H(1)},
                                    .token_ids = Slice(prompt, 0, 2),
                                    .block_size = kBs,
                                    .medium = "GPU"}))
                  .ok());
  ASSERT_TRUE(Apply(One(BlockStored{.block_hashes = {H(2)},
                                    .parent_block_hash = H(1),
                                    .token_ids = Slice(prompt, 2, 1),
                                    .block_size = kBs,
                                    .medium = "CPU"}))
                  .ok());
  auto m = Match(prompt);
  ASSERT_FALSE(m.empty());
  EXPECT_EQ(m[0].holder, kGpu);
  EXPECT_EQ(m[0].matched_blocks, 2u);
  for (const auto& x : m) {
    if (x.holder == kCpu) {
      EXPECT_EQ(x.matched_blocks, 0u);  // block 2 alone is no prefix
    }
  }
  // Once blocks 0-1 reach the CPU tier too, its chain is whole: the block placed through the
  // GPU tier's parent had the right key and position.
  ASSERT_TRUE(Apply(One(BlockStored{.block_hashes = {H(0), H(1)},
                                    .token_ids = Slice(prompt, 0, 2),
                                    .block_size = kBs,
                                    .medium = "CPU"}))
                  .ok());
  m = Match(prompt);
  ASSERT_EQ(m.size(), 2u);  // by holder id
  EXPECT_EQ(m[1].holder, kCpu);
  EXPECT_EQ(m[1].matched_blocks, 3u);
}

TEST_F(IndexerTest, UnknownParentIsAnOrphanAndSkipped) {
  const auto prompt = Prompt(2);
  ASSERT_TRUE(Apply(One(BlockStored{.block_hashes = {H(1)},
                                    .parent_block_hash = H(0),  // never seen
                                    .token_ids = Slice(prompt, 1, 1),
                                    .block_size = kBs}))
                  .ok());
  EXPECT_EQ(indexer_.stats().orphans, 1u);
  EXPECT_EQ(index_.entries(), 0u);
}

// The order an offloading tier really produces (emu/kv_store_tier.cc): HBM evicts blocks 1-3
// in its own order and publishes their removal at once; the tier writes them and publishes each
// one's CPU BlockStored when its write lands, here a child before its parent. Every CPU block
// must still chain (through the parent that just left HBM), so the engine's reach covers the
// whole prompt: block 0 in HBM, blocks 1-3 in the store tier.
TEST(KvEventIndexerTiers, ACpuBlockChainsToAParentThatJustLeftHbm) {
  constexpr HolderId kReach = 12;
  PrefixIndex index;
  KvEventIndexer indexer(&index, {.block_size = kBs});
  ASSERT_TRUE(indexer.AddPublisher(kEngine, {{{"GPU", kGpu}, {"CPU", kUnindexedHolder}}, kReach}).ok());
  uint64_t seq = 0;
  auto apply = [&](KvEvent e) { return indexer.Apply(kEngine, seq++, One(std::move(e)), 0); };
  const auto prompt = Prompt(4);
  ASSERT_TRUE(apply(BlockStored{.block_hashes = {H(0), H(1), H(2), H(3)}, .token_ids = prompt, .block_size = kBs,
                                .medium = "GPU"})
                  .ok());
  ASSERT_TRUE(apply(BlockRemoved{.block_hashes = {H(3), H(1), H(2)}, .medium = "GPU"}).ok());
  for (int b : {3, 1, 2}) {
    ASSERT_TRUE(apply(BlockStored{.block_hashes = {H(b)},
                                  .parent_block_hash = H(b - 1),
                                  .token_ids = Slice(prompt, static_cast<size_t>(b), 1),
                                  .block_size = kBs,
                                  .medium = "CPU"})
                    .ok());
  }
  EXPECT_EQ(indexer.stats().orphans, 0u);
  // Block 3's parent had just left HBM; block 1's is still there, and block 2's (1) is in the
  // CPU tier by the time block 2 lands.
  EXPECT_EQ(indexer.stats().recalled_parents, 1u);
  std::vector<PrefixMatch> m;
  index.Match(HashTokenBlocks(prompt, kBs, 0), 0, &m);
  ASSERT_EQ(m.size(), 2u);  // by holder id
  EXPECT_EQ(m[0].holder, kGpu);
  EXPECT_EQ(m[0].matched_blocks, 1u);
  EXPECT_EQ(m[1].holder, kReach);
  EXPECT_EQ(m[1].matched_blocks, 4u);
}

// The memory of removed blocks is bounded: a parent removed longer ago than the bound is gone,
// and its child is an orphan again. AllBlocksCleared forgets it too.
TEST(KvEventIndexerTiers, RecentlyRemovedIsBoundedAndCleared) {
  PrefixIndex index;
  KvEventIndexer indexer(&index, {.block_size = kBs, .recently_removed_per_publisher = 2});
  ASSERT_TRUE(indexer.AddPublisher(kEngine, {{{"GPU", kGpu}, {"CPU", kCpu}}}).ok());
  uint64_t seq = 0;
  auto apply = [&](KvEvent e) { return indexer.Apply(kEngine, seq++, One(std::move(e)), 0); };
  const auto prompt = Prompt(4);
  auto cpu_child_of = [&](int b) {
    return BlockStored{.block_hashes = {H(b + 100)}, .parent_block_hash = H(b),
                       .token_ids = Slice(prompt, static_cast<size_t>(b) + 1, 1), .block_size = kBs, .medium = "CPU"};
  };
  ASSERT_TRUE(apply(BlockStored{.block_hashes = {H(0), H(1), H(2), H(3)}, .token_ids = prompt, .block_size = kBs,
                                .medium = "GPU"})
                  .ok());
  ASSERT_TRUE(apply(BlockRemoved{.block_hashes = {H(0), H(1), H(2)}, .medium = "GPU"}).ok());
  ASSERT_TRUE(apply(cpu_child_of(0)).ok());  // H(0) was pushed out by H(1) and H(2)
  EXPECT_EQ(indexer.stats().orphans, 1u);
  ASSERT_TRUE(apply(cpu_child_of(2)).ok());
  EXPECT_EQ(indexer.stats().recalled_parents, 1u);
  ASSERT_TRUE(apply(AllBlocksCleared{}).ok());
  ASSERT_TRUE(apply(cpu_child_of(1)).ok());
  EXPECT_EQ(indexer.stats().orphans, 2u);
}

TEST_F(IndexerTest, BlockSizeMismatchIsAnErrorNamingTheField) {
  const auto s = Apply(One(BlockStored{.block_hashes = {H(0)},
                                       .token_ids = std::vector<uint32_t>(32, 1),
                                       .block_size = 32}));
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("events[0].block_size: 32"), std::string_view::npos) << s;
  const auto t = Apply(One(BlockStored{.block_hashes = {H(0), H(1)},
                                       .token_ids = std::vector<uint32_t>(20, 1),
                                       .block_size = kBs}));
  EXPECT_NE(t.message().find("events[0].token_ids: 20 tokens for 2 blocks"), std::string_view::npos)
      << t;
  EXPECT_EQ(indexer_.stats().invalid_events, 2u);
  EXPECT_EQ(index_.entries(), 0u);
}

TEST_F(IndexerTest, LoraNameSeedsTheChain) {
  const auto prompt = Prompt(2);
  ASSERT_TRUE(Apply(One(BlockStored{.block_hashes = {H(0), H(1)},
                                    .token_ids = prompt,
                                    .block_size = kBs,
                                    .lora_name = "adapter-a"}))
                  .ok());
  EXPECT_TRUE(Match(prompt).empty());
  auto m = Match(prompt, ExtraKeyOf("adapter-a"));
  ASSERT_EQ(m.size(), 1u);
  EXPECT_EQ(m[0].matched_blocks, 2u);
}

// The engine reports a salted request's first block with the salt as its extra keys; the
// request side keys it with CacheSaltDigest. Both go through core's one rule, so they meet.
TEST_F(IndexerTest, SaltedFirstBlockMeetsARequestKeyedWithItsCacheSalt) {
  const auto prompt = Prompt(2);
  ASSERT_TRUE(Apply(One(BlockStored{.block_hashes = {H(0), H(1)},
                                    .token_ids = prompt,
                                    .block_size = kBs,
                                    .extra_keys = std::vector<BlockExtraKeys>{
                                        CacheSaltExtraKeys("tenant-a"), std::nullopt}}))
                  .ok());
  EXPECT_TRUE(Match(prompt).empty());
  std::vector<PrefixMatch> m;
  index_.Match(HashTokenBlocks(prompt, kBs, 0, CacheSaltDigest("tenant-b")), now_, &m);
  EXPECT_TRUE(m.empty());
  index_.Match(HashTokenBlocks(prompt, kBs, 0, CacheSaltDigest("tenant-a")), now_, &m);
  ASSERT_EQ(m.size(), 1u);
  EXPECT_EQ(m[0].holder, kGpu);
  EXPECT_EQ(m[0].matched_blocks, 2u);
}

TEST_F(IndexerTest, GapMarksSuspectRestartAndClearAllClear) {
  const auto prompt = Prompt(2);
  const KvEventBatch store = One(BlockStored{.block_hashes = {H(0), H(1)},
                                             .token_ids = prompt,
                                             .block_size = kBs});
  ASSERT_TRUE(indexer_.Apply(kEngine, 0, store, now_).ok());
  ASSERT_TRUE(indexer_.Apply(kEngine, 5, KvEventBatch{}, now_).ok());  // 1..4 lost
  auto m = Match(prompt);
  ASSERT_EQ(m.size(), 1u);
  EXPECT_TRUE(m[0].suspect);
  EXPECT_EQ(indexer_.stats().gaps, 1u);
  // Restart: seq back to 0, the index forgets the engine's blocks.
  ASSERT_TRUE(indexer_.Apply(kEngine, 0, KvEventBatch{}, now_).ok());
  EXPECT_TRUE(Match(prompt).empty());
  EXPECT_EQ(indexer_.remembered_hashes(kEngine), 0u);
  EXPECT_EQ(indexer_.stats().restarts, 1u);
  // Stored again, then AllBlocksCleared.
  ASSERT_TRUE(indexer_.Apply(kEngine, 1, store, now_).ok());
  EXPECT_EQ(Match(prompt).size(), 1u);
  ASSERT_TRUE(indexer_.Apply(kEngine, 2, One(AllBlocksCleared{}), now_).ok());
  EXPECT_TRUE(Match(prompt).empty());
}

TEST_F(IndexerTest, DecodeErrorMarksSuspectAndOtherGroupsAreSkipped) {
  const auto prompt = Prompt(1);
  ASSERT_TRUE(Apply(One(BlockStored{.block_hashes = {H(0)}, .token_ids = prompt, .block_size = kBs}))
                  .ok());
  const absl::StatusOr<KvEventBatch> bad = absl::InvalidArgumentError("events: expected an array");
  EXPECT_FALSE(indexer_.Apply(kEngine, seq_++, bad, now_).ok());
  auto m = Match(prompt);
  ASSERT_EQ(m.size(), 1u);
  EXPECT_TRUE(m[0].suspect);
  ASSERT_TRUE(Apply(One(BlockStored{.block_hashes = {H(5)},
                                    .token_ids = Prompt(1, 7),
                                    .block_size = kBs,
                                    .group_idx = 1}))
                  .ok());
  EXPECT_EQ(indexer_.stats().other_group, 1u);
  EXPECT_EQ(indexer_.stats().decode_errors, 1u);
  EXPECT_EQ(indexer_.stats().batches, 2u);  // the lost batch is not counted as applied
}

// vLLM 0.9.0 to 0.10.1 name blocks by Python's hash(), signed. Such a batch (encoded here by
// nlohmann's msgpack writer, which writes negative ints as negative fixint / int8..int64) is
// indexed, and its hashes are the same engine hashes as their unsigned spelling: a parent or a
// removal given either way finds the block.
TEST_F(IndexerTest, SignedEngineHashesIndexAsTheirUnsignedForm) {
  const auto prompt = Prompt(3);
  const auto tokens = Slice(prompt, 0, 2);
  const nlohmann::json stored = nlohmann::json::array(
      {1.5, nlohmann::json::array({nlohmann::json::array(
                {"BlockStored", nlohmann::json::array({int64_t{-7}, INT64_MIN}), nullptr, tokens,
                 kBs})})});
  auto first = net::DecodeKvEventBatch(nlohmann::json::to_msgpack(stored));
  ASSERT_TRUE(first.ok()) << first.status();
  ASSERT_TRUE(Apply(*first).ok());
  ASSERT_TRUE(Apply(One(BlockStored{.block_hashes = {3},
                                    .parent_block_hash = uint64_t{1} << 63,  // INT64_MIN's bits
                                    .token_ids = Slice(prompt, 2, 1),
                                    .block_size = kBs}))
                  .ok());
  EXPECT_EQ(indexer_.stats().orphans, 0u);
  auto m = Match(prompt);
  ASSERT_EQ(m.size(), 1u);
  EXPECT_EQ(m[0].matched_blocks, 3u);
  // Removed by the signed spelling of block 1 and the plain one of block 2.
  const nlohmann::json removed = nlohmann::json::array(
      {1.5, nlohmann::json::array({nlohmann::json::array(
                {"BlockRemoved", nlohmann::json::array({INT64_MIN, 3}), "GPU"})})});
  auto second = net::DecodeKvEventBatch(nlohmann::json::to_msgpack(removed));
  ASSERT_TRUE(second.ok()) << second.status();
  ASSERT_TRUE(Apply(*second).ok());
  m = Match(prompt);
  ASSERT_EQ(m.size(), 1u);
  EXPECT_EQ(m[0].matched_blocks, 1u);
  EXPECT_EQ(indexer_.stats().unknown_removed, 0u);
  EXPECT_EQ(indexer_.stats().decode_errors, 0u);
}

TEST(KvEventIndexerBound, ForgetsOldestEngineHashes) {
  PrefixIndex index;
  KvEventIndexer indexer(&index, {.block_size = kBs, .max_hashes_per_holder = 8});
  ASSERT_TRUE(indexer.AddPublisher(kEngine, {{{"GPU", kGpu}}}).ok());
  for (uint64_t i = 0; i < 100; ++i) {
    KvEventBatch b = One(BlockStored{.block_hashes = {i}, .token_ids = Prompt(1, static_cast<uint32_t>(i)), .block_size = kBs});
    ASSERT_TRUE(indexer.Apply(kEngine, i, b, 0).ok());
    if (i % 2 == 0) {
      ASSERT_TRUE(indexer.Apply(kEngine, ++i, One(BlockRemoved{.block_hashes = {i - 1}}), 0).ok());
    }
  }
  EXPECT_LE(indexer.remembered_hashes(kEngine), 8u);
  EXPECT_FALSE(indexer.AddPublisher(kEngine, {{{"GPU", kGpu}}}).ok());
  EXPECT_EQ(indexer.Apply(99, 0, KvEventBatch{}, 0).code(), absl::StatusCode::kNotFound);
}

// End to end: an emulated engine publishes over ZMQ, the subscriber's callback feeds the
// indexer, Match sees the blocks; then the engine restarts and the index forgets them.
TEST(KvEventIndexerEndToEnd, PublisherToIndexOverZmqWithRestart) {
  using namespace std::chrono_literals;
  PrefixIndex index;
  KvEventIndexer indexer(&index);
  ASSERT_TRUE(indexer.AddPublisher(kEngine, {{{"GPU", kGpu}}}).ok());
  std::mutex mu;
  std::condition_variable cv;
  uint64_t applied = 0;
  bool saw_restart = false;

  net::KvEventPublisherOptions po;
  po.endpoint = "tcp://127.0.0.1:*";
  po.replay_endpoint = "tcp://127.0.0.1:*";
  auto pub = net::KvEventPublisher::Create(po);
  ASSERT_TRUE(pub.ok()) << pub.status();
  net::KvEventSubscriberOptions so;
  so.sources.push_back({"engine-1", (*pub)->endpoint(), (*pub)->replay_endpoint(), ""});
  auto sub = net::KvEventSubscriber::Start(so, [&](const net::KvEventDelivery& d) {
    std::lock_guard lock(mu);
    (void)indexer.Apply(kEngine, d.seq, d.batch, 0);
    saw_restart = saw_restart || d.restart;
    ++applied;
    cv.notify_all();
  });
  ASSERT_TRUE(sub.ok()) << sub.status();
  auto wait = [&](auto pred, std::chrono::milliseconds t) {
    std::unique_lock lock(mu);
    return cv.wait_for(lock, t, pred);
  };

  const auto prompt = Prompt(4);
  // Warm-up batches (empty) until connected; the real blocks follow.
  for (int i = 0; i < 100 && !wait([&] { return applied > 0; }, 100ms); ++i) {
    ASSERT_TRUE((*pub)->Publish(KvEventBatch{}).ok());
  }
  // Enough of a sequence that the restarted engine is seen before its own passes it.
  for (int i = 0; i < 30; ++i) ASSERT_TRUE((*pub)->Publish(KvEventBatch{}).ok());
  ASSERT_TRUE((*pub)->Publish(One(BlockStored{.block_hashes = {H(0), H(1)},
                                               .token_ids = Slice(prompt, 0, 2),
                                               .block_size = kBs,
                                               .medium = "GPU"})).ok());
  ASSERT_TRUE((*pub)->Publish(One(BlockStored{.block_hashes = {H(2), H(3)},
                                               .parent_block_hash = H(1),
                                               .token_ids = Slice(prompt, 2, 2),
                                               .block_size = kBs,
                                               .medium = "GPU"})).ok());
  auto last = (*pub)->Publish(KvEventBatch{});
  ASSERT_TRUE(last.ok());
  const uint64_t total = *last + 1;
  ASSERT_TRUE(wait([&] { return applied >= total; }, 10s));
  std::vector<PrefixMatch> m;
  {
    std::lock_guard lock(mu);
    index.Match(HashTokenBlocks(prompt, kBs), 0, &m);
  }
  ASSERT_EQ(m.size(), 1u);
  EXPECT_EQ(m[0].holder, kGpu);
  EXPECT_EQ(m[0].matched_blocks, 4u);

  // Restart: same ports, sequence from 0 again.
  const std::string endpoint = (*pub)->endpoint();
  const std::string replay = (*pub)->replay_endpoint();
  (*pub)->Stop();
  po.endpoint = endpoint;
  po.replay_endpoint = replay;
  auto pub2 = net::KvEventPublisher::Create(po);
  ASSERT_TRUE(pub2.ok()) << pub2.status();
  for (int i = 0; i < static_cast<int>(total) - 1 && !wait([&] { return saw_restart; }, 100ms); ++i) {
    ASSERT_TRUE((*pub2)->Publish(KvEventBatch{}).ok());
  }
  ASSERT_TRUE(wait([&] { return saw_restart; }, 10s));
  std::lock_guard lock(mu);
  index.Match(HashTokenBlocks(prompt, kBs), 0, &m);
  EXPECT_TRUE(m.empty());
  EXPECT_EQ(indexer.stats().restarts, 1u);
}

}  // namespace
}  // namespace myriad::policy
