// The controller's driver of the elasticity policies (control/elastic_driver.h) over a small
// fluid world of engines in virtual time: a load step makes policy::Autoscaler add engines within
// its lead time and drain them after the dwell once the step ends; a prefill pool pressed while
// the decode pool idles gets a decode engine switched over after the confirmation time, once.
#include "control/elastic_driver.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

namespace myriad::control {
namespace {

using Kind = ElasticAction::Kind;
using Phase = ElasticEngine::Phase;

constexpr Nanos kRound = 250 * kMillisecond;

// Requests/s offered to a pool are spread evenly over its serving engines; each holds a request
// for `service_s`, so its in flight is its share times that (Little's law).
struct World {
  std::vector<ElasticEngine> engines;
  double service_s = 0.4;
  int next = 0;

  void Add(const std::string& role, Phase phase) {
    ElasticEngine e;
    e.name = fmt::format("e{}", next++);
    e.role = role;
    e.phase = phase;
    e.reachable = true;
    engines.push_back(e);
  }
  int Count(const std::string& role, Phase phase) const {
    return static_cast<int>(std::count_if(engines.begin(), engines.end(), [&](const ElasticEngine& e) {
      return e.role == role && e.phase == phase;
    }));
  }
  // Offers `rate` requests/s to the pool for one round.
  void Offer(const std::string& role, double rate) {
    const int n = Count(role, Phase::kServing);
    for (ElasticEngine& e : engines) {
      if (e.role != role) continue;
      const double share = e.phase == Phase::kServing && n > 0 ? rate / n : 0;
      e.running = share * service_s;
      e.finished += share * NanosToSeconds(kRound);
    }
  }
  // What the controller does between rounds: added engines start, then serve; retiring ones,
  // idle at once here, are stopped; switched ones change role and come back.
  void Settle() {
    std::erase_if(engines, [](const ElasticEngine& e) { return e.phase == Phase::kRetiring; });
    for (ElasticEngine& e : engines) {
      if (e.phase == Phase::kStarting || e.phase == Phase::kChanging) e.phase = Phase::kServing;
    }
  }
  void Apply(const ElasticAction& a) {
    switch (a.kind) {
      case Kind::kScaleOut:
        for (int i = 0; i < a.count; ++i) Add(a.role, Phase::kStarting);
        break;
      case Kind::kScaleIn:
      case Kind::kSwitch:
      case Kind::kKeep:
        for (ElasticEngine& e : engines) {
          if (e.name != a.engine) continue;
          if (a.kind == Kind::kScaleIn) e.phase = Phase::kRetiring;
          if (a.kind == Kind::kKeep) e.phase = Phase::kServing;
          if (a.kind == Kind::kSwitch) {
            e.role = a.role;
            e.phase = Phase::kChanging;
          }
        }
        break;
    }
  }
};

struct Timed {
  Nanos at;
  ElasticAction action;
};

ElasticSignalsConfig Signals(Nanos smoothing = kSecond) {
  return {.engine_concurrency = 4, .smoothing = smoothing};
}

AutoscaleConfig Scaled() {
  AutoscaleConfig c;
  c.pools["colocated"] = {.min = 1, .max = 4};
  c.scaler.lead_time = 2 * kSecond;
  c.scaler.scale_in_dwell = 3 * kSecond;
  c.scaler.smoothing = kSecond;
  c.scaler.trend_window = 2 * kSecond;
  return c;
}

TEST(ElasticDriver, LoadStepAddsEnginesWithinTheLeadTimeAndDrainsThemAfterTheDwell) {
  ElasticDriver driver(Signals(), Scaled(), {});
  ASSERT_TRUE(driver.enabled());
  World w;
  w.Add("colocated", Phase::kServing);
  const Nanos step_at = 20 * kSecond, step_end = 40 * kSecond;
  std::vector<Timed> log;
  int peak = 1, low_in_step = 99;
  for (Nanos now = 0; now <= 80 * kSecond; now += kRound) {
    // 5 requests/s (in flight 2 of 4: utilisation 0.5), x3 during the step.
    w.Offer("colocated", now >= step_at && now < step_end ? 15 : 5);
    const auto actions = driver.Round(now, w.engines);
    w.Settle();
    for (const ElasticAction& a : actions) {
      log.push_back({now, a});
      w.Apply(a);
    }
    const int n = static_cast<int>(w.engines.size()) - w.Count("colocated", Phase::kRetiring);
    peak = std::max(peak, n);
    if (now >= step_at + 4 * kSecond && now < step_end) low_in_step = std::min(low_in_step, n);
  }
  ASSERT_FALSE(log.empty());
  // Nothing at the base rate; the first action is a scale-out within the lead time of the step.
  EXPECT_EQ(log.front().action.kind, Kind::kScaleOut) << log.front().action.reason;
  EXPECT_GE(log.front().at, step_at);
  EXPECT_LE(log.front().at, step_at + 2 * kSecond) << log.front().action.reason;
  EXPECT_EQ(log.front().action.role, "colocated");
  EXPECT_GT(log.front().action.ready_by, log.front().at);
  EXPECT_LE(peak, 4) << "max";
  // The trend may overshoot and be trimmed, but the step is served by 15 requests/s at 4 in
  // flight per engine and 0.4 s each: at least 3 engines.
  EXPECT_GE(low_in_step, 3);
  // After the step: one engine per dwell, the first a dwell after the step, down to min.
  Nanos last_in = step_end;
  int after = 0;
  for (const Timed& t : log) {
    if (t.action.kind != Kind::kScaleIn || t.at < step_end) continue;
    EXPECT_GE(t.at, last_in + 3 * kSecond) << t.action.reason;
    last_in = t.at;
    ++after;
  }
  EXPECT_EQ(after, low_in_step - 1);
  EXPECT_EQ(w.engines.size(), 1u);
}

TEST(ElasticDriver, EnginesAskedForCountAsStartingUntilTheyArrive) {
  ElasticDriver driver(Signals(), Scaled(), {});
  World w;
  w.Add("colocated", Phase::kServing);
  int asked = 0;
  for (Nanos now = 0; now <= 4 * kSecond; now += kRound) {
    // Saturated, and the engines asked for (an exec hook's) never come within the lead time.
    w.Offer("colocated", 40);
    for (const ElasticAction& a : driver.Round(now, w.engines)) asked += a.kind == Kind::kScaleOut ? a.count : 0;
  }
  EXPECT_EQ(asked, 1) << "one more engine asked for, not one per round";
}

TEST(ElasticDriver, PressedPrefillPoolTakesOneDecodeEngineAfterTheConfirmation) {
  PdRatioControlConfig pd;
  pd.enabled = true;
  pd.options.confirm = 2 * kSecond;
  pd.options.dwell = 10 * kSecond;
  ElasticDriver driver(Signals(500 * kMillisecond), {}, pd);
  World w;
  w.Add("prefill", Phase::kServing);
  w.Add("decode", Phase::kServing);
  w.Add("decode", Phase::kServing);
  const Nanos load_at = 5 * kSecond;
  std::vector<Timed> log;
  for (Nanos now = 0; now <= 20 * kSecond; now += kRound) {
    // Long prompts: 8 in flight on one prefill engine, the decode engines nearly idle.
    w.Offer("prefill", now >= load_at ? 20 : 1);
    w.Offer("decode", 1);
    const auto actions = driver.Round(now, w.engines);
    w.Settle();
    for (const ElasticAction& x : actions) {
      log.push_back({now, x});
      w.Apply(x);
    }
  }
  ASSERT_EQ(log.size(), 1u) << "one switch, then the dwell";
  const Timed& sw = log.front();
  EXPECT_EQ(sw.action.kind, Kind::kSwitch);
  EXPECT_EQ(sw.action.role, "prefill");
  EXPECT_EQ(sw.action.engine, "e2") << "the newest of the idle decode engines";
  EXPECT_GE(sw.at, load_at + 2 * kSecond) << "confirmed first";
  EXPECT_LE(sw.at, load_at + 4 * kSecond);
  EXPECT_NE(sw.action.reason.find("prefill pressure"), std::string::npos) << sw.action.reason;
  EXPECT_EQ(w.Count("prefill", Phase::kServing), 2);
  EXPECT_EQ(w.Count("decode", Phase::kServing), 1);
}

}  // namespace
}  // namespace myriad::control
