#include "fabric/fabric.h"

#include <array>

#include <fmt/format.h>

namespace ibsm {

std::string_view NodeKindName(NodeKind k) {
  switch (k) {
    case NodeKind::kCa: return "CA";
    case NodeKind::kSwitch: return "Switch";
    case NodeKind::kRouter: return "Router";
  }
  return "Unknown";
}

namespace {
struct WidthName {
  LinkWidth w;
  std::string_view n;
};
constexpr std::array<WidthName, 5> kWidths = {{{LinkWidth::k1x, "1x"},
                                               {LinkWidth::k2x, "2x"},
                                               {LinkWidth::k4x, "4x"},
                                               {LinkWidth::k8x, "8x"},
                                               {LinkWidth::k12x, "12x"}}};
struct SpeedName {
  LinkSpeed s;
  std::string_view n;
  double lane_gbps;
};
constexpr std::array<SpeedName, 9> kSpeeds = {{{LinkSpeed::kSdr, "SDR", 2.0},
                                               {LinkSpeed::kDdr, "DDR", 4.0},
                                               {LinkSpeed::kQdr, "QDR", 8.0},
                                               {LinkSpeed::kFdr10, "FDR10", 10.0},
                                               {LinkSpeed::kFdr, "FDR", 13.64},
                                               {LinkSpeed::kEdr, "EDR", 25.0},
                                               {LinkSpeed::kHdr, "HDR", 50.0},
                                               {LinkSpeed::kNdr, "NDR", 100.0},
                                               {LinkSpeed::kXdr, "XDR", 200.0}}};
}  // namespace

std::string_view LinkWidthName(LinkWidth w) {
  for (auto& e : kWidths)
    if (e.w == w) return e.n;
  return "?x";
}
std::string_view LinkSpeedName(LinkSpeed s) {
  for (auto& e : kSpeeds)
    if (e.s == s) return e.n;
  return "?";
}
std::optional<LinkWidth> ParseLinkWidth(std::string_view s) {
  for (auto& e : kWidths)
    if (e.n == s) return e.w;
  return std::nullopt;
}
std::optional<LinkSpeed> ParseLinkSpeed(std::string_view s) {
  for (auto& e : kSpeeds)
    if (e.n == s) return e.s;
  return std::nullopt;
}
double LaneGbps(LinkSpeed s) {
  for (auto& e : kSpeeds)
    if (e.s == s) return e.lane_gbps;
  return 0;
}

Result<NodeId> Fabric::AddNode(NodeKind kind, Guid guid, uint8_t num_ports, std::string name,
                               std::string description) {
  if (index().by_node_guid.count(guid)) {
    return AlreadyExists("node GUID " + ToString(guid) + " is already in the fabric");
  }
  NodeId id = static_cast<NodeId>(nodes_.size());
  Node n;
  n.kind = kind;
  n.num_ports = num_ports;
  n.guid = guid;
  n.system_image_guid = guid;
  n.name = std::move(name);
  n.description = std::move(description);
  n.first_port = static_cast<PortId>(ports_.size());
  for (uint32_t p = 0; p <= num_ports; ++p) {
    Port port;
    port.node = id;
    port.num = PortNum{static_cast<uint8_t>(p)};
    ports_.push_back(port);
  }
  Index& ix = mutable_index();
  if (!n.name.empty()) ix.by_name.emplace(n.name, id);
  nodes_.push_back(std::move(n));
  ix.by_node_guid.emplace(guid, id);
  return id;
}

Status Fabric::Connect(NodeId x, PortNum a, NodeId y, PortNum b) {
  if (x >= nodes_.size() || y >= nodes_.size()) return InvalidArgument("no such node");
  if (a.value() == 0 || a.value() > nodes_[x].num_ports) {
    return InvalidArgument("port " + ToString(a) + " out of range on " + nodes_[x].name);
  }
  if (b.value() == 0 || b.value() > nodes_[y].num_ports) {
    return InvalidArgument("port " + ToString(b) + " out of range on " + nodes_[y].name);
  }
  PortId pa = port_id(x, a), pb = port_id(y, b);
  if (pa == pb) return InvalidArgument("a port cannot be cabled to itself");
  if (ports_[pa].peer == pb && ports_[pb].peer == pa) return Status::Ok();
  if (ports_[pa].peer != kNoPort || ports_[pb].peer != kNoPort) {
    return InvalidArgument("port already cabled: " + nodes_[x].name + "[" + ToString(a) +
                           "] <-> " + nodes_[y].name + "[" + ToString(b) + "]");
  }
  ports_[pa].peer = pb;
  ports_[pb].peer = pa;
  return Status::Ok();
}

void Fabric::Reserve(size_t nodes, size_t ports) {
  nodes_.reserve(nodes);
  ports_.reserve(ports);
  Index& ix = mutable_index();
  ix.by_node_guid.reserve(nodes);
  ix.by_name.reserve(nodes);
}

void Fabric::KeepNodes(const std::vector<bool>& keep) {
  std::vector<NodeId> new_id(nodes_.size(), kNoNode);
  std::vector<PortId> new_port(ports_.size(), kNoPort);
  NodeId nodes = 0;
  PortId ports = 0;
  for (NodeId n = 0; n < nodes_.size(); ++n) {
    if (n >= keep.size() || !keep[n]) continue;
    new_id[n] = nodes++;
    for (uint32_t p = 0; p <= nodes_[n].num_ports; ++p) new_port[nodes_[n].first_port + p] = ports++;
  }
  // Each kept item moves to the same index or a lower one: compacted in one forward pass.
  for (PortId p = 0; p < ports_.size(); ++p) {
    if (new_port[p] == kNoPort) continue;
    Port port = ports_[p];
    port.node = new_id[port.node];
    if (port.peer != kNoPort) port.peer = new_port[port.peer];
    ports_[new_port[p]] = port;
  }
  ports_.resize(ports);
  for (NodeId n = 0; n < nodes_.size(); ++n) {
    if (new_id[n] == kNoNode) continue;
    if (new_id[n] != n) nodes_[new_id[n]] = std::move(nodes_[n]);
    nodes_[new_id[n]].first_port = new_port[nodes_[new_id[n]].first_port];
  }
  nodes_.resize(nodes);
  // Each index's values renumbered, its entries for what went erased; true if any was.
  auto renumber = [](auto& index, const std::vector<uint32_t>& to) {
    bool erased = false;
    for (auto it = index.begin(); it != index.end();) {
      if (to[it->second] == UINT32_MAX) {
        it = index.erase(it);
        erased = true;
      } else {
        it->second = to[it->second];
        ++it;
      }
    }
    return erased;
  };
  Index& ix = mutable_index();
  renumber(ix.by_node_guid, new_id);
  renumber(ix.by_port_guid, new_port);
  // A name two nodes share names the first: where that one went, the first kept one.
  if (renumber(ix.by_name, new_id))
    for (NodeId n = 0; n < nodes_.size(); ++n)
      if (!nodes_[n].name.empty()) ix.by_name.emplace(nodes_[n].name, n);
  by_lid_.clear();
}

const Fabric::Index& Fabric::index() const {
  static const Index kEmpty;
  return index_ ? *index_ : kEmpty;
}

// Only this Fabric holds `index_` when its count is 1, and only a Fabric that holds it could
// be copied meanwhile: changed in place then, copied otherwise (the others keep reading theirs).
Fabric::Index& Fabric::mutable_index() {
  if (!index_) {
    index_ = std::make_shared<Index>();
  } else if (index_.use_count() > 1) {
    index_ = std::make_shared<Index>(*index_);
  }
  return *index_;
}

void Fabric::Unshare() { mutable_index(); }

void Fabric::Disconnect(PortId p) {
  PortId q = ports_[p].peer;
  if (q != kNoPort) ports_[q].peer = kNoPort;
  ports_[p].peer = kNoPort;
}

Status Fabric::SetPortGuid(PortId p, Guid guid) {
  const auto& known = index().by_port_guid;
  if (auto it = known.find(guid); it != known.end()) {
    if (it->second != p)
      return AlreadyExists("port GUID " + ToString(guid) + " is already in the fabric");
    ports_[p].guid = guid;
    return Status::Ok();
  }
  auto [it, inserted] = mutable_index().by_port_guid.emplace(guid, p);
  if (!inserted && it->second != p) {
    return AlreadyExists("port GUID " + ToString(guid) + " is already in the fabric");
  }
  ports_[p].guid = guid;
  return Status::Ok();
}

std::optional<NodeId> Fabric::FindNode(Guid g) const {
  const auto& ix = index().by_node_guid;
  auto it = ix.find(g);
  if (it == ix.end()) return std::nullopt;
  return it->second;
}

std::optional<NodeId> Fabric::FindNodeByName(std::string_view name) const {
  const auto& ix = index().by_name;
  auto it = ix.find(std::string(name));
  if (it == ix.end()) return std::nullopt;
  return it->second;
}

std::optional<PortId> Fabric::FindPort(Guid g) const {
  const auto& ix = index().by_port_guid;
  auto it = ix.find(g);
  if (it == ix.end()) return std::nullopt;
  return it->second;
}

std::optional<PortId> Fabric::FindPortByLid(Lid lid) const {
  if (lid.value() >= by_lid_.size() || by_lid_[lid.value()] == kNoPort) return std::nullopt;
  return by_lid_[lid.value()];
}

void Fabric::IndexLids() {
  by_lid_.assign(kMaxUnicastLid + 1, kNoPort);
  for (PortId p = 0; p < ports_.size(); ++p) {
    const Port& port = ports_[p];
    if (!IsUnicast(port.lid)) continue;
    const Node& n = nodes_[port.node];
    if (n.is_switch() && port.num.value() != 0) continue;
    uint32_t count = 1u << port.lmc;
    for (uint32_t i = 0; i < count && port.lid.value() + i <= kMaxUnicastLid; ++i)
      by_lid_[port.lid.value() + i] = p;
  }
}

size_t Fabric::switch_count() const {
  size_t c = 0;
  for (auto& n : nodes_) c += n.is_switch();
  return c;
}
size_t Fabric::ca_count() const {
  size_t c = 0;
  for (auto& n : nodes_) c += n.kind == NodeKind::kCa;
  return c;
}
size_t Fabric::link_count() const {
  size_t c = 0;
  for (PortId p = 0; p < ports_.size(); ++p)
    if (ports_[p].peer != kNoPort && ports_[p].peer > p) ++c;
  return c;
}

std::string DescribeNode(const Fabric& fabric, NodeId n) {
  const Node& node = fabric.node(n);
  return fmt::format("{} ({})", node.name, ToString(node.guid));
}

}  // namespace ibsm
