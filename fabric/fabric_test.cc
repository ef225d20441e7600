// Fabric::KeepNodes: nodes taken out in place, compared with the same nodes added afresh.
#include "fabric/fabric.h"

#include <gtest/gtest.h>

#include "fabric/generators.h"

namespace ibsm {
namespace {

// The nodes of `f` with keep[n] set, added afresh in their order with every field, port
// GUIDs set and indexed and cables between them made: what KeepNodes must give.
Fabric Afresh(const Fabric& f, const std::vector<bool>& keep) {
  Fabric g;
  std::vector<NodeId> id(f.node_count(), kNoNode);
  for (NodeId n = 0; n < f.node_count(); ++n) {
    if (!keep[n]) continue;
    const Node& node = f.node(n);
    id[n] = *g.AddNode(node.kind, node.guid, node.num_ports, node.name, node.description);
    Node& m = g.mutable_node(id[n]);
    m.system_image_guid = node.system_image_guid;
    m.vendor_id = node.vendor_id;
    m.device_id = node.device_id;
    m.revision = node.revision;
    for (uint32_t p = 0; p <= node.num_ports; ++p) {
      const Port& from = f.port(n, PortNum(static_cast<uint8_t>(p)));
      const PortId to_id = g.port_id(id[n], PortNum(static_cast<uint8_t>(p)));
      Port& to = g.mutable_port(to_id);
      to.lid = from.lid;
      to.lmc = from.lmc;
      to.state = from.state;
      to.width = from.width;
      to.speed = from.speed;
      // Indexed by its first port (a switch's ports 1.. carry port 0's GUID), kept on all.
      if (from.guid.value() != 0) (void)g.SetPortGuid(to_id, from.guid);
      to.guid = from.guid;
    }
  }
  for (PortId p = 0; p < f.port_count(); ++p) {
    const Port& a = f.port(p);
    if (!a.connected() || a.peer < p) continue;
    const Port& b = f.port(a.peer);
    if (id[a.node] != kNoNode && id[b.node] != kNoNode) {
      EXPECT_TRUE(g.Connect(id[a.node], a.num, id[b.node], b.num).ok());
    }
  }
  return g;
}

void ExpectSame(const Fabric& got, const Fabric& want, const Fabric& original,
                const std::vector<bool>& keep) {
  ASSERT_EQ(got.node_count(), want.node_count());
  ASSERT_EQ(got.port_count(), want.port_count());
  for (NodeId n = 0; n < want.node_count(); ++n) {
    const Node& a = got.node(n);
    const Node& b = want.node(n);
    EXPECT_EQ(a.kind, b.kind);
    EXPECT_EQ(a.guid, b.guid);
    EXPECT_EQ(a.num_ports, b.num_ports);
    EXPECT_EQ(a.system_image_guid, b.system_image_guid);
    EXPECT_EQ(a.name, b.name);
    EXPECT_EQ(a.description, b.description);
    EXPECT_EQ(a.first_port, b.first_port);
    EXPECT_EQ(got.FindNode(b.guid), std::optional<NodeId>(n));
    if (!b.name.empty()) {
      EXPECT_EQ(got.FindNodeByName(b.name), want.FindNodeByName(b.name));
    }
  }
  for (PortId p = 0; p < want.port_count(); ++p) {
    const Port& a = got.port(p);
    const Port& b = want.port(p);
    EXPECT_EQ(a.node, b.node);
    EXPECT_EQ(a.num, b.num);
    EXPECT_EQ(a.guid, b.guid);
    EXPECT_EQ(a.peer, b.peer) << "port " << p;
    EXPECT_EQ(a.lid, b.lid);
    EXPECT_EQ(a.state, b.state);
    if (b.guid.value() != 0) {
      EXPECT_EQ(got.FindPort(b.guid), want.FindPort(b.guid));
    }
  }
  EXPECT_EQ(got.link_count(), want.link_count());
  for (NodeId n = 0; n < original.node_count(); ++n) {
    if (keep[n]) continue;
    const Node& gone = original.node(n);
    EXPECT_FALSE(got.FindNode(gone.guid).has_value());
    EXPECT_FALSE(got.FindPort(original.port(gone.first_port).guid).has_value());
    if (!gone.name.empty()) {
      EXPECT_FALSE(got.FindNodeByName(gone.name).has_value());
    }
  }
}

// A spine, a core and a host taken out of a 3-tier k=8 tree with LIDs assigned: the same
// fabric as those left added afresh, every index following; the LID index is rebuilt on ask.
TEST(FabricTest, KeepNodesInPlaceGivesWhatAddingTheRestAfreshGives) {
  auto f = FatTree3(8);
  ASSERT_TRUE(f.ok());
  uint16_t lid = 1;
  for (NodeId n = 0; n < f->node_count(); ++n) {
    const Node& node = f->node(n);
    const uint32_t first = node.is_switch() ? 0 : 1;
    for (uint32_t p = first; p <= (node.is_switch() ? 0u : node.num_ports); ++p)
      f->mutable_port(f->port_id(n, PortNum(static_cast<uint8_t>(p)))).lid = Lid(lid++);
  }
  f->IndexLids();
  std::vector<bool> keep(f->node_count(), true);
  NodeId spine = kNoNode, core = kNoNode, host = kNoNode;
  for (NodeId n = 0; n < f->node_count(); ++n) {
    const std::string& name = f->node(n).name;
    if (spine == kNoNode && name.starts_with("pod01-spine-")) spine = n;
    if (name.starts_with("core-") && (core == kNoNode || n > core)) core = n;
    if (!f->node(n).is_switch()) host = n;
  }
  ASSERT_NE(spine, kNoNode);
  ASSERT_NE(core, kNoNode);
  ASSERT_NE(host, kNoNode);
  keep[spine] = keep[core] = keep[host] = false;
  const Fabric want = Afresh(*f, keep);
  Fabric got = *f;
  got.KeepNodes(keep);
  ExpectSame(got, want, *f, keep);
  // The LID index is empty until rebuilt, as for a fabric built afresh.
  const Lid some = got.port(got.node(0).first_port + (got.node(0).is_switch() ? 0 : 1)).lid;
  EXPECT_FALSE(got.FindPortByLid(some).has_value());
  got.IndexLids();
  EXPECT_TRUE(got.FindPortByLid(some).has_value());
  // Keeping everything changes nothing; a shorter mask drops the nodes past its end.
  Fabric all = want;
  all.KeepNodes(std::vector<bool>(want.node_count(), true));
  ExpectSame(all, want, want, std::vector<bool>(want.node_count(), true));
  std::vector<bool> first_half(want.node_count() / 2, true);
  std::vector<bool> first_half_full(want.node_count(), false);
  for (size_t i = 0; i < first_half.size(); ++i) first_half_full[i] = true;
  Fabric half = want;
  half.KeepNodes(first_half);
  ExpectSame(half, Afresh(want, first_half_full), want, first_half_full);
}


// Copies share the GUID and name indexes until one adds, renumbers or indexes a port GUID:
// each then finds what it holds and not what the other did since.
TEST(FabricTest, CopiesFindTheirOwnNodesAfterEitherChanges) {
  auto made = FatTree2(4);
  ASSERT_TRUE(made.ok());
  const Fabric original = *made;
  const Guid first = original.node(0).guid;
  const std::string first_name = original.node(0).name;

  Fabric grown = original;
  auto added = grown.AddNode(NodeKind::kCa, Guid{0xabcdef}, 1, "extra", "extra host");
  ASSERT_TRUE(added.ok());
  ASSERT_TRUE(grown.SetPortGuid(grown.port_id(*added, PortNum{1}), Guid{0xabcdef1}).ok());
  EXPECT_EQ(grown.FindNode(Guid{0xabcdef}), *added);
  EXPECT_EQ(grown.FindNodeByName("extra"), *added);
  EXPECT_TRUE(grown.FindPort(Guid{0xabcdef1}).has_value());
  EXPECT_FALSE(original.FindNode(Guid{0xabcdef}).has_value());
  EXPECT_FALSE(original.FindNodeByName("extra").has_value());
  EXPECT_FALSE(original.FindPort(Guid{0xabcdef1}).has_value());
  // A GUID the original holds is still refused in the copy.
  EXPECT_FALSE(grown.AddNode(NodeKind::kCa, first, 1, "again", "again").ok());

  Fabric kept = original;
  std::vector<bool> keep(kept.node_count(), true);
  keep[0] = false;
  kept.KeepNodes(keep);
  EXPECT_FALSE(kept.FindNode(first).has_value());
  EXPECT_FALSE(kept.FindNodeByName(first_name).has_value());
  EXPECT_EQ(original.FindNode(first), NodeId{0});
  EXPECT_EQ(original.FindNodeByName(first_name), NodeId{0});
  EXPECT_EQ(kept.FindNode(original.node(1).guid), NodeId{0});

  Fabric unshared = original;
  unshared.Unshare();
  EXPECT_EQ(unshared.FindNode(first), NodeId{0});

  // A Fabric moved from finds nothing, and can be built again.
  Fabric from = original;
  Fabric to = std::move(from);
  EXPECT_EQ(to.FindNode(first), NodeId{0});
  from = Fabric();
  EXPECT_FALSE(from.FindNode(first).has_value());
  EXPECT_TRUE(from.AddNode(NodeKind::kSwitch, first, 4, "again", "again").ok());
  EXPECT_EQ(from.FindNode(first), NodeId{0});
}

}  // namespace
}  // namespace ibsm
