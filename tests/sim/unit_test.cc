// sim::Unit on its own, driven as the cluster drives it.
#include "sim/unit.h"

#include <gtest/gtest.h>

#include <vector>

#include "perf/step_model.h"
#include "sim/event_queue.h"
#include "sim/request_table.h"

namespace myriad::sim {
namespace {

class RecordingHost : public UnitHost {
 public:
  void OnPrefillDone(int, uint32_t) override {}
  void OnRequestDone(int, uint32_t slot) override { done.push_back(slot); }
  std::vector<uint32_t> done;
};

TEST(UnitTest, AnEmptyDecodeUnitTakesAContextWithinCapacityDespiteTheWatermark) {
  auto gpu = perf::FindGpu("H100");
  auto model = perf::FindModel("Llama-3.1-8B");
  ASSERT_TRUE(gpu.ok() && model.ok());
  auto step = perf::StepModel::Create(*gpu, *model, {}, {});
  ASSERT_TRUE(step.ok());
  EventQueue events;
  RequestTable table;
  RecordingHost host;
  UnitConfig cfg;
  cfg.role = Role::kDecode;
  Unit unit(cfg, *step, events, table, host);
  // Within capacity (the cluster admits it) but inside the 1% watermark: nothing else runs,
  // so the watermark protects no one, and refusing would hold it (and the queue) forever.
  Request r;
  r.input_tokens = static_cast<int32_t>(unit.kv_capacity() - 10);
  r.output_tokens = 4;
  const uint32_t slot = table.Add(std::move(r));
  unit.EnqueueDecode(slot);
  while (events.Step()) {
  }
  ASSERT_EQ(host.done.size(), 1u);
  EXPECT_EQ(host.done[0], slot);
  EXPECT_EQ(unit.kv_used(), 0);
}

}  // namespace
}  // namespace myriad::sim
