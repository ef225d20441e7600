#include "fabric/generators.h"

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <set>

#include <gtest/gtest.h>

#include "fabric/test_util.h"
#include "fabric/topology_reader.h"
#include "fabric/topology_writer.h"

namespace ibsm {
namespace {

size_t SwitchLinks(const Fabric& f) {
  size_t c = 0;
  for (PortId p = 0; p < f.port_count(); ++p) {
    const Port& port = f.port(p);
    if (port.connected() && port.peer > p && f.node(port.node).is_switch() &&
        f.node(f.port(port.peer).node).is_switch()) {
      ++c;
    }
  }
  return c;
}

TEST(GeneratorsTest, FatTree2K8Has32HostsAnd12Switches) {
  auto f = FatTree2(8);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_EQ(f->ca_count(), 32u);
  EXPECT_EQ(f->switch_count(), 12u);
  EXPECT_EQ(SwitchLinks(*f), 32u);
  EXPECT_EQ(f->link_count(), 64u);
  EXPECT_TRUE(IsConnected(*f));
  auto leaf = f->FindNodeByName("leaf-003");
  ASSERT_TRUE(leaf);
  EXPECT_EQ(f->node(*leaf).guid, Guid{0x0002c90200000003});
  auto host = f->FindNodeByName("node-0012/hca1");
  ASSERT_TRUE(host);
  EXPECT_EQ(f->node(*host).description, "node-0012 HCA-1");
  EXPECT_EQ(f->node(*host).guid, Guid{0x0002c903000000c0});
  EXPECT_EQ(f->port(*host, PortNum{1}).guid, Guid{0x0002c903000000c1});
}

TEST(GeneratorsTest, OversubscribedFatTree2HasTwoThirdsHostPorts) {
  FatTree2Options o;
  o.oversubscription = 2;
  auto f = FatTree2(36, o);
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(f->ca_count(), 36u * 24);
  EXPECT_EQ(f->switch_count(), 36u + 12);
}

TEST(GeneratorsTest, FatTree3K8Has128HostsAnd80Switches) {
  auto f = FatTree3(8);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_EQ(f->ca_count(), 128u);
  EXPECT_EQ(f->switch_count(), 80u);
  EXPECT_EQ(SwitchLinks(*f), 256u);  // 8 pods x (16 leaf-spine + 16 spine-core)
  EXPECT_TRUE(IsConnected(*f));
  EXPECT_TRUE(f->FindNodeByName("core-012"));
  EXPECT_TRUE(f->FindNodeByName("pod02-leaf-03"));
}

TEST(GeneratorsTest, PartialFatTree3BuildsOnlyTheRequestedPods) {
  auto f = FatTree3(8, 2);
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(f->ca_count(), 32u);
  EXPECT_EQ(f->switch_count(), 16u + 16);
  EXPECT_TRUE(IsConnected(*f));
}

TEST(GeneratorsTest, FatTree3RejectsOddK) { EXPECT_FALSE(FatTree3(7).ok()); }

TEST(GeneratorsTest, RailPlanesAreSeparateSubnetsOnePerRail) {
  auto f = RailOptimized(8, 8, 4, RailMode::kPlanes);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_EQ(f->ca_count(), 32u);
  EXPECT_EQ(f->switch_count(), 4u * (2 + 4));
  EXPECT_FALSE(IsConnected(*f));
  EXPECT_TRUE(f->FindNodeByName("rail3-leaf-001"));
  EXPECT_TRUE(f->FindNodeByName("server-0008/hca4"));
}

TEST(GeneratorsTest, RailSuperpodIsOneConnectedSubnet) {
  auto f = RailOptimized(16, 16, 4, RailMode::kSuperpod);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_EQ(f->ca_count(), 64u);
  EXPECT_EQ(f->switch_count(), 8u + 8);
  EXPECT_TRUE(IsConnected(*f));
}

TEST(GeneratorsTest, RandomGraphIsConnectedWithHostsOnTheFirstPorts) {
  auto f = RandomGraph(40, 16, 4, 7);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_EQ(f->switch_count(), 40u);
  EXPECT_EQ(f->ca_count(), 160u);
  EXPECT_TRUE(IsConnected(*f));
  EXPECT_EQ(SwitchLinks(*f), 40u * 12 / 2 * 3 / 4);
}

TEST(GeneratorsTest, SameSeedGivesTheSameFabricAndAnotherSeedDoesNot) {
  auto a = RandomGraph(30, 12, 3, 5);
  auto b = RandomGraph(30, 12, 3, 5);
  auto c = RandomGraph(30, 12, 3, 6);
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  EXPECT_EQ(WriteTopology(*a), WriteTopology(*b));
  EXPECT_NE(WriteTopology(*a), WriteTopology(*c));
  auto d1 = FatTree2(16);
  auto d2 = FatTree2(16);
  Degrade(*d1, 10, 3);
  Degrade(*d2, 10, 3);
  EXPECT_EQ(WriteTopology(*d1), WriteTopology(*d2));
}

TEST(GeneratorsTest, DegradeRemovesExactlyNSwitchLinksAndKeepsTheFabricConnected) {
  auto f = FatTree3(8);
  ASSERT_TRUE(f.ok());
  size_t before = SwitchLinks(*f);
  auto dropped = Degrade(*f, 40, 11);
  EXPECT_EQ(dropped.size(), 40u);
  EXPECT_EQ(SwitchLinks(*f), before - 40);
  EXPECT_EQ(f->ca_count(), 128u);
  EXPECT_TRUE(IsConnected(*f));
  for (const DroppedLink& d : dropped) {
    EXPECT_TRUE(f->node(d.a).is_switch());
    EXPECT_TRUE(f->node(d.b).is_switch());
    EXPECT_FALSE(f->port(d.a, d.a_port).connected());
  }
}

TEST(GeneratorsTest, DegradeStopsShortRatherThanPartitioning) {
  auto f = FatTree2(4);  // 8 switch links, 6 switches: a spanning tree needs 5
  ASSERT_TRUE(f.ok());
  auto dropped = Degrade(*f, 100, 1);
  EXPECT_EQ(dropped.size(), 3u);
  EXPECT_TRUE(IsConnected(*f));
}

// ---- identity with shared/fabric-tools/gen_topology.py -----------------------------------

std::string SharedDir() {
  const char* env = std::getenv("IBSM_SHARED");
  return env && *env ? env : testing::SourceDir() + "/../shared";
}

// Runs gen_topology.py with `args` and reads its output; skips if python3 or the script is
// missing.
std::optional<Fabric> FromScript(const std::string& args) {
  std::string script = SharedDir() + "/fabric-tools/gen_topology.py";
  if (!std::filesystem::exists(script) || std::system("python3 -c '' >/dev/null 2>&1") != 0) {
    return std::nullopt;
  }
  std::string out = (std::filesystem::temp_directory_path() /
                     ("ibsm-gen-" + std::to_string(::getpid()) + ".net"))
                        .string();
  std::string cmd = "python3 '" + script + "' " + args + " -o '" + out + "' 2>/dev/null";
  EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
  auto f = ReadTopologyFile(out);
  std::remove(out.c_str());
  EXPECT_TRUE(f.ok()) << f.status().ToString();
  if (!f.ok()) return Fabric();
  return std::move(f).value();
}

#define SKIP_IF_NO_SCRIPT(opt) \
  if (!(opt)) GTEST_SKIP() << "python3 or gen_topology.py not available"

TEST(GeneratorsMatchScriptTest, FatTree2K8IsIdenticalToGenTopology) {
  auto want = FromScript("ftree2 -k 8");
  SKIP_IF_NO_SCRIPT(want);
  auto got = FatTree2(8);
  ASSERT_TRUE(got.ok());
  testing::ExpectSameFabric(*want, *got);
}

TEST(GeneratorsMatchScriptTest, OversubscribedFatTree2IsIdenticalToGenTopology) {
  auto want = FromScript("ftree2 -k 12 --oversub 2 --speed HDR --width 2");
  SKIP_IF_NO_SCRIPT(want);
  FatTree2Options o;
  o.oversubscription = 2;
  o.speed = LinkSpeed::kHdr;
  o.width = LinkWidth::k2x;
  auto got = FatTree2(12, o);
  ASSERT_TRUE(got.ok());
  testing::ExpectSameFabric(*want, *got);
}

TEST(GeneratorsMatchScriptTest, FatTree3K8IsIdenticalToGenTopology) {
  auto want = FromScript("ftree3 -k 8");
  SKIP_IF_NO_SCRIPT(want);
  auto got = FatTree3(8);
  ASSERT_TRUE(got.ok());
  testing::ExpectSameFabric(*want, *got);
}

TEST(GeneratorsMatchScriptTest, PartialFatTree3IsIdenticalToGenTopology) {
  auto want = FromScript("ftree3 -k 12 --pods 5");
  SKIP_IF_NO_SCRIPT(want);
  auto got = FatTree3(12, 5);
  ASSERT_TRUE(got.ok());
  testing::ExpectSameFabric(*want, *got);
}

TEST(GeneratorsMatchScriptTest, RailPlanesAreIdenticalToGenTopology) {
  auto want = FromScript("rail -k 16 --servers 32 --rails 4");
  SKIP_IF_NO_SCRIPT(want);
  auto got = RailOptimized(16, 32, 4, RailMode::kPlanes);
  ASSERT_TRUE(got.ok());
  testing::ExpectSameFabric(*want, *got);
}

TEST(GeneratorsMatchScriptTest, RailSuperpodIsIdenticalToGenTopology) {
  auto want = FromScript("rail -k 32 --servers 32 --rails 8 --rail-mode superpod");
  SKIP_IF_NO_SCRIPT(want);
  auto got = RailOptimized(32, 32, 8, RailMode::kSuperpod);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  testing::ExpectSameFabric(*want, *got);
}

TEST(GeneratorsMatchScriptTest, RandomGraphIsIdenticalToGenTopology) {
  auto want = FromScript("random --switches 40 -k 16 --hosts-per-switch 4 --seed 7");
  SKIP_IF_NO_SCRIPT(want);
  auto got = RandomGraph(40, 16, 4, 7);
  ASSERT_TRUE(got.ok());
  testing::ExpectSameFabric(*want, *got);
}

TEST(GeneratorsMatchScriptTest, SmallRandomGraphUsesTheSamplePoolPath) {
  auto want = FromScript("random --switches 12 -k 8 --hosts-per-switch 2 --seed 123");
  SKIP_IF_NO_SCRIPT(want);
  auto got = RandomGraph(12, 8, 2, 123);
  ASSERT_TRUE(got.ok());
  testing::ExpectSameFabric(*want, *got);
}

TEST(GeneratorsMatchScriptTest, DegradedFatTree2IsIdenticalToGenTopology) {
  auto want = FromScript("ftree2 -k 16 --drop-links 20 --seed 3");
  SKIP_IF_NO_SCRIPT(want);
  auto got = FatTree2(16);
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(Degrade(*got, 20, 3).size(), 20u);
  testing::ExpectSameFabric(*want, *got);
}

TEST(GeneratorsMatchScriptTest, DegradedRandomGraphContinuesTheSameStream) {
  auto want = FromScript("random --switches 20 -k 8 --hosts-per-switch 2 --seed 9 --drop-links 5");
  SKIP_IF_NO_SCRIPT(want);
  PyRandom rng(9);
  auto got = RandomGraph(20, 8, 2, rng);
  ASSERT_TRUE(got.ok());
  Degrade(*got, 5, rng);
  testing::ExpectSameFabric(*want, *got);
}

}  // namespace
}  // namespace ibsm
