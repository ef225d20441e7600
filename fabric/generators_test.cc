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

// ---- identity with gen_topology.py ------------------------------------------------------
// The generators build link for link what the fabric generator script gen_topology.py (the
// reference this project's fabrics were first made with; fabric/generators.h) writes for the
// same arguments. The script is not part of this repository: each case keeps the digest of
// the script's output (testing::FabricDigest, recorded from gen_topology.py with these
// arguments). With IBSM_GEN_TOPOLOGY=/path/to/gen_topology.py the script is run as well and
// compared field by field, and the digests are printed.

std::optional<Fabric> FromScript(const std::string& args) {
  const char* script = std::getenv("IBSM_GEN_TOPOLOGY");
  if (!script || !*script || std::system("python3 -c '' >/dev/null 2>&1") != 0) return std::nullopt;
  std::string out = (std::filesystem::temp_directory_path() /
                     ("ibsm-gen-" + std::to_string(::getpid()) + ".net"))
                        .string();
  std::string cmd = "python3 '" + std::string(script) + "' " + args + " -o '" + out + "' 2>/dev/null";
  EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
  auto f = ReadTopologyFile(out);
  std::remove(out.c_str());
  EXPECT_TRUE(f.ok()) << f.status().ToString();
  if (!f.ok()) return Fabric();
  return std::move(f).value();
}

// `got` is what gen_topology.py `args` writes: its digest as recorded, and the script's own
// output when IBSM_GEN_TOPOLOGY names it.
void ExpectLikeGenTopology(const std::string& args, const Fabric& got, uint64_t digest) {
  const uint64_t have = testing::FabricDigest(got);
  if (auto want = FromScript(args)) {
    testing::ExpectSameFabric(*want, got);
    std::printf("gen_topology.py %s: digest 0x%016llx\n", args.c_str(),
                static_cast<unsigned long long>(testing::FabricDigest(*want)));
  }
  EXPECT_EQ(have, digest) << "the generator no longer builds what gen_topology.py " << args
                          << " writes (digest 0x" << std::hex << have << ")";
}

TEST(GeneratorsMatchScriptTest, FatTree2K8IsIdenticalToGenTopology) {
  auto got = FatTree2(8);
  ASSERT_TRUE(got.ok());
  ExpectLikeGenTopology("ftree2 -k 8", *got, 0x99485c8e4c50babcull);
}

TEST(GeneratorsMatchScriptTest, OversubscribedFatTree2IsIdenticalToGenTopology) {
  FatTree2Options o;
  o.oversubscription = 2;
  o.speed = LinkSpeed::kHdr;
  o.width = LinkWidth::k2x;
  auto got = FatTree2(12, o);
  ASSERT_TRUE(got.ok());
  ExpectLikeGenTopology("ftree2 -k 12 --oversub 2 --speed HDR --width 2", *got, 0xe5185760ccc1da4eull);
}

TEST(GeneratorsMatchScriptTest, FatTree3K8IsIdenticalToGenTopology) {
  auto got = FatTree3(8);
  ASSERT_TRUE(got.ok());
  ExpectLikeGenTopology("ftree3 -k 8", *got, 0x7f23f57354dd4c18ull);
}

TEST(GeneratorsMatchScriptTest, PartialFatTree3IsIdenticalToGenTopology) {
  auto got = FatTree3(12, 5);
  ASSERT_TRUE(got.ok());
  ExpectLikeGenTopology("ftree3 -k 12 --pods 5", *got, 0x9af79f9c38d48f3dull);
}

TEST(GeneratorsMatchScriptTest, RailPlanesAreIdenticalToGenTopology) {
  auto got = RailOptimized(16, 32, 4, RailMode::kPlanes);
  ASSERT_TRUE(got.ok());
  ExpectLikeGenTopology("rail -k 16 --servers 32 --rails 4", *got, 0x0f6f1ecbacf7b741ull);
}

TEST(GeneratorsMatchScriptTest, RailSuperpodIsIdenticalToGenTopology) {
  auto got = RailOptimized(32, 32, 8, RailMode::kSuperpod);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  ExpectLikeGenTopology("rail -k 32 --servers 32 --rails 8 --rail-mode superpod", *got, 0xe3d1741c06c57a01ull);
}

TEST(GeneratorsMatchScriptTest, RandomGraphIsIdenticalToGenTopology) {
  auto got = RandomGraph(40, 16, 4, 7);
  ASSERT_TRUE(got.ok());
  ExpectLikeGenTopology("random --switches 40 -k 16 --hosts-per-switch 4 --seed 7", *got, 0xdc891f9372e1ece3ull);
}

TEST(GeneratorsMatchScriptTest, SmallRandomGraphUsesTheSamplePoolPath) {
  auto got = RandomGraph(12, 8, 2, 123);
  ASSERT_TRUE(got.ok());
  ExpectLikeGenTopology("random --switches 12 -k 8 --hosts-per-switch 2 --seed 123", *got, 0x7f8d2f986423f9b9ull);
}

TEST(GeneratorsMatchScriptTest, DegradedFatTree2IsIdenticalToGenTopology) {
  auto got = FatTree2(16);
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(Degrade(*got, 20, 3).size(), 20u);
  ExpectLikeGenTopology("ftree2 -k 16 --drop-links 20 --seed 3", *got, 0x780db8e4975750b1ull);
}

TEST(GeneratorsMatchScriptTest, DegradedRandomGraphContinuesTheSameStream) {
  PyRandom rng(9);
  auto got = RandomGraph(20, 8, 2, rng);
  ASSERT_TRUE(got.ok());
  Degrade(*got, 5, rng);
  ExpectLikeGenTopology("random --switches 20 -k 8 --hosts-per-switch 2 --seed 9 --drop-links 5", *got, 0xf2a04c11f8b7316bull);
}

}  // namespace
}  // namespace ibsm
