#include "net/prometheus.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

namespace myriad::net {
namespace {

TEST(PrometheusWriterTest, WritesFamiliesSamplesAndEscapes) {
  PrometheusWriter w;
  w.Family("requests_total", "Requests, by \\ op\nsecond line", MetricType::kCounter);
  w.Sample("requests_total", {{"op", "get"}, {"path", "a\"b\\c\nd"}}, uint64_t{18446744073709551615u});
  w.Gauge("temperature", "A gauge", 21.5);
  w.Counter("bad-name.x", "invalid characters become _", 3);
  EXPECT_EQ(w.text(),
            "# HELP requests_total Requests, by \\\\ op\\nsecond line\n"
            "# TYPE requests_total counter\n"
            "requests_total{op=\"get\",path=\"a\\\"b\\\\c\\nd\"} 18446744073709551615\n"
            "# HELP temperature A gauge\n"
            "# TYPE temperature gauge\n"
            "temperature 21.5\n"
            "# HELP bad_name_x invalid characters become _\n"
            "# TYPE bad_name_x counter\n"
            "bad_name_x 3\n");
}

TEST(PrometheusWriterTest, FormatsSpecialValues) {
  EXPECT_EQ(PrometheusWriter::FormatValue(std::numeric_limits<double>::quiet_NaN()), "NaN");
  EXPECT_EQ(PrometheusWriter::FormatValue(HUGE_VAL), "+Inf");
  EXPECT_EQ(PrometheusWriter::FormatValue(-HUGE_VAL), "-Inf");
  EXPECT_EQ(PrometheusWriter::FormatValue(0), "0");
  EXPECT_EQ(PrometheusWriter::FormatValue(1e21), "1e+21");
  EXPECT_EQ(PrometheusWriter::FormatValue(-2.25), "-2.25");
}

TEST(PrometheusWriterTest, HistogramLabelSetsShareOneFamilyHeader) {
  HistogramCounts a{{0.5, 1}, {}, 0}, b{{0.5, 1}, {}, 0};
  a.Observe(0.2);
  b.Observe(2);
  PrometheusWriter w;
  w.Histogram("lat_seconds", "Latency.", {{"engine", "0"}}, a);
  w.Histogram("lat_seconds", "Latency.", {{"engine", "1"}}, b, /*family=*/false);
  EXPECT_EQ(w.text(),
            "# HELP lat_seconds Latency.\n"
            "# TYPE lat_seconds histogram\n"
            "lat_seconds_bucket{engine=\"0\",le=\"0.5\"} 1\n"
            "lat_seconds_bucket{engine=\"0\",le=\"1\"} 1\n"
            "lat_seconds_bucket{engine=\"0\",le=\"+Inf\"} 1\n"
            "lat_seconds_sum{engine=\"0\"} 0.2\n"
            "lat_seconds_count{engine=\"0\"} 1\n"
            "lat_seconds_bucket{engine=\"1\",le=\"0.5\"} 0\n"
            "lat_seconds_bucket{engine=\"1\",le=\"1\"} 0\n"
            "lat_seconds_bucket{engine=\"1\",le=\"+Inf\"} 1\n"
            "lat_seconds_sum{engine=\"1\"} 2\n"
            "lat_seconds_count{engine=\"1\"} 1\n");
}

TEST(BoundedLabelTest, ValuesPastTheCapReadAsOther) {
  BoundedLabel l(2);
  EXPECT_EQ(l.Get("a"), "a");
  EXPECT_EQ(l.Get("b"), "b");
  EXPECT_EQ(l.Get("c"), "other");  // a third distinct value: no new series
  EXPECT_EQ(l.Get("a"), "a");      // the first ones keep theirs
  EXPECT_EQ(l.Get("other"), "other");
  EXPECT_EQ(l.size(), 2u);
}

}  // namespace
}  // namespace myriad::net
