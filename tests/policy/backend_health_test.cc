// The backend health state machine both the gateway and the simulator run.
#include "policy/backend_health.h"

#include <gtest/gtest.h>

namespace myriad::policy {
namespace {

TEST(BackendHealth, EjectsAfterNConsecutiveErrorsOnce) {
  BackendHealth h(BackendHealthOptions{.eject_after_errors = 3});
  EXPECT_EQ(h.RecordRequest(false), HealthChange::kNone);
  EXPECT_EQ(h.RecordRequest(false), HealthChange::kNone);
  EXPECT_TRUE(h.available());
  EXPECT_EQ(h.RecordRequest(false), HealthChange::kEjected);
  EXPECT_TRUE(h.ejected());
  EXPECT_FALSE(h.available());
  EXPECT_EQ(h.RecordRequest(false), HealthChange::kNone) << "ejected once";
}

TEST(BackendHealth, ASuccessResetsTheErrorCount) {
  BackendHealth h(BackendHealthOptions{.eject_after_errors = 3});
  h.RecordRequest(false);
  h.RecordRequest(false);
  EXPECT_EQ(h.RecordRequest(true), HealthChange::kNone);
  EXPECT_EQ(h.consecutive_errors(), 0);
  h.RecordRequest(false);
  EXPECT_EQ(h.RecordRequest(false), HealthChange::kNone);
  EXPECT_TRUE(h.available());
  EXPECT_EQ(h.RecordRequest(false), HealthChange::kEjected);
}

TEST(BackendHealth, ZeroNeverEjects) {
  BackendHealth h(BackendHealthOptions{.eject_after_errors = 0});
  for (int i = 0; i < 100; ++i) EXPECT_EQ(h.RecordRequest(false), HealthChange::kNone);
  EXPECT_TRUE(h.available());
}

TEST(BackendHealth, ReadmittedAfterMPassingChecksInARow) {
  BackendHealth h(BackendHealthOptions{.eject_after_errors = 1, .readmit_after_passing_checks = 3});
  ASSERT_EQ(h.RecordRequest(false), HealthChange::kEjected);
  EXPECT_EQ(h.RecordCheck(true), HealthChange::kNone);
  EXPECT_EQ(h.RecordCheck(true), HealthChange::kNone);
  EXPECT_EQ(h.RecordCheck(false), HealthChange::kNone) << "one failure: not yet unhealthy";
  EXPECT_EQ(h.RecordCheck(true), HealthChange::kNone) << "the count starts over";
  EXPECT_EQ(h.RecordCheck(true), HealthChange::kNone);
  EXPECT_EQ(h.RecordCheck(true), HealthChange::kReadmitted);
  EXPECT_TRUE(h.available());
  EXPECT_EQ(h.consecutive_errors(), 0);
}

TEST(BackendHealth, PassesBeforeTheEjectionDoNotCount) {
  BackendHealth h(BackendHealthOptions{.eject_after_errors = 1, .readmit_after_passing_checks = 2});
  h.RecordCheck(true);
  h.RecordCheck(true);
  ASSERT_EQ(h.RecordRequest(false), HealthChange::kEjected);
  EXPECT_EQ(h.RecordCheck(true), HealthChange::kNone);
  EXPECT_EQ(h.RecordCheck(true), HealthChange::kReadmitted);
}

TEST(BackendHealth, FailedChecksMarkUnhealthyAndOnePassHealsIt) {
  BackendHealth h(BackendHealthOptions{.unhealthy_after_failed_checks = 2});
  EXPECT_EQ(h.RecordCheck(false), HealthChange::kNone);
  EXPECT_EQ(h.RecordCheck(false), HealthChange::kUnhealthy);
  EXPECT_FALSE(h.available());
  EXPECT_EQ(h.RecordCheck(false), HealthChange::kNone);
  EXPECT_EQ(h.RecordCheck(true), HealthChange::kHealthy);
  EXPECT_TRUE(h.available());
  EXPECT_EQ(HealthChangeName(HealthChange::kUnhealthy), "unhealthy");
}

TEST(BackendHealth, ResetStartsOverWithTheSameOptions) {
  BackendHealth h(BackendHealthOptions{.eject_after_errors = 2});
  h.RecordRequest(false);
  ASSERT_EQ(h.RecordRequest(false), HealthChange::kEjected);
  h.Reset();
  EXPECT_TRUE(h.available());
  EXPECT_EQ(h.RecordRequest(false), HealthChange::kNone);
  EXPECT_EQ(h.RecordRequest(false), HealthChange::kEjected);
}

}  // namespace
}  // namespace myriad::policy
