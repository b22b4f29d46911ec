#include "net/url_path.h"

#include <gtest/gtest.h>

namespace myriad::net {
namespace {

TEST(UrlPath, ReservedCharactersAreEncodedAndDecodeBack) {
  const std::string name = "org/Model v1?x=1#2%&+";
  const std::string seg = PathSegment(name);
  EXPECT_EQ(seg, "org%2FModel%20v1%3Fx%3D1%232%25%26%2B");
  EXPECT_EQ(PercentDecode(seg), name);
  EXPECT_EQ(PathSegment("Llama-3.1_8B~x"), "Llama-3.1_8B~x");
  EXPECT_EQ(PercentDecode("org/plain"), "org/plain");  // an unencoded name is itself
  EXPECT_EQ(PercentDecode("%e2%82%ac"), "\xe2\x82\xac");
}

TEST(UrlPath, BadEscapesAreRefused) {
  EXPECT_EQ(PercentDecode("%"), std::nullopt);
  EXPECT_EQ(PercentDecode("a%2"), std::nullopt);
  EXPECT_EQ(PercentDecode("%zz"), std::nullopt);
  EXPECT_EQ(PercentDecode("%+1"), std::nullopt);
}

}  // namespace
}  // namespace myriad::net
