// The fabric model: nodes, ports and the cables between them, as discovered by a sweep or as
// read from a topology file. Indexed by dense ids so a 65,536-host fabric stays compact.
//
// Ownership: a Fabric owns its nodes and ports. Ids are stable for the Fabric's lifetime
// (nodes are never erased; a vanished node is marked absent by the caller building a new
// Fabric). Not thread-safe for writes; const access from many threads is safe.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "base/status.h"
#include "base/types.h"

namespace ibsm {

using NodeId = uint32_t;
using PortId = uint32_t;
inline constexpr NodeId kNoNode = UINT32_MAX;
inline constexpr PortId kNoPort = UINT32_MAX;

enum class NodeKind : uint8_t { kCa = 1, kSwitch = 2, kRouter = 3 };

std::string_view NodeKindName(NodeKind k);  // "CA", "Switch", "Router"

// PortInfo link encodings (IBA 14.2.5.6), kept as the wire values.
enum class LinkWidth : uint8_t { k1x = 1, k4x = 2, k8x = 4, k12x = 8, k2x = 16 };
// Speeds: SDR..QDR from LinkSpeedActive, FDR/EDR from LinkSpeedExtActive, HDR/NDR/XDR
// from the newer extension; the model stores one normalised enum.
enum class LinkSpeed : uint8_t { kSdr = 1, kDdr, kQdr, kFdr10, kFdr, kEdr, kHdr, kNdr, kXdr };

std::string_view LinkWidthName(LinkWidth w);  // "4x"
std::string_view LinkSpeedName(LinkSpeed s);  // "EDR"
std::optional<LinkWidth> ParseLinkWidth(std::string_view s);
std::optional<LinkSpeed> ParseLinkSpeed(std::string_view s);
// Data rate of one lane in Gb/s (after encoding), for rate comparisons.
double LaneGbps(LinkSpeed s);

// PortInfo PortState / PortPhysicalState values.
enum class PortState : uint8_t { kNoChange = 0, kDown = 1, kInit = 2, kArmed = 3, kActive = 4 };

struct Port {
  NodeId node = kNoNode;
  PortNum num{0};
  Guid guid{0};         // port GUID; for switch ports other than 0 this is the node's port 0 GUID
  PortId peer = kNoPort;  // the port at the other end of the cable
  Lid lid{0};           // base LID (end ports and switch port 0)
  uint8_t lmc = 0;
  PortState state = PortState::kDown;
  LinkWidth width = LinkWidth::k4x;
  LinkSpeed speed = LinkSpeed::kEdr;

  bool connected() const { return peer != kNoPort; }
};

struct Node {
  NodeKind kind = NodeKind::kCa;
  uint8_t num_ports = 0;  // physical ports, not counting switch port 0
  Guid guid{0};
  Guid system_image_guid{0};
  uint32_t vendor_id = 0;
  uint16_t device_id = 0;
  uint32_t revision = 0;
  std::string name;         // short id (ibnetdiscover's quoted name, e.g. "leaf-001")
  std::string description;  // NodeDescription text
  PortId first_port = kNoPort;  // ports first_port .. first_port + num_ports (port 0 included)

  bool is_switch() const { return kind == NodeKind::kSwitch; }
};

class Fabric {
 public:
  // Adds a node with ports 0..num_ports (port 0 exists for every node; it is the management
  // port on a switch and unused on a CA). AlreadyExists if the node GUID is taken.
  Result<NodeId> AddNode(NodeKind kind, Guid guid, uint8_t num_ports, std::string name,
                         std::string description);

  // Cables port a of node x to port b of node y. InvalidArgument if a port is out of range
  // or already cabled to a different port; cabling the same pair twice is a no-op.
  Status Connect(NodeId x, PortNum a, NodeId y, PortNum b);
  void Disconnect(PortId p);

  // Pre-sizes storage for `nodes` nodes and `ports` ports (port 0 included) so that building
  // a large fabric does not over-allocate through vector growth. Purely a capacity hint.
  void Reserve(size_t nodes, size_t ports);

  // Sets the GUID of an end port (CA ports each have one; a switch has one, port 0's).
  Status SetPortGuid(PortId p, Guid guid);

  size_t node_count() const { return nodes_.size(); }
  size_t port_count() const { return ports_.size(); }
  const Node& node(NodeId id) const { return nodes_[id]; }
  Node& mutable_node(NodeId id) { return nodes_[id]; }
  const Port& port(PortId id) const { return ports_[id]; }
  Port& mutable_port(PortId id) { return ports_[id]; }
  const std::vector<Node>& nodes() const { return nodes_; }

  // REQUIRES: num <= node(n).num_ports.
  PortId port_id(NodeId n, PortNum num) const { return nodes_[n].first_port + num.value(); }
  const Port& port(NodeId n, PortNum num) const { return ports_[port_id(n, num)]; }

  std::optional<NodeId> FindNode(Guid node_guid) const;
  std::optional<NodeId> FindNodeByName(std::string_view name) const;
  std::optional<PortId> FindPort(Guid port_guid) const;

  // The end port a LID names: a CA port, or a switch's port 0.
  std::optional<PortId> FindPortByLid(Lid lid) const;
  void IndexLids();  // rebuilds the LID index after LIDs change

  // Keeps the nodes with keep[n] set (a node past its end is dropped), in their order, each
  // with its ports in a row: NodeIds and PortIds are renumbered, cables to a node dropped are
  // taken out (their ports keep their other fields), the GUID and name indexes follow, and
  // the LID index is emptied (IndexLids). In place: no node or name is copied.
  void KeepNodes(const std::vector<bool>& keep);

  size_t switch_count() const;
  size_t ca_count() const;
  size_t link_count() const;  // cables, each counted once

  // A copy of a Fabric shares its GUID and name indexes with the original until either adds
  // or renumbers a node (copy on write): copying a model for the routing worker, the SA or
  // adaptive routing, which never change it, no longer rebuilds three hash tables of one
  // entry a node (30,528 nodes at 3-tier k=48). Unshare() makes the copy's own now, for a
  // copy made off the critical path that will be changed later (the repair's spare model).
  void Unshare();


 private:
  std::vector<Node> nodes_;
  std::vector<Port> ports_;
  struct Index {
    std::unordered_map<Guid, NodeId> by_node_guid;
    std::unordered_map<Guid, PortId> by_port_guid;
    std::unordered_map<std::string, NodeId> by_name;
  };
  // Never null, except in a Fabric moved from (index() reads an empty one there).
  std::shared_ptr<Index> index_ = std::make_shared<Index>();
  const Index& index() const;
  Index& mutable_index();  // copied first when another Fabric shares it
  std::vector<PortId> by_lid_;  // index: LID value; kNoPort if unassigned
};

// "leaf-001 (0x0002c90200000001)": a node as log lines and refusals name it.
std::string DescribeNode(const Fabric& fabric, NodeId n);

}  // namespace ibsm
