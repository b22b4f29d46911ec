// Trace parsing and replay (Mooncake JSONL, Azure CSV) and the synthetic generator: arrival
// statistics, lengths, and the prefix structure that the cache and router depend on.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "sim/synthetic_workload.h"
#include "sim/trace_workload.h"

namespace myriad::sim {
namespace {

std::vector<Request> Drain(Workload& w, size_t limit = SIZE_MAX) {
  std::vector<Request> out;
  while (out.size() < limit) {
    auto r = w.Next();
    if (!r) break;
    out.push_back(std::move(*r));
  }
  return out;
}

absl::StatusOr<std::vector<TraceRecord>> Mooncake(const std::string& text) {
  std::istringstream in(text);
  return ParseMooncakeTrace(in, "mc.jsonl");
}

absl::StatusOr<std::vector<TraceRecord>> Azure(const std::string& text) {
  std::istringstream in(text);
  return ParseAzureTrace(in, "az.csv");
}

std::vector<Request> Replay(std::vector<TraceRecord> records, TraceReplayOptions options) {
  auto w = MakeTraceWorkload(std::move(records), options);
  EXPECT_TRUE(w.ok()) << w.status();
  return w.ok() ? Drain(**w) : std::vector<Request>{};
}

size_t CommonPrefix(const BlockList& a, const BlockList& b) {
  size_t n = 0;
  while (n < a.size() && n < b.size() && a[n] == b[n]) ++n;
  return n;
}

TEST(TraceParse, MooncakeLines) {
  auto records = Mooncake(
      "{\"timestamp\": 0, \"input_length\": 1100, \"output_length\": 5, \"hash_ids\": [0, 1, 2]}\n"
      "\n"
      "{\"timestamp\": 40.5, \"input_length\": 600, \"output_length\": 1, \"hash_ids\": [0, 9]}\n");
  ASSERT_TRUE(records.ok()) << records.status();
  ASSERT_EQ(records->size(), 2u);
  EXPECT_EQ((*records)[0].offset, 0);
  EXPECT_EQ((*records)[0].input_tokens, 1100);
  EXPECT_EQ((*records)[0].output_tokens, 5);
  EXPECT_EQ((*records)[0].content_ids, (std::vector<uint64_t>{0, 1, 2}));
  EXPECT_EQ((*records)[1].offset, 40'500'000);
  EXPECT_EQ((*records)[1].content_ids, (std::vector<uint64_t>{0, 9}));
}

TEST(TraceParse, AzureCsvWithCrlf) {
  auto records = Azure(
      "TIMESTAMP,ContextTokens,GeneratedTokens\r\n"
      "2023-11-16 18:17:03.9799600,4808,10\r\n"
      "2023-11-16 18:17:04.0319600,3180,8\r\n"
      "2023-11-17 00:00:00,100,1");
  ASSERT_TRUE(records.ok()) << records.status();
  ASSERT_EQ(records->size(), 3u);
  EXPECT_EQ((*records)[0].offset, 0);
  EXPECT_EQ((*records)[1].offset, 52 * kMillisecond);
  EXPECT_EQ((*records)[2].offset, (5 * kHour + 42 * kMinute + 56 * kSecond) + 20'040'000);
  EXPECT_EQ((*records)[0].input_tokens, 4808);
  EXPECT_EQ((*records)[1].output_tokens, 8);
  EXPECT_TRUE((*records)[0].content_ids.empty());
}

TEST(TraceParse, MooncakeErrorsNameLineAndField) {
  const std::string good =
      "{\"timestamp\": 5, \"input_length\": 10, \"output_length\": 2, \"hash_ids\": [1]}\n";
  struct Case {
    std::string second_line;
    std::string field;
  };
  const Case cases[] = {
      {"{\"timestamp\": 6, \"input_length\": 10,", "json"},
      {"[1, 2]", "json"},
      {"{\"timestamp\": 6, \"output_length\": 2, \"hash_ids\": [1]}", "input_length"},
      {"{\"timestamp\": 6, \"input_length\": -3, \"output_length\": 2, \"hash_ids\": [1]}",
       "input_length"},
      {"{\"timestamp\": 6, \"input_length\": 10, \"output_length\": \"2\", \"hash_ids\": [1]}",
       "output_length"},
      {"{\"timestamp\": 6, \"input_length\": 10, \"output_length\": 0, \"hash_ids\": [1]}",
       "output_length"},
      {"{\"timestamp\": 4, \"input_length\": 10, \"output_length\": 2, \"hash_ids\": [1]}",
       "timestamp"},
      {"{\"timestamp\": \"6\", \"input_length\": 10, \"output_length\": 2, \"hash_ids\": [1]}",
       "timestamp"},
      {"{\"timestamp\": 6, \"input_length\": 10, \"output_length\": 2}", "hash_ids"},
      {"{\"timestamp\": 6, \"input_length\": 10, \"output_length\": 2, \"hash_ids\": [1, -2]}",
       "hash_ids"},
  };
  for (const Case& c : cases) {
    auto records = Mooncake(good + c.second_line + "\n" + good);
    ASSERT_FALSE(records.ok()) << c.second_line;
    EXPECT_EQ(records.status().code(), absl::StatusCode::kInvalidArgument);
    const std::string msg(records.status().message());
    EXPECT_NE(msg.find("mc.jsonl:2: " + c.field), std::string::npos) << msg;
  }
}

TEST(TraceParse, AzureErrorsNameLineAndColumn) {
  const std::string header = "TIMESTAMP,ContextTokens,GeneratedTokens\n";
  const std::string good = "2023-11-16 18:17:03.97,10,2\n";
  struct Case {
    std::string text;
    std::string expected;
  };
  const Case cases[] = {
      {header + good + "2023-11-16 18:17:0x,10,2\n", "az.csv:3: column 1 (TIMESTAMP)"},
      {header + good + "2023-13-16 18:17:04,10,2\n", "az.csv:3: column 1 (TIMESTAMP)"},
      {header + good + "2023-11-16 18:17:02,10,2\n", "az.csv:3: column 1 (TIMESTAMP)"},
      {header + good + "2023-11-16 18:17:04,abc,2\n", "az.csv:3: column 2 (ContextTokens)"},
      {header + good + "2023-11-16 18:17:04,10,0\n", "az.csv:3: column 3 (GeneratedTokens)"},
      {header + good + "2023-11-16 18:17:04,10\n", "az.csv:3: row"},
      {"TIMESTAMP,Context,GeneratedTokens\n" + good, "az.csv:1: header: no column named Context"},
  };
  for (const Case& c : cases) {
    auto records = Azure(c.text);
    ASSERT_FALSE(records.ok()) << c.text;
    const std::string msg(records.status().message());
    EXPECT_NE(msg.find(c.expected), std::string::npos) << msg;
  }
}

TEST(TraceParse, LoadTraceFileNamesMissingPathAndUnknownFormat) {
  auto missing = LoadTraceFile("/nonexistent/trace.jsonl", "mooncake");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("/nonexistent/trace.jsonl"), std::string::npos);
  auto format = LoadTraceFile("/nonexistent/trace.jsonl", "sharegpt");
  ASSERT_FALSE(format.ok());
  EXPECT_NE(format.status().message().find("sharegpt"), std::string::npos);
}

TraceRecord Rec(Nanos offset, int32_t input, std::vector<uint64_t> ids) {
  return TraceRecord{offset, input, 1, std::move(ids)};
}

TEST(TraceReplay, SharedHashIdsGiveEqualKeys) {
  TraceReplayOptions options;
  options.block_tokens = 256;
  auto reqs = Replay({Rec(0, 1536, {1, 2, 3}), Rec(kSecond, 1536, {1, 2, 4}),
                      Rec(2 * kSecond, 1000, {1, 2})},
                     options);
  ASSERT_EQ(reqs.size(), 3u);
  EXPECT_EQ(reqs[0].id, 0u);
  EXPECT_EQ(reqs[2].id, 2u);
  ASSERT_EQ(reqs[0].blocks.size(), 6u);
  ASSERT_EQ(reqs[1].blocks.size(), 6u);
  EXPECT_EQ(CommonPrefix(reqs[0].blocks, reqs[1].blocks), 4u);
  ASSERT_EQ(reqs[2].blocks.size(), 3u);  // 1000 / 256: only full blocks are keyed
  EXPECT_EQ(CommonPrefix(reqs[0].blocks, reqs[2].blocks), 3u);
}

TEST(TraceReplay, KeysNeverExceedTheContentIds) {
  auto reqs = Replay({Rec(0, 2000, {7})}, TraceReplayOptions{.block_tokens = 128});
  ASSERT_EQ(reqs.size(), 1u);
  EXPECT_EQ(reqs[0].blocks.size(), 4u);
}

TEST(TraceReplay, AzureRecordsShareNothing) {
  auto reqs = Replay({Rec(0, 2048, {}), Rec(0, 2048, {})}, TraceReplayOptions{.block_tokens = 64});
  ASSERT_EQ(reqs.size(), 2u);
  ASSERT_EQ(reqs[0].blocks.size(), 32u);
  std::set<BlockKey> keys(reqs[0].blocks.begin(), reqs[0].blocks.end());
  for (BlockKey k : reqs[1].blocks) EXPECT_FALSE(keys.count(k));
}

TEST(TraceReplay, ReplicasHaveDisjointKeysAndInterleave) {
  std::vector<TraceRecord> records;
  for (int i = 0; i < 50; ++i) records.push_back(Rec(i * kSecond, 1024, {1, 2}));
  auto reqs = Replay(records, TraceReplayOptions{.replicas = 3, .seed = 7});
  ASSERT_EQ(reqs.size(), 150u);
  // Within a copy every request shares the prefix; across copies nothing is shared.
  std::map<BlockKey, int> first_keys;
  std::set<BlockKey> all;
  for (size_t i = 0; i < reqs.size(); ++i) {
    EXPECT_EQ(reqs[i].id, i);
    if (i > 0) {
      EXPECT_GE(reqs[i].arrival, reqs[i - 1].arrival);
    }
    ++first_keys[reqs[i].blocks[0]];
    all.insert(reqs[i].blocks.begin(), reqs[i].blocks.end());
  }
  EXPECT_EQ(first_keys.size(), 3u);
  EXPECT_EQ(all.size(), 6u);
  for (auto [key, count] : first_keys) EXPECT_EQ(count, 50);
  // The copies are jittered, not in lockstep: three requests per second, not all at once.
  EXPECT_FALSE(reqs[0].arrival == reqs[1].arrival && reqs[1].arrival == reqs[2].arrival);
  EXPECT_LT(reqs[2].arrival, kSecond);
}

TEST(TraceReplay, RateScaleHalvesTheSpan) {
  std::vector<TraceRecord> records = {Rec(0, 512, {1}), Rec(3 * kSecond, 512, {2}),
                                      Rec(10 * kSecond, 512, {3})};
  auto reqs = Replay(records, TraceReplayOptions{.rate_scale = 2.0});
  ASSERT_EQ(reqs.size(), 3u);
  EXPECT_EQ(reqs[1].arrival, 1500 * kMillisecond);
  EXPECT_EQ(reqs[2].arrival, 5 * kSecond);
}

TEST(TraceReplay, LoopRepeatsWithFreshPrefixesUntilDuration) {
  std::vector<TraceRecord> records = {Rec(0, 512, {1}), Rec(kSecond, 512, {1})};
  auto reqs = Replay(records, TraceReplayOptions{.loop = true, .duration = 9 * kSecond});
  // One pass lasts its span plus the mean gap (2 s): arrivals at 0, 1, ..., 8 s.
  ASSERT_EQ(reqs.size(), 9u);
  for (size_t i = 0; i < reqs.size(); ++i) EXPECT_EQ(reqs[i].arrival, Nanos(i) * kSecond);
  EXPECT_EQ(reqs[0].blocks, reqs[1].blocks);
  EXPECT_NE(reqs[0].blocks, reqs[2].blocks);
  EXPECT_EQ(reqs[2].blocks, reqs[3].blocks);
}

TEST(TraceReplay, RejectsBadOptions) {
  auto expect_error = [](TraceReplayOptions o, const std::string& field) {
    auto w = MakeTraceWorkload({Rec(0, 512, {1})}, o);
    ASSERT_FALSE(w.ok()) << field;
    EXPECT_NE(w.status().message().find(field), std::string::npos) << w.status();
  };
  expect_error({.block_tokens = 300}, "block_tokens");
  expect_error({.rate_scale = 0}, "rate_scale");
  expect_error({.replicas = 0}, "replicas");
  expect_error({.loop = true}, "duration");
}

TEST(TraceReplay, PublicTracesWhenPresent) {
  const std::string dir = std::string(MYRIAD_SOURCE_DIR) + "/../shared/traces/";
  const std::string mooncake = dir + "mooncake_synthetic_trace.jsonl";
  const std::string azure = dir + "AzureLLMInferenceTrace_code_2023.csv";
  if (!std::filesystem::exists(mooncake) || !std::filesystem::exists(azure)) {
    GTEST_SKIP() << "public traces not found under " << dir;
  }
  auto mc = LoadTraceFile(mooncake, "mooncake");
  ASSERT_TRUE(mc.ok()) << mc.status();
  EXPECT_EQ(mc->size(), 3993u);
  auto az = LoadTraceFile(azure, "azure");
  ASSERT_TRUE(az.ok()) << az.status();
  EXPECT_EQ(az->size(), 8819u);
  EXPECT_NEAR(NanosToSeconds(mc->back().offset), 1022, 1);

  auto reqs = Replay(std::move(*mc), TraceReplayOptions{.block_tokens = 256});
  ASSERT_EQ(reqs.size(), 3993u);
  // PUBLIC_DATA.md: 64% of blocks are reusable with an unlimited cache.
  std::set<BlockKey> seen;
  size_t total = 0, reused = 0;
  for (const Request& r : reqs) {
    for (BlockKey k : r.blocks) reused += !seen.insert(k).second;
    total += r.blocks.size();
  }
  EXPECT_NEAR(static_cast<double>(reused) / total, 0.64, 0.05);
}

SyntheticOptions Plain() {
  SyntheticOptions o;
  o.rate = 100;
  o.system_prompt_fraction = 0;
  o.session_fraction = 0;
  o.seed = 42;
  return o;
}

std::vector<Request> Generate(SyntheticOptions o, size_t n = SIZE_MAX) {
  auto w = MakeSyntheticWorkload(std::move(o));
  EXPECT_TRUE(w.ok()) << w.status();
  return w.ok() ? Drain(**w, n) : std::vector<Request>{};
}

TEST(SyntheticWorkload, SameSeedSameRequests) {
  SyntheticOptions o;  // defaults: system prompts and sessions on
  o.seed = 9;
  o.tenants = 3;
  o.diurnal_amplitude = 0.5;
  o.diurnal_period = 60 * kSecond;
  auto a = Generate(o, 5000);
  auto b = Generate(o, 5000);
  ASSERT_EQ(a.size(), 5000u);
  ASSERT_EQ(b.size(), a.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].arrival, b[i].arrival);
    EXPECT_EQ(a[i].input_tokens, b[i].input_tokens);
    EXPECT_EQ(a[i].output_tokens, b[i].output_tokens);
    EXPECT_EQ(a[i].tenant, b[i].tenant);
    EXPECT_EQ(a[i].blocks, b[i].blocks);
  }
  o.seed = 10;
  auto c = Generate(o, 5000);
  EXPECT_NE(a[10].arrival, c[10].arrival);
}

TEST(SyntheticWorkload, ArrivalsNonDecreasingAndIdsSequential) {
  SyntheticOptions o;
  o.arrival = "gamma";
  o.burst_cv = 3;
  o.diurnal_amplitude = 1.0;
  o.diurnal_period = 100 * kSecond;
  o.think_time_mean = 2 * kSecond;
  o.duration = 300 * kSecond;
  auto reqs = Generate(o);
  ASSERT_GT(reqs.size(), 2000u);
  for (size_t i = 0; i < reqs.size(); ++i) {
    EXPECT_EQ(reqs[i].id, i);
    EXPECT_LT(reqs[i].arrival, o.duration);
    EXPECT_GE(reqs[i].output_tokens, 1);
    if (i > 0) {
      ASSERT_GE(reqs[i].arrival, reqs[i - 1].arrival) << i;
    }
  }
}

TEST(SyntheticWorkload, MeanRateWithinTolerance) {
  for (const char* arrival : {"poisson", "gamma"}) {
    SyntheticOptions o = Plain();
    o.arrival = arrival;
    o.burst_cv = 2.5;
    auto reqs = Generate(o, 20'000);
    ASSERT_EQ(reqs.size(), 20'000u);
    const double span = NanosToSeconds(reqs.back().arrival - reqs.front().arrival);
    EXPECT_NEAR(19'999 / span, 100, 6) << arrival;
    // The gaps' coefficient of variation is what makes gamma bursty.
    double sum = 0, sum2 = 0;
    for (size_t i = 1; i < reqs.size(); ++i) {
      const double gap = NanosToSeconds(reqs[i].arrival - reqs[i - 1].arrival);
      sum += gap;
      sum2 += gap * gap;
    }
    const double mean = sum / 19'999;
    const double cv = std::sqrt(sum2 / 19'999 - mean * mean) / mean;
    EXPECT_NEAR(cv, std::string(arrival) == "gamma" ? 2.5 : 1.0, 0.25) << arrival;
  }
}

TEST(SyntheticWorkload, LengthsWithinBoundsAndMeansMatch) {
  SyntheticOptions o = Plain();
  auto reqs = Generate(o, 20'000);
  double in = 0, out = 0;
  for (const Request& r : reqs) {
    ASSERT_GE(r.input_tokens, o.input.min);
    ASSERT_LE(r.input_tokens, o.input.max);
    ASSERT_GE(r.output_tokens, o.output.min);
    ASSERT_LE(r.output_tokens, o.output.max);
    EXPECT_EQ(r.blocks.size(), static_cast<size_t>(r.input_tokens / o.block_tokens));
    in += r.input_tokens;
    out += r.output_tokens;
  }
  EXPECT_NEAR(in / reqs.size(), o.input.mean, 0.1 * o.input.mean);
  EXPECT_NEAR(out / reqs.size(), o.output.mean, 0.1 * o.output.mean);

  o.input = {.mean = 1000, .cv = 2.0, .min = 300, .max = 1200};
  for (const Request& r : Generate(o, 2000)) {
    ASSERT_GE(r.input_tokens, 300);
    ASSERT_LE(r.input_tokens, 1200);
  }
}

TEST(SyntheticWorkload, FixedLengthPromptsStayFixedWithSystemPrompts) {
  // input.min = input.max leaves no room for input.min tokens of user message after a system
  // prompt: it used to give a 1-token system prompt plus 32 (33 tokens, past input.max).
  SyntheticOptions o = Plain();
  o.system_prompt_fraction = 0.5;
  o.block_tokens = 16;
  o.input = {.mean = 32, .cv = 0, .min = 32, .max = 32};
  std::set<BlockKey> first_blocks;
  size_t shared = 0;  // prompts whose first block another has: a system prompt's
  for (const Request& r : Generate(o, 1000)) {
    ASSERT_EQ(r.input_tokens, 32);
    ASSERT_EQ(r.blocks.size(), 2u);
    shared += !first_blocks.insert(r.blocks[0]).second;
  }
  EXPECT_GT(shared, 100u);
  // A 1-token prompt has no room for a system prompt at all.
  o.input = {.mean = 1, .cv = 0, .min = 1, .max = 1};
  for (const Request& r : Generate(o, 100)) ASSERT_EQ(r.input_tokens, 1);
}

TEST(SyntheticWorkload, SessionTurnsExtendThePreviousTurn) {
  SyntheticOptions o = Plain();
  o.session_fraction = 1.0;
  o.turns_mean = 4;
  o.think_time_mean = 5 * kSecond;
  o.input.min = 512;  // a session's first block is its own: group turns by it
  o.duration = 200 * kSecond;
  auto reqs = Generate(o);
  std::map<BlockKey, std::vector<const Request*>> sessions;
  for (const Request& r : reqs) sessions[r.blocks.at(0)].push_back(&r);
  size_t follow_ups = 0;
  for (const auto& [key, turns] : sessions) {
    for (size_t k = 1; k < turns.size(); ++k) {
      const Request& prev = *turns[k - 1];
      const Request& cur = *turns[k];
      ASSERT_GT(cur.input_tokens, prev.input_tokens + prev.output_tokens);
      // Every block of the previous prompt is shared; the block that straddles the previous
      // prompt's end and its output was never keyed before, so it starts the new part.
      EXPECT_EQ(CommonPrefix(prev.blocks, cur.blocks), prev.blocks.size());
      ASSERT_GE(cur.blocks.size(), (prev.input_tokens + prev.output_tokens) / o.block_tokens);
      ++follow_ups;
    }
  }
  // Turns are geometric with mean 4: about 3 follow-ups per session (fewer near the end).
  const double per_session = static_cast<double>(follow_ups) / sessions.size();
  EXPECT_GT(per_session, 2.0);
  EXPECT_LT(per_session, 3.5);
  EXPECT_GT(reqs.size(), 20'000u * 2);  // follow-ups come on top of `rate`
}

TEST(SyntheticWorkload, SessionTurnsWithExactLengths) {
  SyntheticOptions o = Plain();
  o.session_fraction = 1.0;
  o.turns_mean = 1e9;  // every session continues
  o.input = {.mean = 1000, .cv = 0, .min = 1000, .max = 100000};
  o.output = {.mean = 100, .cv = 0, .min = 100, .max = 100};
  o.turn_tokens = {.mean = 50, .cv = 0, .min = 50, .max = 50};
  o.rate = 1e-6;  // one session in view
  auto reqs = Generate(o, 4);
  ASSERT_EQ(reqs.size(), 4u);
  for (size_t k = 1; k < reqs.size(); ++k) {
    EXPECT_EQ(reqs[k].input_tokens, reqs[k - 1].input_tokens + 150);
    EXPECT_EQ(reqs[k].blocks.size(), static_cast<size_t>(reqs[k].input_tokens / 256));
    EXPECT_EQ(CommonPrefix(reqs[0].blocks, reqs[k].blocks), 3u);  // 1000 / 256
    EXPECT_EQ(CommonPrefix(reqs[k - 1].blocks, reqs[k].blocks), reqs[k - 1].blocks.size());
  }
}

TEST(SyntheticWorkload, SystemPromptsAreSharedAndStraddlingBlocksAreNot) {
  SyntheticOptions o = Plain();
  o.system_prompt_fraction = 1.0;
  o.system_prompts = 1;
  o.system_prompt_tokens = 1000;
  auto reqs = Generate(o, 500);
  // Every prompt starts with the one system prompt; the block where it meets the user message
  // is unique, so all pairs share the same number of blocks: floor(system length / 256).
  std::set<size_t> common;
  for (size_t i = 1; i < reqs.size(); ++i) {
    if (reqs[i].blocks.size() < 7 || reqs[i - 1].blocks.size() < 7) continue;
    common.insert(CommonPrefix(reqs[i].blocks, reqs[i - 1].blocks));
  }
  ASSERT_EQ(common.size(), 1u);
  EXPECT_GE(*common.begin(), 1u);  // 500..1500 tokens
  EXPECT_LE(*common.begin(), 5u);

  o.system_prompts = 10;
  o.system_prompt_fraction = 0.5;
  o.input.min = 2000;  // every prompt has a first block
  std::map<BlockKey, int> first;
  for (const Request& r : Generate(o, 4000)) ++first[r.blocks.at(0)];
  int shared = 0, top = 0;
  for (auto [key, count] : first) {
    if (count > 1) shared += count;
    top = std::max(top, count);
  }
  EXPECT_LE(std::count_if(first.begin(), first.end(), [](auto& e) { return e.second > 1; }), 10);
  EXPECT_NEAR(shared / 4000.0, 0.5, 0.05);
  EXPECT_GT(top, 4000 * 0.5 / 10 * 2);  // Zipf: the top prompt well above a uniform share
}

TEST(SyntheticWorkload, DiurnalAmplitudeChangesRateBetweenPeakAndTrough) {
  SyntheticOptions o = Plain();
  o.diurnal_amplitude = 0.8;
  o.diurnal_period = 100 * kSecond;
  o.duration = 100 * kSecond;
  auto reqs = Generate(o);
  int peak = 0, trough = 0;  // sin peaks at t = 25 s, bottoms at t = 75 s
  for (const Request& r : reqs) {
    peak += r.arrival >= 20 * kSecond && r.arrival < 30 * kSecond;
    trough += r.arrival >= 70 * kSecond && r.arrival < 80 * kSecond;
  }
  EXPECT_NEAR(reqs.size(), 10'000, 400);  // the curve averages to `rate` over a period
  EXPECT_NEAR(peak, 1787, 150);
  EXPECT_NEAR(trough, 213, 50);
}

TEST(SyntheticWorkload, TenantsFollowWeights) {
  SyntheticOptions o = Plain();
  o.tenants = 3;
  o.tenant_weights = {1, 2, 7};
  std::vector<int> count(3);
  for (const Request& r : Generate(o, 20'000)) ++count.at(r.tenant);
  EXPECT_NEAR(count[0] / 20'000.0, 0.1, 0.015);
  EXPECT_NEAR(count[1] / 20'000.0, 0.2, 0.015);
  EXPECT_NEAR(count[2] / 20'000.0, 0.7, 0.015);
}

TEST(SyntheticWorkload, RejectsBadOptionsNamingTheField) {
  auto expect_error = [](auto mutate, const std::string& field) {
    SyntheticOptions o;
    mutate(o);
    auto w = MakeSyntheticWorkload(o);
    ASSERT_FALSE(w.ok()) << field;
    EXPECT_EQ(w.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(w.status().message().find(field), std::string::npos) << w.status();
  };
  expect_error([](SyntheticOptions& o) { o.rate = 0; }, "workload.rate: must be > 0, got 0");
  expect_error([](SyntheticOptions& o) { o.arrival = "uniform"; }, "arrival");
  expect_error([](SyntheticOptions& o) { o.diurnal_amplitude = 1.5; }, "workload.diurnal.amplitude");
  expect_error([](SyntheticOptions& o) { o.input.cv = -1; }, "workload.input.cv");
  expect_error([](SyntheticOptions& o) { o.output.max = 0; }, "output.max");
  expect_error([](SyntheticOptions& o) { o.turns_mean = 0.5; }, "turns_mean");
  expect_error([](SyntheticOptions& o) { o.block_tokens = 0; }, "kv_block_tokens");
  expect_error([](SyntheticOptions& o) { o.input.max = kMaxTokens + 1; }, "workload.input.max: must be at most");
  expect_error([](SyntheticOptions& o) { o.system_prompts = 2'000'000'000; }, "workload.system_prompts.count");
  expect_error([](SyntheticOptions& o) { o.rate = 1e308; o.duration = kHour; }, "workload.rate: 1e+308/s for");
  expect_error([](SyntheticOptions& o) { o.tenants = 2; o.tenant_weights = {1}; },
               "workload.tenants.weights");
}

}  // namespace
}  // namespace myriad::sim
