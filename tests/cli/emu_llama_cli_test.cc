// `myriad emu --profile llama-server`'s input errors, as a user meets them.
#include <gtest/gtest.h>

#include "run_myriad.h"

namespace myriad::testing {
namespace {

TEST(EmuLlamaCliTest, SlotOptionsNeedTheLlamaServerProfile) {
  const CommandResult r = RunMyriad("emu --listen 127.0.0.1:0 --slots 3", "", 20);
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("--slots needs --profile llama-server"), std::string::npos) << r.out;
}

TEST(EmuLlamaCliTest, LlamaServerPublishesNoKvEvents) {
  const CommandResult r =
      RunMyriad("emu --listen 127.0.0.1:0 --profile llama-server --kv-events tcp://127.0.0.1:*", "", 20);
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("--kv-events"), std::string::npos) << r.out;
}

TEST(EmuLlamaCliTest, SlotsAreBounded) {
  const CommandResult r = RunMyriad("emu --listen 127.0.0.1:0 --profile llama-server --slots 257", "", 20);
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("--slots"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace myriad::testing
