#include "policy/weight_plan.h"

#include <gtest/gtest.h>

#include <vector>

namespace myriad::policy {
namespace {

constexpr double kShard = 170e9;  // DeepSeek-V3 FP8 on a 4-node unit: one node's shard

TEST(WeightPlanTest, BurstFromServingPeersBeatsEveryUnitPullingFromStorage) {
  // 10 units of 4 nodes join a pool of 40 serving ones: every new unit has its own source.
  const WeightPlan p = PlanWeightLoad({.unit_bytes = 4 * kShard, .nodes_per_unit = 4, .units = 10, .loaded_units = 40},
                                      WeightFabric{});
  EXPECT_EQ(p.kind, WeightPlanKind::kChain);
  ASSERT_EQ(p.ready.size(), 10u);
  for (Nanos t : p.ready) EXPECT_EQ(t, SecondsToNanos(kShard / 4.3e9));  // 39.5 s
  // 40 storage readers share 20 GB/s: 0.5 GB/s each, 340 s.
  EXPECT_EQ(p.storage_makespan, SecondsToNanos(kShard / 0.5e9));
}

TEST(WeightPlanTest, ColdStartReadsOnceThenPipelinesAChain) {
  // No unit holds the weights: storage feeds one 4-node unit at the full 5 GB/s per node (20
  // GB/s / 4 nodes), which relays 256 MB chunks down a chain of the other 7 at 4.3 GB/s.
  const WeightPlan p = PlanWeightLoad({.unit_bytes = 4 * kShard, .nodes_per_unit = 4, .units = 8}, WeightFabric{});
  EXPECT_EQ(p.kind, WeightPlanKind::kChain);
  ASSERT_EQ(p.ready.size(), 8u);
  EXPECT_EQ(p.ready[0], SecondsToNanos(kShard / 5e9));  // 34 s
  for (int i = 1; i < 8; ++i) EXPECT_EQ(p.ready[static_cast<size_t>(i)], SecondsToNanos(kShard / 4.3e9 + i * 256e6 / 4.3e9));
  EXPECT_NEAR(NanosToSeconds(p.makespan), 39.95, 0.01);
  // All 32 nodes from storage: 0.625 GB/s each, 272 s; a tree would take 34 + 3 x 39.5 s.
  EXPECT_EQ(p.storage_makespan, SecondsToNanos(kShard / 0.625e9));
}

TEST(WeightPlanTest, WithoutPipeliningATreeBeatsAChain) {
  // Chunks as large as the shard: a chain costs a whole shard per hop, a tree doubles holders.
  const WeightFabric f{.storage_bytes_per_s = 1e9, .peer_bytes_per_s = 10e9, .chunk_bytes = 10e9};
  const WeightPlan p = PlanWeightLoad({.unit_bytes = 10e9, .units = 7, .loaded_units = 1}, f);
  EXPECT_EQ(p.kind, WeightPlanKind::kTree);
  const std::vector<Nanos> want = {kSecond, 2 * kSecond, 2 * kSecond, 3 * kSecond, 3 * kSecond, 3 * kSecond, 3 * kSecond};
  EXPECT_EQ(p.ready, want);
}

TEST(WeightPlanTest, StorageOnlyWhenPeersAreNotAllowedOrFaster) {
  const WeightLoad burst{.unit_bytes = 4 * kShard, .nodes_per_unit = 4, .units = 10, .loaded_units = 40,
                         .peers_allowed = false};
  const WeightPlan p = PlanWeightLoad(burst, WeightFabric{});
  EXPECT_EQ(p.kind, WeightPlanKind::kStorage);
  EXPECT_EQ(p.makespan, p.storage_makespan);
  // One unit alone: storage's 5 GB/s per node beats a peer's 4.3 GB/s, and the plan says so.
  const WeightPlan one = PlanWeightLoad({.unit_bytes = 4 * kShard, .nodes_per_unit = 4, .loaded_units = 1}, WeightFabric{});
  EXPECT_EQ(one.kind, WeightPlanKind::kStorage);
  EXPECT_EQ(one.makespan, SecondsToNanos(kShard / 5e9));
}

TEST(WeightPlanTest, OversubscribedSpineSlowsPeerCopies) {
  // 8 GB/s of NIC per node behind a 4:1 spine: a copy gets 2 GB/s, under the peer rate.
  const WeightFabric f{.storage_bytes_per_s = 1e6, .nic_bytes_per_s = 8e9, .oversubscription = 4};
  const WeightPlan p = PlanWeightLoad({.unit_bytes = 10e9, .units = 1, .loaded_units = 1}, f);
  EXPECT_EQ(p.kind, WeightPlanKind::kChain);
  EXPECT_EQ(p.makespan, SecondsToNanos(10e9 / 2e9));
}

TEST(WeightPlanTest, NoUnitsNoTime) {
  const WeightPlan p = PlanWeightLoad({.unit_bytes = 1e9, .units = 0, .loaded_units = 1}, WeightFabric{});
  EXPECT_TRUE(p.ready.empty());
  EXPECT_EQ(p.makespan, 0);
}

// The seeds' figure (seed 000; reference/PUBLIC_DATA.md "Weight distribution"; the LMSYS note
// on SGLang's RDMA weight update): Kimi K2 FP8, 1 TB, to an inference deployment on 32 nodes,
// 53.3 s by NCCL broadcast, 7.2 s by RDMA point-to-point from a sharded replica of the source.
// Published parameters only: one 400 Gb/s NIC (50 GB/s line rate) at the efficiency Mooncake's
// transfer engine measured (190 GB/s on 8 x 400 Gb/s: 47.5% of line), 23.75 GB/s per link.
TEST(WeightPlanTest, ReproducesKimiK2sOrderOfMagnitude) {
  constexpr double kBytes = 1e12, kLink = 50e9 * 190.0 / 400.0;  // 23.75e9
  const WeightFabric f{.peer_bytes_per_s = kLink, .nic_bytes_per_s = 190e9};
  // Point to point: each of the 32 nodes pulls its own 31.25 GB shard from the source's replica.
  const WeightPlan p2p = PlanWeightLoad({.unit_bytes = kBytes, .nodes_per_unit = 32, .units = 1, .loaded_units = 1}, f);
  EXPECT_EQ(p2p.kind, WeightPlanKind::kChain);
  EXPECT_NEAR(NanosToSeconds(p2p.makespan), 1.316, 0.001);
  // Broadcast: every rank receives every whole tensor (it keeps only its slice), through a
  // pipelined chain from one root: 32 receivers of the full 1 TB at one link's rate.
  const WeightPlan bcast = PlanWeightLoad({.unit_bytes = kBytes, .units = 32, .loaded_units = 1}, f);
  EXPECT_EQ(bcast.kind, WeightPlanKind::kChain);
  EXPECT_NEAR(NanosToSeconds(bcast.makespan), 1e12 / kLink + 31 * 256e6 / kLink, 1e-3);  // 42.44 s
  // The errors, stated: broadcast 42.4 s against 53.3 s (-20%); point to point 1.32 s against
  // 7.2 s (-82%, 5.5x low: the published time includes what the planner does not model, the
  // source's copy out of CPU memory, memory registration and per-tensor metadata). Both within
  // an order of magnitude, and the ordering and most of the gap (32x here, 7.4x published) hold.
  EXPECT_NEAR(NanosToSeconds(bcast.makespan) / 53.3, 0.80, 0.01);
  EXPECT_NEAR(NanosToSeconds(p2p.makespan) / 7.2, 0.18, 0.01);
  for (double ratio : {NanosToSeconds(bcast.makespan) / 53.3, NanosToSeconds(p2p.makespan) / 7.2}) {
    EXPECT_GT(ratio, 0.1);
    EXPECT_LT(ratio, 10);
  }
}

}  // namespace
}  // namespace myriad::policy
