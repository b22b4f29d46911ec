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

}  // namespace
}  // namespace myriad::net
