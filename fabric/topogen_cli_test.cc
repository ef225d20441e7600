#include "fabric/topogen_cli.h"

#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "fabric/generators.h"
#include "fabric/test_util.h"
#include "fabric/topology_reader.h"

namespace ibsm {
namespace {

int RunTopoGen(std::vector<std::string> args) {
  args.insert(args.begin(), "topogen");
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  return TopoGenMain(static_cast<int>(argv.size()), argv.data());
}

TEST(TopoGenCliTest, Ftree3WithDroppedLinksWritesAReadableDegradedFabric) {
  std::string out = (std::filesystem::temp_directory_path() /
                     ("topogen-" + std::to_string(::getpid()) + ".net")).string();
  ASSERT_EQ(RunTopoGen({"ftree3", "-k", "4", "--drop-links=3", "--seed", "2", "-o", out}), 0);
  auto f = ReadTopologyFile(out);
  std::remove(out.c_str());
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  auto want = FatTree3(4);
  ASSERT_TRUE(want.ok());
  Degrade(*want, 3, 2);
  testing::ExpectSameFabric(*want, *f);
}

TEST(TopoGenCliTest, UnknownTopologyOrOptionIsAUsageError) {
  EXPECT_EQ(RunTopoGen({"torus"}), 2);
  EXPECT_EQ(RunTopoGen({"ftree2", "--bogus", "1"}), 2);
  EXPECT_EQ(RunTopoGen({"ftree2", "-k"}), 2);
  EXPECT_EQ(RunTopoGen({"ftree2", "-k", "eight"}), 2);
}

TEST(TopoGenCliTest, ImpossibleShapeFailsWithStatusOne) {
  EXPECT_EQ(RunTopoGen({"ftree3", "-k", "7", "-o", "/dev/null"}), 1);
}

}  // namespace
}  // namespace ibsm
