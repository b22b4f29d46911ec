#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include <vector>

#include "core/block_hash.h"
#include "core/rng.h"
#include "core/stats.h"
#include "core/time.h"

namespace myriad {
namespace {

TEST(Duration, ParsesUnitsAndRejectsGarbage) {
  EXPECT_EQ(*ParseDuration("1h"), kHour);
  EXPECT_EQ(*ParseDuration("90m"), 90 * kMinute);
  EXPECT_EQ(*ParseDuration("250ms"), 250 * kMillisecond);
  EXPECT_EQ(*ParseDuration("2.5"), 2500 * kMillisecond);
  EXPECT_EQ(*ParseDuration("10us"), 10 * kMicrosecond);
  EXPECT_FALSE(ParseDuration("fast").ok());
  EXPECT_FALSE(ParseDuration("10 parsecs").ok());
  EXPECT_FALSE(ParseDuration("-1s").ok());
  EXPECT_FALSE(ParseDuration("").ok());
}

TEST(Duration, FormatsWallClockAsRfc3339UtcWithMilliseconds) {
  EXPECT_EQ(FormatRfc3339Millis(0), "1970-01-01T00:00:00.000Z");
  // 2026-12-01T22:04:23.123456789Z: milliseconds truncated, not rounded up.
  EXPECT_EQ(FormatRfc3339Millis(1796162663LL * kSecond + 123456789), "2026-12-01T22:04:23.123Z");
  EXPECT_EQ(FormatRfc3339Millis(-1), "1969-12-31T23:59:59.999Z");
}

TEST(Rng, SameSeedSameStreamAndForksIndependent) {
  Rng a(7), b(7), c(8);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(a.Next(), b.Next());
  EXPECT_NE(Rng(7).Next(), c.Next());
  EXPECT_NE(Rng(7).Fork(1).Next(), Rng(7).Fork(2).Next());
  EXPECT_EQ(Rng(7).Fork(1).Next(), Rng(7).Fork(1).Next());
}

TEST(Rng, DistributionsHaveTheirMeans) {
  Rng r(1);
  double exp_sum = 0, gamma_sum = 0, uni_sum = 0;
  const int n = 200000;
  for (int i = 0; i < n; ++i) {
    exp_sum += r.Exponential(2.0);
    gamma_sum += r.Gamma(0.5, 4.0);
    uni_sum += r.Uniform();
  }
  EXPECT_NEAR(exp_sum / n, 0.5, 0.01);
  EXPECT_NEAR(gamma_sum / n, 2.0, 0.05);
  EXPECT_NEAR(uni_sum / n, 0.5, 0.01);
  std::vector<int> counts(10);
  for (int i = 0; i < n; ++i) ++counts[r.Zipf(10, 1.0)];
  EXPECT_GT(counts[0], counts[1]);
  EXPECT_GT(counts[1], counts[9]);
  for (int i = 0; i < 1000; ++i) EXPECT_LT(r.Below(3), 3u);
}

TEST(BlockHash, ChainNamesPrefixes) {
  std::vector<uint32_t> a = {1, 2, 3, 4, 5, 6, 7, 8, 9};
  std::vector<uint32_t> b = {1, 2, 3, 4, 9, 9, 9, 9};
  auto ka = HashTokenBlocks(a, 4);
  auto kb = HashTokenBlocks(b, 4);
  ASSERT_EQ(ka.size(), 2u);  // the partial last block is not keyed
  ASSERT_EQ(kb.size(), 2u);
  EXPECT_EQ(ka[0], kb[0]);
  EXPECT_NE(ka[1], kb[1]);
  EXPECT_NE(HashTokenBlocks(a, 4, /*extra=*/1)[0], ka[0]);
  // Same block content after a different parent is a different key.
  std::vector<uint32_t> c = {9, 9, 9, 9, 5, 6, 7, 8};
  EXPECT_NE(HashTokenBlocks(c, 4)[1], ka[1]);
}

// The extra-keys rule lives beside the chain so that every module keys a salted block alike.
TEST(BlockHash, ExtraKeysDigestAndTheCacheSaltRule) {
  // 0 for no keys; the same keys the same; order, kind and content matter.
  const ExtraKey salt{.str = "salt"}, seven{.kind = ExtraKey::Kind::kInt, .num = 7};
  EXPECT_EQ(DigestExtraKeys({}), 0u);
  EXPECT_EQ(DigestExtraKeys(std::vector{salt}), DigestExtraKeys(std::vector{ExtraKey{.str = "salt"}}));
  EXPECT_NE(DigestExtraKeys(std::vector{salt, seven}), DigestExtraKeys(std::vector{seven, salt}));
  EXPECT_NE(DigestExtraKeys(std::vector{ExtraKey{.str = "7"}}), DigestExtraKeys(std::vector{seven}));
  // A salt is reported as the one string key of the first block, and seeds it with that digest.
  EXPECT_EQ(CacheSaltExtraKeys("salt"), std::vector{salt});
  EXPECT_EQ(CacheSaltDigest("salt"), DigestExtraKeys(std::vector{salt}));
  EXPECT_EQ(CacheSaltDigest(""), 0u);
  const std::vector<uint32_t> t = {1, 2, 3, 4, 5, 6, 7, 8};
  const auto plain = HashTokenBlocks(t, 4);
  const auto salted = HashTokenBlocks(t, 4, 0, CacheSaltDigest("salt"));
  EXPECT_EQ(salted[0], HashTokenBlock(kRootBlockKey, std::span(t).first(4), CacheSaltDigest("salt")));
  EXPECT_NE(salted[0], plain[0]);
  EXPECT_EQ(salted[1], HashTokenBlock(salted[0], std::span(t).last(4)));
}

TEST(Distribution, NearestRankQuantiles) {
  Distribution d;
  for (int i = 100; i >= 1; --i) d.Add(i);
  EXPECT_EQ(d.Quantile(0.5), 50);
  EXPECT_EQ(d.Quantile(0.99), 99);
  EXPECT_EQ(d.Quantile(1.0), 100);
  EXPECT_DOUBLE_EQ(d.mean(), 50.5);
  EXPECT_DOUBLE_EQ(d.FractionAtMost(10), 0.1);
  Summary s = d.Summarize();
  EXPECT_EQ(s.count, 100u);
  EXPECT_EQ(s.max, 100);
}

TEST(TimeWeighted, AveragesOverTime) {
  TimeWeighted t;
  t.Set(0, 2);
  t.Set(kSecond, 4);
  EXPECT_DOUBLE_EQ(t.Average(2 * kSecond), 3.0);
  EXPECT_DOUBLE_EQ(t.Integral(2 * kSecond), 6.0);
}

}  // namespace
}  // namespace myriad

namespace myriad {
namespace {

TEST(Distribution, BeyondTheExactLimitQuantilesStayWithinAQuarterPercent) {
  Distribution d;
  const size_t n = Distribution::kExactLimit + 1000;
  // A ramp over [1, 3): every quantile is known.
  for (size_t i = 0; i < n; ++i) d.Add(1.0 + 2.0 * static_cast<double>(i) / static_cast<double>(n));
  EXPECT_FALSE(d.exact());
  EXPECT_EQ(d.count(), n);
  const Summary s = d.Summarize();
  EXPECT_NEAR(s.mean, 2.0, 1e-6);
  EXPECT_DOUBLE_EQ(s.min, 1.0);
  EXPECT_NEAR(s.p50, 2.0, 2.0 * 0.0025);
  EXPECT_NEAR(s.p90, 2.8, 2.8 * 0.0025);
  EXPECT_NEAR(s.p99, 2.98, 2.98 * 0.0025);
  EXPECT_NEAR(d.FractionAtMost(2.0), 0.5, 0.005);
  d.Add(100);
  EXPECT_DOUBLE_EQ(d.Summarize().max, 100);
}

}  // namespace
}  // namespace myriad

namespace myriad {
namespace {

// The histogram finds a value's bucket from a table of bucket edges instead of a logarithm;
// it must agree with the logarithm's definition everywhere, and most of all at the edges.
TEST(Distribution, TableBucketsAgreeWithTheLogarithmsDefinition) {
  size_t mismatches = 0;
  auto check = [&](double v) {
    if (Distribution::Bucket(v) == Distribution::BucketByLog(v)) return;
    if (mismatches++ == 0) ADD_FAILURE() << "first mismatch at " << v;
  };
  const double growth = std::log(1.005);
  for (size_t b = 1; b < 12000; ++b) {
    // Every double within 256 steps of the nominal edge between buckets b - 1 and b.
    double v = 1e-9 * std::exp(static_cast<double>(b - 1) * growth);
    for (int i = 0; i < 256; ++i) v = std::nextafter(v, 0.0);
    for (int i = 0; i < 512; ++i, v = std::nextafter(v, 1e300)) check(v);
  }
  Rng rng(7);
  for (int i = 0; i < 1000000; ++i) check(std::exp(rng.Uniform(-25, 45)));  // log-uniform
  for (double v : {0.0, -1.0, 1e-9, 1e-300, 1e17, 1e30, std::numeric_limits<double>::max()}) check(v);
  EXPECT_EQ(mismatches, 0u);
  EXPECT_EQ(Distribution::Bucket(std::numeric_limits<double>::infinity()), 11999u);
  EXPECT_EQ(Distribution::Bucket(std::nan("")), 0u);
}

}  // namespace
}  // namespace myriad
