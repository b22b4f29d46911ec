// `myriad emu`'s store-tier options through the binary: bad values exit 2 naming the option
// and its bound, before anything is served.
#include <gtest/gtest.h>

#include <string>

#include "run_myriad.h"

namespace myriad {
namespace {

using testing::RunMyriad;

bool Has(const testing::CommandResult& r, const std::string& s) { return r.out.find(s) != std::string::npos; }

TEST(EmuStoreCli, BadStoreOptionsExitTwoNamingTheOption) {
  // Each would otherwise serve until killed: the timeout turns a missed check into a failure.
  auto r = RunMyriad("emu --listen 127.0.0.1:0 --kv-store http://127.0.0.1:1 --kv-block-bytes 4", "", 20);
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_TRUE(Has(r, "--kv-block-bytes")) << r.out;
  EXPECT_TRUE(Has(r, "268435456")) << r.out;  // the bound
  r = RunMyriad("emu --listen 127.0.0.1:0 --kv-store http://127.0.0.1:1 --kv-block-bytes 268435457", "", 20);
  EXPECT_EQ(r.code, 2) << r.out;
  r = RunMyriad("emu --listen 127.0.0.1:0 --kv-store http://127.0.0.1:1 --kv-offload-queue 0", "", 20);
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_TRUE(Has(r, "--kv-offload-queue")) << r.out;
  r = RunMyriad("emu --listen 127.0.0.1:0 --kv-store http://127.0.0.1:1 --kv-store-gbps 0", "", 20);
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_TRUE(Has(r, "--kv-store-gbps")) << r.out;
  // Store options without a store.
  r = RunMyriad("emu --listen 127.0.0.1:0 --kv-store-namespace m1", "", 20);
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_TRUE(Has(r, "--kv-store")) << r.out;
  // Not a master URL.
  r = RunMyriad("emu --listen 127.0.0.1:0 --kv-store 127.0.0.1:7700", "", 20);
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_TRUE(Has(r, "kv_store: '127.0.0.1:7700'")) << r.out;
}

}  // namespace
}  // namespace myriad
