#include "fabric/topology_writer.h"

#include <gtest/gtest.h>

#include "fabric/generators.h"
#include "fabric/test_util.h"
#include "fabric/topology_reader.h"

namespace ibsm {
namespace {

TEST(TopologyWriterTest, ReadingWhatWasWrittenGivesTheSameFatTree) {
  auto f = FatTree3(4);
  ASSERT_TRUE(f.ok());
  auto back = ReadTopology(WriteTopology(*f), "written.net");
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  testing::ExpectSameFabric(*f, *back);
}

TEST(TopologyWriterTest, ReadingWhatWasWrittenKeepsIbnetdiscoverDetails) {
  auto f = ReadTopologyFile(testing::FixturePath("ibnetdiscover-small.net"));
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  auto back = ReadTopology(WriteTopology(*f), "written.net");
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  testing::ExpectSameFabric(*f, *back);
  for (const Node& n : f->nodes()) {
    const Node& m = back->node(*back->FindNodeByName(n.name));
    EXPECT_EQ(n.vendor_id, m.vendor_id) << n.name;
    EXPECT_EQ(n.device_id, m.device_id) << n.name;
    EXPECT_EQ(n.system_image_guid, m.system_image_guid) << n.name;
    for (uint32_t p = 0; p <= n.num_ports; ++p) {
      EXPECT_EQ(f->port(n.first_port + p).lid, back->port(m.first_port + p).lid);
    }
  }
}

TEST(TopologyWriterTest, FirstRecordIsAHostCaAndEveryPortLineEndsInLidAndRate) {
  auto f = FatTree2(4);
  ASSERT_TRUE(f.ok());
  std::string text = WriteTopology(*f);
  size_t first = text.find("\nCa\t");
  size_t first_switch = text.find("\nSwitch\t");
  ASSERT_NE(first, std::string::npos);
  EXPECT_LT(first, first_switch);
  EXPECT_NE(text.find("Ca\t1 \"node-0001/hca1\""), std::string::npos);
  size_t pos = 0;
  int port_lines = 0;
  while ((pos = text.find("\n[", pos)) != std::string::npos) {
    size_t end = text.find('\n', pos + 1);
    std::string line = text.substr(pos + 1, end - pos - 1);
    EXPECT_TRUE(line.ends_with("lid 0 4xEDR")) << line;
    ++port_lines;
    pos = end;
  }
  EXPECT_EQ(port_lines, 32);  // 16 links, each written from both ends
}

TEST(TopologyWriterTest, EqualsSignsInDescriptionsAreReplaced) {
  Fabric f;
  ASSERT_TRUE(f.AddNode(NodeKind::kCa, Guid{0x10}, 1, "h", "a=b \"c\"").ok());
  ASSERT_TRUE(f.AddNode(NodeKind::kSwitch, Guid{0x20}, 2, "s", "s").ok());
  ASSERT_TRUE(f.Connect(0, PortNum{1}, 1, PortNum{1}).ok());
  std::string text = WriteTopology(f);
  EXPECT_EQ(text.find("a=b"), std::string::npos);
  EXPECT_NE(text.find("a_b _c_"), std::string::npos);
}

}  // namespace
}  // namespace ibsm
