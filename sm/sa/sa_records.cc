// The SA records that describe the fabric, collected from a published SaSnapshot: NodeRecord,
// PortInfoRecord, SwitchInfoRecord, LFTRecord, SMInfoRecord, LinkRecord, GUIDInfoRecord,
// P_KeyTableRecord, SL2VLTableRecord and VLArbitrationTableRecord, with the partition
// filter that decides which end ports a requester may see. SaServer::Answer
// (sm/sa/sa_server.cc) runs them.
#include <algorithm>
#include <array>
#include <functional>

#include "sm/sa/sa_server_internal.h"

namespace ibsm::sm::sa_internal {
namespace {

// Whether the requester may see end port `p` of node `n`: switches are the fabric's and
// visible to all; a CA or router port only to a requester sharing a partition with it
// (OpenSM filters NodeRecord, PortInfoRecord and P_KeyTableRecord the same way).
bool Visible(const SaSnapshot& s, const Query& q, NodeId n, PortId p) {
  if (!s.partitioned || q.trusted) return true;
  if (s.fabric().node(n).is_switch()) return true;
  if (q.requester == kNoPort) return false;
  return s.SharePartition(q.requester, p);
}

// The request's LID component when the mask selects component 0 (every LID-keyed record
// has its LID there): lets a lookup by LID skip the rest of the fabric.
std::optional<uint16_t> LidKey(const Query& q) {
  if ((q.mad.comp_mask & 1) == 0) return std::nullopt;
  return static_cast<uint16_t>(mad::GetBits(q.data, 0, 16));
}

// Nodes whose records may carry `lid`; every node when the request names none.
std::vector<NodeId> Candidates(const SaSnapshot& s, std::optional<uint16_t> lid) {
  std::vector<NodeId> out;
  if (lid) {
    auto p = s.fabric().FindPortByLid(Lid{*lid});
    if (p) out.push_back(s.fabric().port(*p).node);
    return out;
  }
  out.reserve(s.fabric().node_count());
  for (NodeId n = 0; n < s.fabric().node_count(); ++n) out.push_back(n);
  return out;
}

// Ports of `n` that have records of their own: switch port 0, or CA/router ports with a LID.
std::vector<uint8_t> EndPorts(const SaSnapshot& s, NodeId n) {
  const Node& node = s.fabric().node(n);
  if (node.is_switch()) return {0};
  std::vector<uint8_t> out;
  for (uint8_t p = 1; p <= node.num_ports; ++p)
    if (s.fabric().port(n, PortNum{p}).lid.value() != 0) out.push_back(p);
  return out;
}

}  // namespace

void CollectNodes(const SaSnapshot& s, const Query& q, Collector<mad::NodeRecord>& c) {
  for (NodeId n : Candidates(s, LidKey(q))) {
    if (n >= s.nodes().size()) continue;
    for (uint8_t p : EndPorts(s, n)) {
      const Port& port = s.fabric().port(n, PortNum{p});
      if (!Visible(s, q, n, s.fabric().port_id(n, PortNum{p}))) continue;
      mad::NodeRecord r;
      r.lid = s.RecordLid(n, PortNum{p});
      r.node_info = s.nodes()[n].node_info;
      r.node_info.port_guid = port.guid.value();
      r.node_info.local_port_num = p;
      r.node_description = mad::NodeDescription::From(s.fabric().node(n).description);
      if (!c.Add(r)) return;
    }
  }
}

void CollectPortInfos(const SaSnapshot& s, const Query& q, Collector<mad::PortInfoRecord>& c) {
  for (NodeId n : Candidates(s, LidKey(q))) {
    if (n >= s.nodes().size()) continue;
    const DiscoveredNode& dn = s.nodes()[n];
    const Node& node = s.fabric().node(n);
    uint8_t first = node.is_switch() ? 0 : 1;
    for (uint8_t p = first; p <= node.num_ports; ++p) {
      if (!dn.known_port_info(p)) continue;
      uint16_t lid = s.RecordLid(n, PortNum{p});
      if (lid == 0) continue;
      if (!Visible(s, q, n, s.fabric().port_id(n, PortNum{p}))) continue;
      mad::PortInfoRecord r;
      r.lid = lid;
      r.port_num = p;
      r.port_info = dn.port_info[p];
      // The M_Key is shown only to a requester holding the SA key (OpenSM does the same).
      if (!q.trusted) r.port_info.m_key = 0;
      if (!c.Add(r)) return;
    }
  }
}

void CollectSwitchInfos(const SaSnapshot& s, const Query& q,
                        Collector<mad::SwitchInfoRecord>& c) {
  for (NodeId n : Candidates(s, LidKey(q))) {
    if (n >= s.nodes().size() || !s.fabric().node(n).is_switch()) continue;
    mad::SwitchInfoRecord r;
    r.lid = s.RecordLid(n, PortNum{0});
    if (r.lid == 0) continue;
    r.switch_info = s.nodes()[n].switch_info;
    if (!c.Add(r)) return;
  }
}

void CollectLfts(const SaSnapshot& s, const Query& q, Collector<mad::LftRecord>& c) {
  if (!s.tables) return;
  // A named block skips the others.
  std::optional<uint16_t> block;
  if (q.mad.comp_mask & 2) block = static_cast<uint16_t>(mad::GetBits(q.data, 16, 16));
  for (NodeId n : Candidates(s, LidKey(q))) {
    if (!s.fabric().node(n).is_switch()) continue;
    const routing::SwitchTable* t = s.tables->table(n);
    if (!t || t->lft.empty()) continue;
    uint16_t lid = s.RecordLid(n, PortNum{0});
    if (lid == 0) continue;
    size_t blocks = (t->lft.size() + mad::kLftBlockSize - 1) / mad::kLftBlockSize;
    for (size_t b = 0; b < blocks; ++b) {
      if (block && *block != b) continue;
      mad::LftRecord r;
      r.lid = lid;
      r.block_num = static_cast<uint16_t>(b);
      r.lft.port.fill(mad::kLftDropPort);
      for (size_t i = 0; i < mad::kLftBlockSize && b * mad::kLftBlockSize + i < t->lft.size(); ++i)
        r.lft.port[i] = t->lft[b * mad::kLftBlockSize + i];
      if (!c.Add(r)) return;
    }
  }
}

// The serving SM's own record first, then every other SM it knows (OpenSM's order).
void CollectSmInfos(const SaSnapshot& s, const Query& q,
                    const std::vector<mad::SmInfoRecord>& others,
                    Collector<mad::SmInfoRecord>& c) {
  if (s.sm_lid.value() != 0) {
    mad::SmInfoRecord r;
    r.lid = s.sm_lid.value();
    r.sm_info.guid = s.sm_port_guid.value();
    r.sm_info.sm_key = q.trusted ? s.sm_key : 0;  // IBA 14.4.1: the key only to the trusted
    r.sm_info.act_count = s.act_count;
    r.sm_info.priority = s.sm_priority;
    r.sm_info.sm_state = s.sm_state;
    if (!c.Add(r)) return;
  }
  for (mad::SmInfoRecord r : others) {
    if (!q.trusted) r.sm_info.sm_key = 0;
    if (!c.Add(r)) return;
  }
}

// A cable is listed only when the requester may see both ends, and two CAs cabled back to
// back share a partition (OpenSM: requester and both ends share a P_Key).
void CollectLinks(const SaSnapshot& s, const Query& q, Collector<mad::LinkRecord>& c) {
  std::optional<uint16_t> from = LidKey(q);
  for (NodeId n : Candidates(s, from)) {
    const Node& node = s.fabric().node(n);
    for (uint8_t p = 1; p <= node.num_ports; ++p) {
      const Port& port = s.fabric().port(n, PortNum{p});
      if (!port.connected()) continue;
      const Port& peer = s.fabric().port(port.peer);
      const PortId here = s.fabric().port_id(n, PortNum{p});
      if (!Visible(s, q, n, here) || !Visible(s, q, peer.node, port.peer)) continue;
      if (s.partitioned && !q.trusted && !node.is_switch() &&
          !s.fabric().node(peer.node).is_switch() && !s.SharePartition(here, port.peer))
        continue;
      mad::LinkRecord r;
      r.from_lid = s.RecordLid(n, PortNum{p});
      r.from_port_num = p;
      r.to_port_num = static_cast<uint8_t>(peer.num.value());
      r.to_lid = s.RecordLid(peer.node, peer.num);
      if (r.from_lid == 0 || r.to_lid == 0) continue;
      if (!c.Add(r)) return;
    }
  }
}

// GUIDInfo: the SM assigns no alias GUIDs, so every end port holds exactly its port GUID at
// index 0 (IBA 14.2.5.5: GUID 0 is the EUI-64 port GUID), in block 0. Only ports the
// requester may see (OpenSM: it shares a P_Key with the port).
void CollectGuidInfos(const SaSnapshot& s, const Query& q, Collector<mad::GuidInfoRecord>& c) {
  for (NodeId n : Candidates(s, LidKey(q))) {
    for (uint8_t p : EndPorts(s, n)) {
      if (!Visible(s, q, n, s.fabric().port_id(n, PortNum{p}))) continue;
      mad::GuidInfoRecord r;
      r.lid = s.RecordLid(n, PortNum{p});
      if (r.lid == 0) continue;
      r.block_num = 0;
      r.guid_info.guid[0] = s.fabric().port(n, PortNum{p}).guid.value();
      if (!c.Add(r)) return;
    }
  }
}

// Every programmed P_Key table, block by block up to its last used block: end ports (a
// switch's as port 0) and, with enforcement, switch ports facing end ports.
void CollectPKeys(const SaSnapshot& s, const Query& q, Collector<mad::PKeyTableRecord>& c) {
  if (!s.pkeys) return;
  for (NodeId n : Candidates(s, LidKey(q))) {
    const Node& node = s.fabric().node(n);
    for (uint8_t p = 0; p <= node.num_ports; ++p) {
      PortId id = s.fabric().port_id(n, PortNum{p});
      auto it = s.pkeys->tables.find(id);
      if (it == s.pkeys->tables.end()) continue;
      uint16_t lid = s.RecordLid(n, PortNum{node.is_switch() ? uint8_t{0} : p});
      if (lid == 0) continue;
      if (!Visible(s, q, n, id)) continue;
      const std::vector<uint16_t>& t = it->second;
      size_t used = 1;
      for (size_t i = 0; i < t.size(); ++i)
        if (t[i] != 0) used = i / mad::kPKeyBlockSize + 1;
      for (size_t b = 0; b < used; ++b) {
        mad::PKeyTableRecord r;
        r.lid = lid;
        r.block_num = static_cast<uint16_t>(b);
        r.port_num = p;
        for (size_t i = 0; i < mad::kPKeyBlockSize; ++i)
          if (b * mad::kPKeyBlockSize + i < t.size())
            r.pkey_table.pkey[i] = t[b * mad::kPKeyBlockSize + i];
        if (!c.Add(r)) return;
      }
    }
  }
}

// The tables the SM read of node `n` (sm/model/qos_tables.h), or null.
const NodeQos* QosOf(const SaSnapshot& s, NodeId n) {
  if (!s.qos) return nullptr;
  auto it = s.qos->find(s.fabric().node(n).guid);
  return it == s.qos->end() ? nullptr : it->second.get();
}

// SL2VLTableRecord components 1 and 2 (input and output port).
constexpr uint64_t kSl2VlPorts = (1u << 1) | (1u << 2);
// VLArbitrationTableRecord component 1 (output port).
constexpr uint64_t kVlArbPort = 1u << 1;

void CollectSl2Vls(const SaSnapshot& s, const Query& q, Collector<mad::Sl2VlTableRecord>& c) {
  for (NodeId n : Candidates(s, LidKey(q))) {
    const NodeQos* qos = QosOf(s, n);
    if (!qos) continue;
    const bool sw = s.fabric().node(n).is_switch();
    for (size_t out = 0; out < qos->ports.size(); ++out) {
      const auto& tables = qos->ports[out].sl2vl;
      for (size_t in = 0; in < tables.size(); ++in) {
        if (!tables[in]) continue;
        mad::Sl2VlTableRecord r;
        r.lid = s.RecordLid(n, PortNum{static_cast<uint8_t>(out)});
        if (r.lid == 0) continue;
        if (!Visible(s, q, n, s.fabric().port_id(n, PortNum{static_cast<uint8_t>(out)}))) continue;
        r.in_port_num = static_cast<uint8_t>(in);
        r.out_port_num = static_cast<uint8_t>(out);
        r.table = *tables[in];
        if (!c.Add(r, sw ? 0 : kSl2VlPorts)) return;
      }
    }
  }
}

void CollectVlArbs(const SaSnapshot& s, const Query& q,
                   Collector<mad::VlArbitrationTableRecord>& c) {
  for (NodeId n : Candidates(s, LidKey(q))) {
    const NodeQos* qos = QosOf(s, n);
    if (!qos) continue;
    const bool sw = s.fabric().node(n).is_switch();
    for (size_t port = 0; port < qos->ports.size(); ++port) {
      for (size_t b = 0; b < 4; ++b) {
        const auto& t = qos->ports[port].vlarb[b];
        if (!t) continue;
        mad::VlArbitrationTableRecord r;
        r.lid = s.RecordLid(n, PortNum{static_cast<uint8_t>(port)});
        if (r.lid == 0) continue;
        if (!Visible(s, q, n, s.fabric().port_id(n, PortNum{static_cast<uint8_t>(port)}))) continue;
        r.output_port_num = static_cast<uint8_t>(port);
        r.block_num = static_cast<uint8_t>(b + 1);
        r.table = *t;
        if (!c.Add(r, sw ? 0 : kVlArbPort)) return;
      }
    }
  }
}

}  // namespace ibsm::sm::sa_internal
