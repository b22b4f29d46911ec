// `myriad sim --compare static,elastic` as a user runs it: one table of the fixed pools against
// the elasticity policies, and exit code 2 naming what is wrong.
#include <gtest/gtest.h>

#include <string>

#include "run_myriad.h"

namespace myriad::testing {
namespace {

TEST(ElasticCompareCli, PrintsOneTableOfStaticAndElastic) {
  // The shipped scenario, scaled down to 512 GPUs and 3 minutes of the first morning.
  const auto r = RunMyriad(std::string("sim ") + MYRIAD_SOURCE_DIR +
                               "/scenarios/elastic_day.yaml --scale 0.05 --set duration=3m --set drain=1m "
                               "--compare static,elastic --no-progress",
                           "", 300);
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("GPU-hours"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("burst abs"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("rollback"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\nstatic "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\nelastic "), std::string::npos) << r.out;
}

TEST(ElasticCompareCli, BadInputExitsTwoNamingIt) {
  auto r = RunMyriad(std::string("sim ") + MYRIAD_SOURCE_DIR + "/scenarios/small.yaml --compare static,elastic", "", 60);
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.out.find("small.yaml has no elastic: section"), std::string::npos) << r.out;
  r = RunMyriad(std::string("sim ") + MYRIAD_SOURCE_DIR +
                    "/scenarios/elastic_day.yaml --set elastic.autoscale.1.headroom=11 --no-progress",
                "", 60);
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.out.find("elastic_day.yaml:"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("elastic.autoscale[1].headroom: must be in [0, 10]"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace myriad::testing
