// The run as series over virtual time (myriad sim --report / --timeseries): the sampler's
// windows, the markers, the CSV, and whole runs sampled without changing what they report.
#include "sim/timeseries.h"

#include <gtest/gtest.h>

#include <cmath>
#include <sstream>
#include <string>
#include <vector>

#include "sim/runner.h"
#include "sim/scenario.h"

namespace myriad::sim {
namespace {

ClusterGauges Gauges(Nanos busy0, Nanos busy1, double handoff_bytes, int64_t shed) {
  ClusterGauges g;
  g.pool_busy = {busy0, busy1};
  g.pool_waiting = {3, 0};
  g.pool_running = {1, 7};
  g.kv_handoff_bytes = handoff_bytes;
  g.limiter_shed = shed;
  g.in_flight = 5;
  return g;
}

TimeSeriesSampler TwoPools() {
  // 2 units in pool "p", 1 in "d"; the cluster costs $3.6 per second.
  return TimeSeriesSampler(10 * kSecond, {"p", "d"}, {2, 1}, 3.6, 2 * kSecond, 100 * kMillisecond);
}

TEST(TimeSeriesSampler, WindowsHoldTheirOwnRequestsRatesAndUtilisation) {
  TimeSeriesSampler s = TwoPools();
  for (int i = 0; i < 4; ++i) s.OnArrival();
  // TTFTs 1..100 s (nearest rank: p50 = 50, p99 = 99); every tenth within SLO.
  for (int i = 1; i <= 100; ++i) s.OnComplete(i, i % 2 ? 0.05 : -1.0, i % 10 == 0, 1000);
  s.OnReject();
  s.Sample(10 * kSecond, Gauges(10 * kSecond, 5 * kSecond, 20e9, 4));
  s.Sample(20 * kSecond, Gauges(10 * kSecond + 40 * kSecond, 15 * kSecond, 20e9, 6));
  const auto& pts = s.series().points;
  ASSERT_EQ(pts.size(), 2u);
  const SeriesPoint& a = pts[0];
  EXPECT_EQ(a.t_s, 10);
  EXPECT_EQ(a.arrived, 4);
  EXPECT_EQ(a.completed, 100);
  EXPECT_EQ(a.rejected, 1);
  EXPECT_EQ(a.within_slo, 10);
  EXPECT_EQ(a.ttft_p50_s, 50);
  EXPECT_EQ(a.ttft_p99_s, 99);
  EXPECT_FLOAT_EQ(a.tpot_p99_s, 0.05);
  EXPECT_DOUBLE_EQ(a.slo_attainment, 10.0 / 101);
  EXPECT_DOUBLE_EQ(a.goodput_tokens_per_s, 10 * 1000 / 10.0);
  // $36 for the window over 10,000 tokens within SLO.
  EXPECT_DOUBLE_EQ(a.cost_per_million_tokens_within_slo, 36 / 0.01);
  EXPECT_DOUBLE_EQ(a.kv_handoff_gbps, 2.0);
  EXPECT_EQ(a.limiter_shed, 4);
  EXPECT_DOUBLE_EQ(a.pool_busy[0], 0.5);  // 10 s busy of 2 units x 10 s
  EXPECT_DOUBLE_EQ(a.pool_busy[1], 0.5);
  EXPECT_EQ(a.pool_waiting, (std::vector<int64_t>{3, 0}));
  EXPECT_EQ(a.pool_running, (std::vector<int64_t>{1, 7}));
  // The second window: nothing ended, counters give deltas, a step counted at its end is capped.
  const SeriesPoint& b = pts[1];
  EXPECT_EQ(b.completed, 0);
  EXPECT_TRUE(std::isnan(b.ttft_p99_s));
  EXPECT_TRUE(std::isnan(b.slo_attainment));
  EXPECT_TRUE(std::isnan(b.cost_per_million_tokens_within_slo));
  EXPECT_EQ(b.kv_handoff_gbps, 0);
  EXPECT_EQ(b.limiter_shed, 2);
  EXPECT_EQ(b.pool_busy[0], 1.0);
  EXPECT_DOUBLE_EQ(b.pool_busy[1], 1.0);
}

TEST(TimeSeriesSampler, CloseAddsTheRequestsCutOffAtTheEndToTheLastWindow) {
  TimeSeriesSampler s = TwoPools();
  s.OnComplete(1, -1, true, 10);
  s.Sample(10 * kSecond, Gauges(0, 0, 0, 0));
  s.OnReject();  // unfinished at the end, which is the last sample's instant
  s.Close(10 * kSecond, Gauges(0, 0, 0, 0));
  ASSERT_EQ(s.series().points.size(), 1u);
  EXPECT_EQ(s.series().points[0].rejected, 1);
  EXPECT_DOUBLE_EQ(s.series().points[0].slo_attainment, 0.5);
  // A run that ends between samples gets a last, shorter window.
  s.OnReject();
  s.Close(14 * kSecond, Gauges(0, 0, 0, 0));
  ASSERT_EQ(s.series().points.size(), 2u);
  EXPECT_EQ(s.series().points[1].window_s, 4);
  EXPECT_EQ(s.series().points[1].rejected, 1);
}

TEST(TimeSeriesSampler, IntervalIsWidenedToAtMostTheMaximumNumberOfPoints) {
  EXPECT_EQ(EffectiveSampleInterval(10 * kSecond, 15 * kMinute), 10 * kSecond);
  const Nanos day = 24 * kHour;
  const Nanos wide = EffectiveSampleInterval(10 * kSecond, day);
  EXPECT_LE(day / wide, static_cast<Nanos>(kMaxSeriesPoints));
  EXPECT_EQ(wide % kSecond, 0);  // whole seconds
  EXPECT_EQ(wide, 44 * kSecond);
  EXPECT_LE(10 * kSecond / EffectiveSampleInterval(kMillisecond, 10 * kSecond, 100), 100);
}

TEST(TimeSeries, MarkersAreSortedAndCountedIntoTheirWindows) {
  TimeSeries s;
  for (double t : {10.0, 20.0, 30.0}) {
    SeriesPoint p;
    p.t_s = t;
    p.window_s = 10;
    s.points.push_back(p);
  }
  s.markers = {{Marker::Kind::kReadmission, 25, "back"},
               {Marker::Kind::kFault, 10, "crash"},  // at a window's end: that window
               {Marker::Kind::kEjection, 12, "out"},
               {Marker::Kind::kStoreNodeLoss, 3, "store"},
               {Marker::Kind::kFault, 31, "after the last sample"}};
  s.FinishMarkers();
  EXPECT_EQ(s.markers.front().t_s, 3);
  EXPECT_EQ(s.markers.back().t_s, 31);
  EXPECT_EQ(s.points[0].faults, 1);
  EXPECT_EQ(s.points[0].store_node_losses, 1);
  EXPECT_EQ(s.points[1].ejections, 1);
  EXPECT_EQ(s.points[2].readmissions, 1);
  EXPECT_EQ(s.points[2].faults, 0);
}

TEST(TimeSeriesCsv, HeaderRowsEmptyFieldsAndQuotedNames) {
  TimeSeriesSampler s(10 * kSecond, {"pre,fill", "decode"}, {1, 1}, 1, kSecond, kSecond);
  s.OnComplete(0.25, -1, true, 100);
  s.Sample(10 * kSecond, Gauges(kSecond, 0, 0, 0));
  s.Sample(20 * kSecond, Gauges(kSecond, 0, 0, 0));
  s.series().variant = "kv-aware";
  std::ostringstream out;
  WriteSeriesCsv(out, std::span(&s.series(), 1));
  std::istringstream in(out.str());
  std::string header, row1, row2, extra;
  std::getline(in, header);
  std::getline(in, row1);
  std::getline(in, row2);
  EXPECT_FALSE(std::getline(in, extra));
  EXPECT_EQ(header.rfind("variant,t_s,window_s,arrived,completed,rejected,within_slo,ttft_p50_s,ttft_p99_s,", 0), 0u)
      << header;
  EXPECT_NE(header.find(",\"pool_busy:pre,fill\",pool_busy:decode,\"pool_waiting:pre,fill\""), std::string::npos)
      << header;
  EXPECT_EQ(row1.rfind("kv-aware,10,10,0,1,0,1,0.25,0.25,,,1,10,", 0), 0u) << row1;
  EXPECT_EQ(row2.rfind("kv-aware,20,10,0,0,0,0,,,,,,0,,", 0), 0u) << row2;
  // busy of "pre,fill" in the first window: 1 s of 10.
  EXPECT_NE(row1.find(",0.1,0,3,0,1,7"), std::string::npos) << row1;
}

// The small scenario sampled: its windows add up to the report, and sampling changes nothing
// the run reports (the sampler reads state between events, it schedules none).
TEST(TimeSeriesRun, WindowsAddUpToTheReportAndSamplingChangesNothing) {
  auto scenario = LoadScenario(std::string(MYRIAD_SOURCE_DIR) + "/scenarios/small.yaml");
  ASSERT_TRUE(scenario.ok()) << scenario.status();
  auto plain = RunScenario(*scenario);
  TimeSeries series;
  auto sampled = RunScenario(*scenario, nullptr, nullptr, &series, 10 * kSecond);
  ASSERT_TRUE(plain.ok() && sampled.ok());
  EXPECT_EQ(plain->dump(), sampled->dump());
  ASSERT_FALSE(series.points.empty());
  EXPECT_LE(series.points.size(), kMaxSeriesPoints);
  EXPECT_EQ(series.variant, "least-loaded");
  EXPECT_EQ(series.pools, (std::vector<std::string>{"prefill", "decode"}));
  int64_t arrived = 0, completed = 0, rejected = 0, good = 0;
  double last = 0;
  for (const SeriesPoint& p : series.points) {
    EXPECT_GT(p.t_s, last);
    last = p.t_s;
    arrived += p.arrived;
    completed += p.completed;
    rejected += p.rejected;
    good += p.within_slo;
    for (double b : p.pool_busy) EXPECT_TRUE(b >= 0 && b <= 1) << b;
  }
  const auto& rq = (*sampled)["requests"];
  EXPECT_EQ(arrived, rq["arrived"].get<int64_t>());
  EXPECT_EQ(completed, rq["completed"].get<int64_t>());
  EXPECT_EQ(rejected, rq["rejected"].get<int64_t>());
  EXPECT_EQ(good, rq["within_slo"].get<int64_t>());
  EXPECT_DOUBLE_EQ(last, (*sampled)["scenario"]["end_s"].get<double>());
  EXPECT_EQ(series.points.front().t_s, 10);
  // Same seed, same series.
  TimeSeries again;
  ASSERT_TRUE(RunScenario(*scenario, nullptr, nullptr, &again, 10 * kSecond).ok());
  std::ostringstream a, b;
  WriteSeriesCsv(a, std::span(&series, 1));
  WriteSeriesCsv(b, std::span(&again, 1));
  EXPECT_EQ(a.str(), b.str());
}

// A store node dies under load: the loss and the master's verdict are markers, and the store's
// traffic (offload, load-back, repair) shows in the series.
TEST(TimeSeriesRun, StoreNodeLossIsMarkedAndItsTrafficSampled) {
  auto scenario = LoadScenario(std::string(MYRIAD_SOURCE_DIR) + "/scenarios/store_node_loss.yaml");
  ASSERT_TRUE(scenario.ok()) << scenario.status();
  TimeSeries series;
  auto report = RunScenario(*scenario, nullptr, nullptr, &series, 30 * kSecond);
  ASSERT_TRUE(report.ok()) << report.status();
  const auto& losses = (*report)["store"]["node_losses"];
  ASSERT_FALSE(losses.empty());
  int64_t loss_markers = 0, dead_markers = 0, loss_counts = 0;
  for (const Marker& m : series.markers) {
    loss_markers += m.kind == Marker::Kind::kStoreNodeLoss;
    dead_markers += m.kind == Marker::Kind::kStoreNodeDeclaredDead;
  }
  double offload = 0, load = 0, repair = 0;
  for (const SeriesPoint& p : series.points) {
    loss_counts += p.store_node_losses;
    offload += p.store_offload_gbps * p.window_s;
    load += p.store_load_gbps * p.window_s;
    repair += p.store_repair_gbps * p.window_s;
  }
  EXPECT_EQ(loss_markers, static_cast<int64_t>(losses.size()));
  EXPECT_EQ(loss_counts, loss_markers);
  EXPECT_GT(dead_markers, 0);
  EXPECT_GT(offload, 0);
  EXPECT_NEAR(load, (*report)["store"]["load_back"]["gigabytes"].get<double>(), 1e-6);
  EXPECT_NEAR(repair, (*report)["store"]["repair"]["gigabytes"].get<double>(), 1e-6);
}

}  // namespace
}  // namespace myriad::sim
