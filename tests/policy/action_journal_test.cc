#include "policy/action_journal.h"

#include <gtest/gtest.h>

namespace myriad::policy {
namespace {

TEST(ActionJournal, IdsCountAttemptsAndIncarnations) {
  ActionJournal j;
  EXPECT_EQ(j.Next("b1", ActionKind::kDrain).id, "b1/0/drain/1");
  EXPECT_EQ(j.Next("b1", ActionKind::kRestart).id, "b1/0/restart/1");
  EXPECT_EQ(j.Next("b1", ActionKind::kRestart).id, "b1/0/restart/2");
  EXPECT_EQ(j.Next("b2", ActionKind::kDrain).id, "b2/0/drain/1");
  EXPECT_EQ(j.Next("b1", ActionKind::kReadmit).id, "b1/0/readmit/1");
  // The incident is over: the next one is a new incarnation, its attempts from 1.
  EXPECT_EQ(j.incarnation("b1"), 1);
  EXPECT_EQ(j.Next("b1", ActionKind::kDrain).id, "b1/1/drain/1");
  EXPECT_FALSE(j.Next("b1", ActionKind::kCordon).taken);
  EXPECT_EQ(j.incarnation("b1"), 2);
}

// A new leader that makes the decisions the dead one made maps them to the same ids and skips
// them; what comes after runs.
TEST(ActionJournal, NewLeaderSkipsWhatTheOldOneRecorded) {
  ActionJournal old;
  std::vector<std::string> recorded;
  for (ActionKind k : {ActionKind::kDrain, ActionKind::kRestart}) recorded.push_back(old.Next("a/b", k).id);
  ActionJournal fresh(recorded);
  EXPECT_TRUE(fresh.Next("a/b", ActionKind::kDrain).taken);
  EXPECT_TRUE(fresh.Next("a/b", ActionKind::kRestart).taken);
  EXPECT_FALSE(fresh.Next("a/b", ActionKind::kRestart).taken);  // a second restart: not taken yet
  EXPECT_FALSE(fresh.Next("a/b", ActionKind::kReadmit).taken);
}

TEST(ActionJournal, LoadsIncarnationsAndIgnoresMalformedIds) {
  ActionJournal j({"b1/0/drain/1", "b1/0/readmit/1", "b1/1/cordon/1", "junk", "/0/drain/1", "b2/x/drain/1",
                   "b3/0/drain/-1"});
  EXPECT_EQ(j.incarnation("b1"), 2);
  EXPECT_EQ(j.incarnation("b2"), 0);
  EXPECT_FALSE(j.Next("b2", ActionKind::kDrain).taken);
  EXPECT_FALSE(j.Next("b3", ActionKind::kDrain).taken);
  EXPECT_TRUE(ActionJournal::Journaled(ActionKind::kRestart));
  EXPECT_FALSE(ActionJournal::Journaled(ActionKind::kWarmup));
  EXPECT_FALSE(ActionJournal::Journaled(ActionKind::kRecordAnswer));
}

}  // namespace
}  // namespace myriad::policy
