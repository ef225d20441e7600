#include "fabric/topology_reader.h"

#include <random>

#include <gtest/gtest.h>

#include "fabric/test_util.h"

namespace ibsm {
namespace {

using testing::FixturePath;
using testing::ReadFileOrEmpty;

Fabric MustRead(const std::string& fixture) {
  auto f = ReadTopologyFile(FixturePath(fixture));
  EXPECT_TRUE(f.ok()) << f.status().ToString();
  return f.ok() ? std::move(f).value() : Fabric();
}

TEST(TopologyReaderTest, TwoTierK4FileHasEightHostsSixSwitchesAndSixteenLinks) {
  Fabric f = MustRead("ft2-k4.net");
  EXPECT_EQ(f.ca_count(), 8u);
  EXPECT_EQ(f.switch_count(), 6u);
  EXPECT_EQ(f.link_count(), 16u);
  auto leaf = f.FindNodeByName("leaf-001");
  ASSERT_TRUE(leaf);
  EXPECT_EQ(f.node(*leaf).guid, Guid{0x0002c90200000001});
  EXPECT_EQ(f.node(*leaf).num_ports, 4);
  const Port& up = f.port(*leaf, PortNum{3});
  ASSERT_TRUE(up.connected());
  EXPECT_EQ(f.node(f.port(up.peer).node).name, "spine-01");
  EXPECT_EQ(f.port(up.peer).num, PortNum{1});
  EXPECT_EQ(up.width, LinkWidth::k4x);
  EXPECT_EQ(up.speed, LinkSpeed::kEdr);
}

TEST(TopologyReaderTest, CaPortGuidComesFromItsPortLine) {
  Fabric f = MustRead("ft2-k4.net");
  auto h = f.FindNodeByName("node-0001/hca1");
  ASSERT_TRUE(h);
  EXPECT_EQ(f.node(*h).guid, Guid{0x0002c90300000010});
  EXPECT_EQ(f.node(*h).description, "node-0001 HCA-1");
  EXPECT_EQ(f.port(*h, PortNum{1}).guid, Guid{0x0002c90300000011});
  EXPECT_EQ(f.FindPort(Guid{0x0002c90300000011}), f.port_id(*h, PortNum{1}));
}

TEST(TopologyReaderTest, ReadsIbnetdiscoverOutputWithVendorIdsLidsRatesAndRouters) {
  Fabric f = MustRead("ibnetdiscover-small.net");
  EXPECT_EQ(f.switch_count(), 1u);
  EXPECT_EQ(f.ca_count(), 2u);
  EXPECT_EQ(f.link_count(), 3u);
  auto sw = f.FindNodeByName("S-0002c903008e4900");
  ASSERT_TRUE(sw);
  const Node& s = f.node(*sw);
  EXPECT_EQ(s.guid, Guid{0x2c903008e4900});
  EXPECT_EQ(s.vendor_id, 0x2c9u);
  EXPECT_EQ(s.device_id, 0xc738);
  EXPECT_EQ(s.description, "SwitchX -  Mellanox Technologies");
  EXPECT_EQ(f.port(*sw, PortNum{0}).lid, Lid{3});
  EXPECT_EQ(f.port(*sw, PortNum{1}).speed, LinkSpeed::kQdr);
  EXPECT_EQ(f.port(*sw, PortNum{2}).speed, LinkSpeed::kFdr);

  auto ca = f.FindNodeByName("H-0002c903000e0c10");
  ASSERT_TRUE(ca);
  EXPECT_EQ(f.node(*ca).system_image_guid, Guid{0x2c903000e0c13});
  EXPECT_EQ(f.node(*ca).device_id, 0x1003);
  EXPECT_EQ(f.port(*ca, PortNum{2}).guid, Guid{0x2c903000e0c12});
  EXPECT_EQ(f.port(*ca, PortNum{2}).lid, Lid{2});
  EXPECT_FALSE(f.port(*ca, PortNum{1}).connected());

  // The router's link is stated only at the switch end; it is still a link.
  auto rt = f.FindNodeByName("R-0002c903000f0000");
  ASSERT_TRUE(rt);
  EXPECT_EQ(f.node(*rt).kind, NodeKind::kRouter);
  EXPECT_EQ(f.port(*rt, PortNum{1}).guid, Guid{0x2c903000f0001});
  ASSERT_TRUE(f.port(*rt, PortNum{1}).connected());
  EXPECT_EQ(f.port(f.port(*rt, PortNum{1}).peer).node, *sw);
}

TEST(TopologyReaderTest, IbsimExampleWithoutGuidsGetsIbsimsDerivedGuids) {
  Fabric f = MustRead("ibsim-net-example.net");
  EXPECT_EQ(f.switch_count(), 2u);
  EXPECT_EQ(f.ca_count(), 2u);
  EXPECT_EQ(f.link_count(), 4u);
  // ibsim: switches count from 0x200000 by 1, CAs from 0x100000 by num_ports + 1.
  EXPECT_EQ(f.node(*f.FindNodeByName("Switch1")).guid, Guid{0x200000});
  EXPECT_EQ(f.node(*f.FindNodeByName("Switch2")).guid, Guid{0x200001});
  NodeId hca2 = *f.FindNodeByName("Hca2");
  EXPECT_EQ(f.node(hca2).guid, Guid{0x100003});
  EXPECT_EQ(f.port(hca2, PortNum{2}).guid, Guid{0x100005});
  EXPECT_EQ(f.node(hca2).description, "Hca2");
}

TEST(TopologyReaderTest, ReadsEveryShippedIbsimNetExample) {
  const std::string dir = "/usr/share/doc/ibsim-utils/net-examples/";
  for (const char* name : {"net", "net.1", "net.2sw2path", "net.2sw2path4hca",
                           "net.2sw2path4hca2port"}) {
    std::string text = ReadFileOrEmpty(dir + name);
    if (text.empty()) GTEST_SKIP() << "ibsim-utils examples not installed";
    auto f = ReadTopology(text, name);
    ASSERT_TRUE(f.ok()) << f.status().ToString();
    EXPECT_GT(f->link_count(), 0u) << name;
  }
}

TEST(TopologyReaderTest, LinkGivenOnlyAtOneEndIsALink) {
  auto f = ReadTopology("Switch 4 \"s\"\n[2] \"h\"[1]\n\nCa 1 \"h\"\n", "t.net");
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_EQ(f->link_count(), 1u);
}

TEST(TopologyReaderTest, MissingRemotePortDefaultsToOneAsIbsimDoes) {
  auto f = ReadTopology("Switch 4 \"s\"\n[2] \"h\"\n\nCa 1 \"h\"\n", "t.net");
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_EQ(f->port(*f->FindNodeByName("h"), PortNum{1}).peer,
            f->port_id(*f->FindNodeByName("s"), PortNum{2}));
}

TEST(TopologyReaderTest, IbsimWidthOptionSetsTheLinkWidth) {
  auto f = ReadTopology("Switch 4 \"s\"\n[1] \"h\"[1] w=8\n\nCa 1 \"h\"\n", "t.net");
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_EQ(f->port(*f->FindNodeByName("h"), PortNum{1}).width, LinkWidth::k12x);
}

TEST(TopologyReaderTest, EmptyInputIsAnEmptyFabric) {
  auto f = ReadTopology("", "empty.net");
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(f->node_count(), 0u);
}

struct BrokenCase {
  const char* file;
  const char* message;  // expected substring, including file:line
};

class BrokenFileTest : public ::testing::TestWithParam<BrokenCase> {};

TEST_P(BrokenFileTest, IsRejectedWithFileLineAndWhatWasExpected) {
  const BrokenCase& c = GetParam();
  std::string text = ReadFileOrEmpty(FixturePath(std::string("broken/") + c.file));
  ASSERT_FALSE(text.empty()) << c.file;
  auto f = ReadTopology(text, c.file);
  ASSERT_FALSE(f.ok()) << c.file;
  EXPECT_NE(f.status().message().find(c.message), std::string::npos)
      << "got: " << f.status().message();
}

INSTANTIATE_TEST_SUITE_P(
    AllErrorKinds, BrokenFileTest,
    ::testing::Values(
        BrokenCase{"bad-port-line.net",
                   "bad-port-line.net:3: expected '[port]' at the start of a port line, got 'foo'"},
        BrokenCase{"bad-port-count.net", "bad-port-count.net:1: expected a port count"},
        BrokenCase{"unquoted-name.net", "unquoted-name.net:1: expected a quoted node name"},
        BrokenCase{"port-out-of-range.net", "port-out-of-range.net:2: port 5 is out of range"},
        BrokenCase{"unknown-node.net", "unknown-node.net:2: unknown node \"nobody\""},
        BrokenCase{"contradicting-ends.net", "contradicting-ends.net:5: \"h1\"[1] is cabled to"},
        BrokenCase{"duplicate-node.net",
                   "duplicate-node.net:4: node \"sw1\" is already defined at line 1"},
        BrokenCase{"bad-rate.net", "bad-rate.net:2: expected a link speed"},
        BrokenCase{"duplicate-port.net",
                   "duplicate-port.net:3: port 1 of \"sw1\" is already described at line 2"},
        BrokenCase{"unknown-line.net", "unknown-line.net:1: expected a node header"},
        BrokenCase{"contradicting-rate.net",
                   "contradicting-rate.net:5: link rate 4xHDR contradicts 4xEDR given at line 2"},
        BrokenCase{"duplicate-guid.net", "duplicate-guid.net:5: node GUID"}));

TEST(TopologyReaderTest, IncludeDirectiveIsUnsupported) {
  auto f = ReadTopology("include \"other.net\"\n", "inc.net");
  ASSERT_FALSE(f.ok());
  EXPECT_EQ(f.status().code(), StatusCode::kUnsupported);
  EXPECT_NE(f.status().message().find("inc.net:1"), std::string::npos);
}

TEST(TopologyReaderTest, MissingFileIsAnIoError) {
  auto f = ReadTopologyFile("/nonexistent/dir/x.net");
  ASSERT_FALSE(f.ok());
  EXPECT_EQ(f.status().code(), StatusCode::kIoError);
}

// Sanity loop: random byte flips, deletions, insertions, line duplications and truncations of
// a valid file must produce a fabric or a Status, never a crash (run under ASan+UBSan too).
TEST(TopologyReaderTest, NeverCrashesOnRandomMutationsOfAValidFile) {
  const std::string base = ReadFileOrEmpty(FixturePath("ibnetdiscover-small.net")) +
                           ReadFileOrEmpty(FixturePath("ft2-k4.net"));
  ASSERT_FALSE(base.empty());
  std::mt19937_64 rng(12345);
  const std::string alphabet = "[]()\"#=+@ \t\n0123456789xabcdefSwitchCaRtlidmc-/EDR";
  int ok = 0;
  for (int i = 0; i < 4000; ++i) {
    std::string s = base;
    int edits = 1 + static_cast<int>(rng() % 8);
    for (int e = 0; e < edits && !s.empty(); ++e) {
      size_t at = rng() % s.size();
      switch (rng() % 6) {
        case 0: s[at] = static_cast<char>(rng() % 256); break;
        case 1: s.erase(at, 1 + rng() % 20); break;
        case 2: s.insert(at, 1, alphabet[rng() % alphabet.size()]); break;
        case 3: {
          size_t b = s.rfind('\n', at);
          b = b == std::string::npos ? 0 : b + 1;
          size_t end = s.find('\n', at);
          if (end == std::string::npos) end = s.size();
          s.insert(b, s.substr(b, end - b) + "\n");
          break;
        }
        case 4: s.resize(at); break;
        default: s[at] = alphabet[rng() % alphabet.size()]; break;
      }
    }
    auto f = ReadTopology(s, "mut.net");
    if (f.ok()) {
      ++ok;
    } else {
      EXPECT_EQ(f.status().message().rfind("mut.net:", 0), 0u) << f.status().message();
    }
  }
  RecordProperty("accepted", ok);
}

}  // namespace
}  // namespace ibsm
