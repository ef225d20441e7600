#include <gtest/gtest.h>

#include "tools/ctl_commands.h"

namespace ibsm::tools {
namespace {

TEST(CtlSharpTest, PrintsOneRowPerTreeAndTheHostsSomeTreeMisses) {
  const CtlCommand* c = FindCtlCommand("sharp");
  ASSERT_NE(c, nullptr);
  auto args = c->make_args({});
  ASSERT_TRUE(args.ok());
  nlohmann::json r = {
      {"enabled", true},  {"aggregation_nodes", 24}, {"enabled_nodes", 24},
      {"usable_nodes", 24}, {"switch_tiers", 2},     {"hosts", 128},
      {"trees",
       {{{"id", 1}, {"root", "0x0002c90200000011"}, {"root_name", "spine-01"}, {"depth", 2},
         {"hosts", 120}, {"switches", 16}, {"programmed", true}},
        {{"id", 2}, {"root", "0x0002c90200000012"}, {"root_name", "spine-02"}, {"depth", 2},
         {"hosts", 128}, {"switches", 17}, {"programmed", false}}}},
      {"uncovered", {"0x0002c90300000011"}},
      {"never_covered", nlohmann::json::array()},
      {"notes", nlohmann::json::array()}};
  const std::string out = c->format(r);
  EXPECT_NE(out.find("24 aggregation nodes"), std::string::npos) << out;
  EXPECT_NE(out.find("spine-01"), std::string::npos);
  EXPECT_NE(out.find("NO"), std::string::npos);  // tree 2 not programmed
  EXPECT_NE(out.find("1 hosts missing from some tree, 0 in none"), std::string::npos) << out;
  EXPECT_NE(out.find("missing: 0x0002c90300000011"), std::string::npos);
  EXPECT_EQ(c->format({{"enabled", false}}), "SHARP is off (sharp_enable 0)\n");
}

}  // namespace
}  // namespace ibsm::tools
