#include "base/status.h"

#include <gtest/gtest.h>

#include "base/types.h"

namespace ibsm {
namespace {

Result<int> ParsePositive(int v) {
  if (v <= 0) return InvalidArgument("must be positive");
  return v;
}

Result<int> Doubled(int v) {
  IBSM_ASSIGN_OR_RETURN(int x, ParsePositive(v));
  return x * 2;
}

TEST(StatusTest, ErrorCarriesCodeAndMessageIntoToString) {
  Status s = Corrupt("PortInfo needs 64 bytes, got 12");
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.ToString(), "Corrupt: PortInfo needs 64 bytes, got 12");
  EXPECT_EQ(Status().ToString(), "OK");
}

TEST(StatusTest, AssignOrReturnPropagatesTheFirstError) {
  EXPECT_EQ(*Doubled(4), 8);
  Result<int> r = Doubled(-1);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
}

TEST(TypesTest, GuidsPrintInHexAndLidsInDecimal) {
  EXPECT_EQ(ToString(Guid{0x0002c90300000011}), "0x0002c90300000011");
  EXPECT_EQ(fmt::format("{}", Lid{49151}), "49151");
  EXPECT_TRUE(IsUnicast(Lid{1}));
  EXPECT_FALSE(IsUnicast(Lid{0}));
  EXPECT_TRUE(IsMulticast(Lid{0xC000}));
  EXPECT_FALSE(IsMulticast(kPermissiveLid));
}

}  // namespace
}  // namespace ibsm
