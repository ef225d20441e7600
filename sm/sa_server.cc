#include "sm/sa_server.h"

#include <algorithm>
#include <array>
#include <functional>

#include "base/log.h"
#include "mad/attr/class_port_info.h"
#include "mad/attr/path_record.h"
#include "mad/rmpp.h"
#include "base/log_limit.h"
#include "sm/sa_pack.h"
#include "sm/sa_path.h"

namespace ibsm::sm {
namespace {

using mad::Layout;
using mad::SaRecord;

constexpr uint16_t kNoStatus = mad::mad_status::kOk;
// A PathRecord takes 64 bytes: 8 words, unpadded (PathRecord and MultiPathRecord answers).
constexpr uint16_t kPathAttrOffset = mad::Layout<mad::PathRecord>::kSize / 8;

// What one request asks, decoded once.
struct Query {
  mad::SaMad mad;
  std::span<const uint8_t> data;  // the request's record template (200 bytes)
  bool enhanced = false;          // PortInfoRecord CapabilityMask "bits set" matching
  bool trusted = false;           // presented the SA key
  bool get = false;               // Get (one record) rather than GetTable
  PortId requester = kNoPort;     // the end port owning the request's source LID
};

// Whether the requester may see end port `p` of node `n`: switches are the fabric's and
// visible to all; a CA or router port only to a requester sharing a partition with it
// (OpenSM filters NodeRecord, PortInfoRecord and P_KeyTableRecord the same way).
bool Visible(const SaSnapshot& s, const Query& q, NodeId n, PortId p) {
  if (!s.partitioned || q.trusted) return true;
  if (s.fabric().node(n).is_switch()) return true;
  if (q.requester == kNoPort) return false;
  return s.SharePartition(q.requester, p);
}

// Collects the records of type R that match a query, packed at the attribute offset.
template <typename R>
class Collector {
 public:
  explicit Collector(const Query& q) : q_(q) {}

  // Adds `r` if it matches. Returns false once a Get has seen two matches (no point going on).
  // Components in `ignore` (mask bits) are not compared: a CA's tables are found by LID
  // whatever port number the request names (OpenSM: "the SA should figure it out").
  bool Add(const R& r, uint64_t ignore = 0) {
    std::array<uint8_t, Layout<R>::kSize> buf{};
    mad::EncodeRecord(r, buf);
    if (!mad::Matches<R>(q_.mad.comp_mask & ~ignore, q_.data, buf, q_.enhanced)) return true;
    ++count_;
    payload_.insert(payload_.end(), buf.begin(), buf.end());
    payload_.resize(payload_.size() + kStride - buf.size(), 0);
    return !(q_.get && count_ > 1);
  }
  size_t count() const { return count_; }
  std::vector<uint8_t> TakePayload() { return std::move(payload_); }

  static constexpr size_t kStride = size_t{SaRecord<R>::kAttrOffset} * 8;

 private:
  const Query& q_;
  size_t count_ = 0;
  std::vector<uint8_t> payload_;
};

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

// The tables the SM read of node `n` (sm/qos_tables.h), or null.
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

template <typename R>
using CollectFn = void (*)(const SaSnapshot&, const Query&, Collector<R>&);

// Runs one record type's collector and frames the answer's status and payload.
struct Found {
  uint16_t status = kNoStatus;
  uint16_t attr_offset = 0;
  size_t count = 0;
  std::vector<uint8_t> payload;
  MultiPathStats multipath;     // MultiPathRecord: what the query cost
  bool multipath_over = false;  // refused for kMultiPathMaxPortPairs
};

template <typename R, typename Fn = CollectFn<R>>
Found Run(const SaSnapshot& s, const Query& q, Fn fn) {
  Collector<R> c(q);
  fn(s, q, c);
  Found f;
  f.attr_offset = SaRecord<R>::kAttrOffset;
  f.count = c.count();
  if (q.get && c.count() == 0) f.status = mad::sa_status::kNoRecords;
  if (q.get && c.count() > 1) f.status = mad::sa_status::kTooManyRecords;
  if (f.status == kNoStatus) f.payload = c.TakePayload();
  return f;
}

mad::MadMessage Frame(const mad::MadMessage& req_msg, const mad::SaMad& req, uint8_t method,
                      uint16_t status, uint16_t attr_offset) {
  mad::SaMad resp;
  resp.hdr = req.hdr;
  resp.hdr.method = method;
  resp.hdr.status = status;
  resp.attr_offset = attr_offset;
  resp.comp_mask = req.comp_mask;
  resp.sm_key = 0;  // C15-0.1.5: responses carry SM_Key 0
  mad::MadMessage out;
  out.bytes.resize(mad::kMadSize);
  mad::EncodeSa(resp, out.bytes);
  out.addr = req_msg.addr;
  out.addr.qkey = mad::kQp1QKey;
  if (out.addr.qpn == 0) out.addr.qpn = 1;
  return out;
}

// PathRecord (Get/GetTable) and MultiPathRecord (GetMulti/GetTable) through sm/sa_path.
// The requester is the end port owning the request's source LID.
Found RunPaths(const SaSnapshot& s, const Query& q, const mad::MadMessage& msg) {
  Found f;
  f.attr_offset = kPathAttrOffset;
  PathSnapshot ps;
  ps.fabric = &s.fabric();
  ps.lids = s.lids.get();
  ps.tables = s.tables.get();
  ps.subnet_prefix = s.subnet_prefix;
  ps.packet_life_time = s.packet_life_time;
  ps.port_mtu = s.port_mtu;
  if (!ps.lids || !ps.tables) {
    f.status = mad::sa_status::kNoResources;
    return f;
  }
  const PortId requester = ps.lids->owner(msg.addr.lid);
  if (s.partitioned && s.pkeys) {
    // OpenSM: the requester must share a partition with both ends, and the ends with each
    // other; the path's P_Key is one the ends share (the SA key sees every pair).
    const bool trusted = q.trusted;
    ps.partitions = [&s, trusted](PortId req, PortId src, PortId dst,
                                  std::optional<uint16_t> requested) -> std::optional<uint16_t> {
      auto a = s.pkeys->members.find(src);
      auto b = s.pkeys->members.find(dst);
      if (a == s.pkeys->members.end() || b == s.pkeys->members.end()) return std::nullopt;
      if (!trusted && (req == kNoPort || !s.SharePartition(req, src) ||
                       !s.SharePartition(req, dst)))
        return std::nullopt;
      return SharedPKey(a->second, b->second, requested);
    };
    ps.partition_sl = [&s](uint16_t pkey) -> uint8_t {
      auto it = s.pkeys->sl_by_pkey.find(pkey);
      return it == s.pkeys->sl_by_pkey.end() ? 0 : it->second;
    };
  }
  ps.qos_policy = s.qos_policy.get();
  if (s.qos_enabled) ps.sl2vl = s.qos.get();
  Result<std::vector<mad::PathRecord>> paths = std::vector<mad::PathRecord>{};
  if (q.mad.hdr.attr_id == mad::sa_attr::kPathRecord) {
    mad::PathRecord req;
    if (!mad::DecodeFrom(q.data, &req).ok()) {
      f.status = mad::sa_status::kReqInvalid;
      return f;
    }
    PathQueryOptions o;
    o.get = q.get;
    paths = QueryPaths(ps, req, q.mad.comp_mask, requester, o);
  } else {
    // A GetMulti request may arrive reassembled from RMPP: its GIDs run past one MAD.
    auto req = mad::DecodeMultiPathRequest(
        std::span<const uint8_t>(msg.bytes).subspan(mad::kSaHeaderSize));
    if (!req.ok()) {
      f.status = mad::sa_status::kReqInvalid;
      return f;
    }
    paths = QueryMultiPaths(ps, *req, q.mad.comp_mask, requester, &f.multipath);
    f.multipath_over = !paths.ok() && paths.status().code() == StatusCode::kResourceExhausted;
  }
  if (!paths.ok()) {
    f.status = SaStatusForPathError(paths.status());
    return f;
  }
  f.count = paths->size();
  if (q.get && f.count == 0) {
    f.status = mad::sa_status::kNoRecords;
    return f;
  }
  constexpr size_t kStride = size_t{kPathAttrOffset} * 8;
  f.payload.resize(f.count * kStride, 0);
  for (size_t i = 0; i < f.count; ++i)
    mad::EncodeTo((*paths)[i], std::span<uint8_t>(f.payload).subspan(i * kStride, kStride));
  return f;
}

}  // namespace

std::vector<uint8_t> LinkMtus(const Fabric& fabric, const std::vector<DiscoveredNode>& nodes) {
  std::vector<uint8_t> out(fabric.port_count(), 0);
  auto cap = [&](PortId p) -> uint8_t {
    const Port& port = fabric.port(p);
    if (port.node >= nodes.size()) return 0;
    const DiscoveredNode& dn = nodes[port.node];
    const size_t num = port.num.value();
    const mad::PortInfo* pi = dn.known_port_info(num);
    return pi ? pi->mtu_cap : 0;
  };
  for (PortId p = 0; p < fabric.port_count(); ++p) {
    uint8_t m = cap(p);
    if (m == 0) continue;
    const Port& port = fabric.port(p);
    if (port.connected()) {
      uint8_t peer = cap(port.peer);
      if (peer != 0) m = std::min(m, peer);
    }
    out[p] = m;
  }
  return out;
}

uint8_t RespTimeValueFor(std::chrono::milliseconds transaction_timeout) {
  const double want_us = static_cast<double>(transaction_timeout.count()) * 1000.0;
  uint8_t v = 8;
  while (v < 31 && 4.096 * static_cast<double>(1ull << v) < want_us) ++v;
  return v;
}

bool SaSnapshot::SharePartition(PortId a, PortId b) const {
  if (!partitioned || !pkeys || a == b) return true;
  auto x = pkeys->members.find(a);
  auto y = pkeys->members.find(b);
  if (x == pkeys->members.end() || y == pkeys->members.end()) return false;
  return SharedPKey(x->second, y->second, std::nullopt).has_value();
}

bool SaSnapshot::HoldsPKey(PortId p, uint16_t pkey) const {
  if (!partitioned || !pkeys) return true;
  auto x = pkeys->members.find(p);
  return x != pkeys->members.end() && x->second.count(pkey & 0x7FFF) > 0;
}

const Fabric& SaSnapshot::fabric() const {
  static const Fabric* const kEmpty = new Fabric();  // never destroyed: read by workers
  return discovery ? discovery->fabric : *kEmpty;
}

const std::vector<DiscoveredNode>& SaSnapshot::nodes() const {
  static const auto* const kEmpty = new std::vector<DiscoveredNode>();
  return discovery ? discovery->nodes : *kEmpty;
}

uint16_t SaSnapshot::RecordLid(NodeId n, PortNum port) const {
  if (n >= fabric().node_count()) return 0;
  const Node& node = fabric().node(n);
  if (node.is_switch()) return fabric().port(n, PortNum{0}).lid.value();
  if (port.value() == 0 || port.value() > node.num_ports) return 0;
  return fabric().port(n, port).lid.value();
}

std::optional<mad::MadMessage> PackRecords(mad::MadMessage out, bool get,
                                           std::vector<uint8_t> payload, SaCounters& counters) {
  if (get) {
    std::copy_n(payload.begin(), std::min(payload.size(), mad::kSaDataSize),
                out.bytes.begin() + mad::kSaHeaderSize);
    return out;
  }
  // GetTableResp and GetMultiResp always travel as RMPP (15.4.4). One segment we frame
  // here; a longer one the transport segments and paces by the receiver's ACKs.
  out.bytes.resize(mad::kSaHeaderSize);
  out.bytes.insert(out.bytes.end(), payload.begin(), payload.end());
  if (out.bytes.size() > mad::kMadSize) {
    ++counters.rmpp_answers;
    return out;
  }
  auto sender = mad::RmppSender::Create(out.bytes, mad::kSaHeaderSize);
  if (!sender.ok()) return std::nullopt;
  mad::MadBytes seg = sender->Segment(1);
  out.bytes.assign(seg.begin(), seg.end());
  return out;
}

SaServer::SaServer(mad::Transport& transport, SaServerOptions options, const Clock& clock,
                   ha::StateStore* store)
    : transport_(transport),
      options_(options),
      clock_(clock),
      store_(store),
      inform_(transport, options.inform, store) {}

namespace {

std::array<uint8_t, mad::Layout<mad::ServiceRecord>::kSize> ServiceWire(
    const mad::ServiceRecord& r) {
  std::array<uint8_t, mad::Layout<mad::ServiceRecord>::kSize> buf{};
  mad::EncodeRecord(r, buf);
  return buf;
}

ha::ServiceKey KeyOf(const mad::ServiceRecord& r) {
  return ha::ServiceKey{r.service_id, r.service_gid, r.service_p_key};
}

}  // namespace

size_t SaServer::ServiceKeyHash::operator()(const ha::ServiceKey& k) const {
  uint64_t h = k.service_id * 0x9E3779B97F4A7C15ull ^ k.pkey;
  for (uint8_t b : k.service_gid) h = (h ^ b) * 0x100000001B3ull;
  return static_cast<size_t>(h);
}

void SaServer::PutService(const mad::ServiceRecord& r, std::optional<int64_t> expires_us,
                          Guid owner) {
  const ha::ServiceKey key = KeyOf(r);
  ServiceList::iterator it;
  if (auto found = service_index_.find(key); found != service_index_.end()) {
    it = found->second;
    if (it->expires_us) service_expiry_.erase(it->expiry);
    it->record = r;
    it->expires_us = expires_us;
  } else {
    it = services_.insert(services_.end(), Service{r, expires_us, owner, {}});
    service_index_.emplace(key, it);
    ++services_by_owner_[owner];
  }
  if (expires_us) it->expiry = service_expiry_.emplace(*expires_us, key);
}

void SaServer::DropService(ServiceList::iterator it) {
  if (it->expires_us) service_expiry_.erase(it->expiry);
  if (auto o = services_by_owner_.find(it->owner); o != services_by_owner_.end() && --o->second == 0)
    services_by_owner_.erase(o);
  service_index_.erase(KeyOf(it->record));
  services_.erase(it);
}

void SaServer::MarkServiceChanged(const ha::ServiceKey& key, bool removed) {
  if (!store_) return;
  if (removed) {
    pending_upserts_.erase(key);
    pending_removals_.insert(key);
  } else {
    pending_removals_.erase(key);
    pending_upserts_.insert(key);
  }
  if (!on_services_dirty_) {
    (void)FlushServices();  // nobody schedules a flush: write through
  } else {
    on_services_dirty_();
  }
}

Status SaServer::FlushServices() {
  if (!store_ || !services_dirty()) return Status();
  std::vector<ha::ServiceRow> upserts;
  for (const ha::ServiceKey& key : pending_upserts_) {
    auto it = service_index_.find(key);
    if (it == service_index_.end()) continue;
    auto wire = ServiceWire(it->second->record);
    upserts.push_back(ha::ServiceRow{key, std::vector<uint8_t>(wire.begin(), wire.end()),
                                     it->second->expires_us});
  }
  std::vector<ha::ServiceKey> removals(pending_removals_.begin(), pending_removals_.end());
  Status st = store_->SaveServiceRecords(upserts, removals);
  if (!st.ok()) {
    // Memory keeps serving them; the next flush writes them (and LoadServices drops records
    // whose lease ran out, so a removal that never reached the file does no harm).
    const uint64_t n = ++counters_.service_state_failures;
    if (ShouldLogOccurrence(n)) {
      Log(LogName::kSa).warn("SA-SR-001 {} ServiceRecord change(s) not written to the state "
                             "file: {} ({} failed writes so far)",
                             upserts.size() + removals.size(), st.ToString(), n);
    }
    return st;
  }
  pending_upserts_.clear();
  pending_removals_.clear();
  return Status();
}

Status SaServer::LoadServices() {
  if (!store_) return Status();
  IBSM_ASSIGN_OR_RETURN(std::vector<ha::ServiceRow> rows, store_->LoadServiceRecords());
  services_.clear();
  service_index_.clear();
  service_expiry_.clear();
  services_by_owner_.clear();
  pending_upserts_.clear();
  pending_removals_.clear();
  for (const ha::ServiceRow& row : rows) {
    auto r = mad::DecodeRecord<mad::ServiceRecord>(row.record);
    if (!r.ok()) return r.status();
    // Who registered it is not in the file: the port it names is the likeliest owner.
    PutService(*r, row.expires_us, Guid{r->GidGuid()});
  }
  size_t dropped = ExpireServices();
  Log(LogName::kSa).info("{} ServiceRecord(s) restored from the state file, {} expired",
                         services_.size(), dropped);
  return Status();
}

size_t SaServer::ExpireServices() {
  const int64_t now = clock_.UnixMicros();
  size_t gone = 0;
  // Memory drops them even if the file cannot: an expired lease is never served.
  while (!service_expiry_.empty() && service_expiry_.begin()->first <= now) {
    const ha::ServiceKey key = service_expiry_.begin()->second;
    DropService(service_index_.at(key));
    MarkServiceChanged(key, /*removed=*/true);
    ++gone;
  }
  counters_.services_expired += gone;
  return gone;
}

std::vector<mad::ServiceRecord> SaServer::services() const {
  std::vector<mad::ServiceRecord> out;
  for (const Service& sv : services_) out.push_back(sv.record);
  return out;
}

// Set registers (or replaces the record with the same ServiceID, ServiceGID and
// ServiceP_Key) and answers GetResp with it; Delete removes the record of that key and
// answers DeleteResp with it; Get/GetTable match by component mask (15.2.5.14, 15.4).
std::optional<mad::MadMessage> SaServer::AnswerService(const mad::MadMessage& msg,
                                                       const mad::SaMad& req,
                                                       std::span<const uint8_t> data) {
  auto error = [&](uint16_t status) {
    ++counters_.by_error[status];
    // SubnAdmSet is answered by SubnAdmGetResp (15.4.2).
    uint8_t method = req.hdr.method == mad::method::kSet
                         ? mad::method::kGetResp
                         : static_cast<uint8_t>(req.hdr.method | mad::method::kResponseBit);
    return Frame(msg, req, method, status, 0);
  };
  auto one = [&](uint8_t method, const mad::ServiceRecord& r) {
    mad::MadMessage out =
        Frame(msg, req, method, kNoStatus, SaRecord<mad::ServiceRecord>::kAttrOffset);
    mad::EncodeRecord(r, std::span<uint8_t>(out.bytes).subspan(mad::kSaHeaderSize));
    ++counters_.records_sent;
    return out;
  };
  ExpireServices();
  const SaSnapshot& s = *snapshot_;
  const int64_t now = clock_.UnixMicros();
  constexpr uint64_t kKey =
      mad::sr_comp::kServiceId | mad::sr_comp::kServiceGid | mad::sr_comp::kServicePKey;
  const bool set = req.hdr.method == mad::method::kSet;
  const bool del = req.hdr.method == mad::method::kDelete;

  auto decoded = mad::DecodeRecord<mad::ServiceRecord>(data);
  if (!decoded.ok()) return error(mad::sa_status::kReqInvalid);
  mad::ServiceRecord want = *decoded;
  const bool trusted = options_.sa_key != 0 && req.sm_key == options_.sa_key;
  const PortId requester = s.lids ? s.lids->owner(msg.addr.lid) : kNoPort;

  if (set) {
    // A registration is named by its ServiceID and ServiceGID; a Set that leaves them out
    // of the mask names nothing (OpenSM refuses it too, with REQ_INVALID; INSUFFICIENT
    // COMPONENTS says what is wrong, as Delete's check below does).
    constexpr uint64_t kNamed = mad::sr_comp::kServiceId | mad::sr_comp::kServiceGid;
    if ((req.comp_mask & kNamed) != kNamed)
      return error(mad::sa_status::kReqInsufficientComponents);
    // What the mask leaves out is not the requester's to choose through the record's bytes:
    // no ServiceP_Key is the default partition's key and no ServiceLease an infinite lease,
    // as OpenSM's set method fills them. The key stored is the key checked below.
    if (!(req.comp_mask & mad::sr_comp::kServicePKey)) want.service_p_key = 0xFFFF;
    if (!(req.comp_mask & mad::sr_comp::kServiceLease))
      want.service_lease = mad::kServiceLeaseInfinite;
  }
  // A Delete names one registration by its key; a wider mask could wipe other clients'.
  if (del && (req.comp_mask & kKey) != kKey)
    return error(mad::sa_status::kReqInsufficientComponents);

  // Set and Delete (OpenSM validate_sr): the ServiceP_Key must be held by the requester and
  // by the service's port, so no host registers into or removes from a partition it is not
  // in.
  if ((set || del) && s.partitioned && !trusted) {
    auto port = want.GidGuid() == 0 ? std::nullopt : s.fabric().FindPort(Guid{want.GidGuid()});
    if (requester == kNoPort || !s.HoldsPKey(requester, want.service_p_key) ||
        (port && !s.HoldsPKey(*port, want.service_p_key))) {
      if (ShouldLogOccurrence(++counters_.service_pkey_refused)) {
        Log(LogName::kSa).info("SA-SR-004 ServiceRecord {:#x} {} from LID {} refused: "
                               "ServiceP_Key {:#06x} is not held by the requester or the "
                               "service port ({} so far)",
                               want.service_id, set ? "Set" : "Delete", msg.addr.lid.value(),
                               want.service_p_key, counters_.service_pkey_refused);
      }
      return error(mad::sa_status::kReqInvalid);
    }
  }
  // A registration with a ServiceKey belongs to whoever knows the key: replacing or
  // deleting it takes the same key (or the SA key). A zero key protects nothing.
  auto key_refused = [&](const mad::ServiceRecord& held) {
    if (trusted) return false;
    bool keyed = std::any_of(held.service_key.begin(), held.service_key.end(),
                             [](uint8_t b) { return b != 0; });
    if (!keyed || held.service_key == want.service_key) return false;
    if (ShouldLogOccurrence(++counters_.service_key_refused)) {
      Log(LogName::kSa).info("SA-SR-005 ServiceRecord {:#x} {} from LID {} refused: another "
                             "ServiceKey than the registration's ({} so far)",
                             held.service_id, set ? "Set" : "Delete", msg.addr.lid.value(),
                             counters_.service_key_refused);
    }
    return true;
  };

  if (set) {
    // The service must live on a port of this subnet.
    auto port = want.GidGuid() == 0 ? std::nullopt : s.fabric().FindPort(Guid{want.GidGuid()});
    if (!port || want.GidPrefix() != s.subnet_prefix) {
      Log(LogName::kSa).debug("ServiceRecord {:#x} names GID {:#x}:{:#x}, not a port here",
                              want.service_id, want.GidPrefix(), want.GidGuid());
      return error(mad::sa_status::kReqInvalidGid);
    }
    std::optional<int64_t> expires;
    if (want.service_lease != mad::kServiceLeaseInfinite)
      expires = now + int64_t{want.service_lease} * 1'000'000;
    const ha::ServiceKey key = KeyOf(want);
    auto held = service_index_.find(key);
    if (held != service_index_.end() && key_refused(held->second->record))
      return error(mad::sa_status::kReqDenied);
    const Guid owner = requester == kNoPort ? Guid{0} : s.fabric().port(requester).guid;
    if (held == service_index_.end()) {
      // A replacement takes nothing more; a new registration must fit both caps.
      auto mine = services_by_owner_.find(owner);
      if (mine != services_by_owner_.end() && mine->second >= options_.services_per_port) {
        const uint64_t n = ++counters_.service_port_cap_refused;
        if (ShouldLogOccurrence(n)) {
          Log(LogName::kSa).warn("SA-SR-006 ServiceRecord {:#x} Set from LID {} refused: its "
                                 "port holds {} registrations already ({} refused so far)",
                                 want.service_id, msg.addr.lid.value(),
                                 options_.services_per_port, n);
        }
        return error(mad::sa_status::kNoResources);
      }
      if (services_.size() >= options_.services_total) {
        const uint64_t n = ++counters_.service_total_cap_refused;
        if (ShouldLogOccurrence(n)) {
          Log(LogName::kSa).warn("SA-SR-007 ServiceRecord {:#x} Set from LID {} refused: the SA "
                                 "holds {} registrations, its limit ({} refused so far)",
                                 want.service_id, msg.addr.lid.value(),
                                 options_.services_total, n);
        }
        return error(mad::sa_status::kNoResources);
      }
    }
    PutService(want, expires, owner);
    MarkServiceChanged(key, /*removed=*/false);
    ++counters_.services_registered;
    return one(mad::method::kGetResp, want);
  }

  if (del) {
    auto held = service_index_.find(KeyOf(want));
    // The key names the registration; the rest of the mask must match it too.
    if (held == service_index_.end() ||
        !mad::Matches<mad::ServiceRecord>(req.comp_mask, data, ServiceWire(held->second->record)))
      return error(mad::sa_status::kNoRecords);
    if (key_refused(held->second->record)) return error(mad::sa_status::kReqDenied);
    mad::ServiceRecord gone = held->second->record;
    DropService(held->second);
    MarkServiceChanged(KeyOf(gone), /*removed=*/true);
    ++counters_.services_deleted;
    return one(mad::method::kDeleteResp, gone);
  }

  if (req.hdr.method != mad::method::kGet && req.hdr.method != mad::method::kGetTable)
    return error(mad::mad_status::kMethodAttrUnsupported);
  Query q;
  q.mad = req;
  q.data = data;
  q.get = req.hdr.method == mad::method::kGet;
  q.trusted = trusted;
  Collector<mad::ServiceRecord> c(q);
  for (const Service& sv : services_) {
    // OpenSM: a requester sees a service only if it holds the service's P_Key.
    if (s.partitioned && !q.trusted && sv.record.service_p_key != 0 &&
        (requester == kNoPort || !s.HoldsPKey(requester, sv.record.service_p_key)))
      continue;
    // The ServiceKey is shown only to the trusted (15.2.5.14; OpenSM sr_rcv_respond), so
    // no one learns the key that guards a registration by reading it. Matching (a Get by
    // ServiceKey) still compares the real key.
    mad::ServiceRecord shown = sv.record;
    uint64_t matched = 0;
    if (!q.trusted) {
      auto wire = ServiceWire(sv.record);
      if (!mad::Matches<mad::ServiceRecord>(req.comp_mask, data, wire)) continue;
      shown.service_key.fill(0);
      matched = ~uint64_t{0};  // compared above, against the real key
    }
    if (!c.Add(shown, matched)) break;
  }
  if (q.get) {
    if (c.count() == 0) return error(mad::sa_status::kNoRecords);
    if (c.count() > 1) return error(mad::sa_status::kTooManyRecords);
  }
  counters_.records_sent += c.count();
  auto out = PackRecords(
      Frame(msg, req, static_cast<uint8_t>(req.hdr.method | mad::method::kResponseBit),
            kNoStatus, SaRecord<mad::ServiceRecord>::kAttrOffset),
      q.get, c.TakePayload(), counters_);
  if (!out) return error(mad::sa_status::kNoResources);
  return out;
}

void SaServer::Publish(std::shared_ptr<const SaSnapshot> snapshot) {
  if (!snapshot) return;
  snapshot_ = std::move(snapshot);
  // Subscribers whose port left the fabric get no more Reports (OpenSM drops them too).
  inform_.DropGone(snapshot_->fabric());
}

// InformInfo: Set only (13.4.8.3), answered GetResp with a copy of the request (Subscribe
// cleared on an error). InformInfoRecord: Get/GetTable by component mask (15.2.5.12).
std::optional<mad::MadMessage> SaServer::AnswerInform(const mad::MadMessage& msg,
                                                      const mad::SaMad& req,
                                                      std::span<const uint8_t> data,
                                                      bool trusted) {
  const SaSnapshot& s = *snapshot_;
  if (req.hdr.attr_id == mad::sa_attr::kInformInfo) {
    if (req.hdr.method != mad::method::kSet) {
      ++counters_.by_error[mad::mad_status::kMethodAttrUnsupported];
      return Frame(msg, req, static_cast<uint8_t>(req.hdr.method | mad::method::kResponseBit),
                   mad::mad_status::kMethodAttrUnsupported, 0);
    }
    auto ii = mad::Decode<mad::InformInfo>(data);
    InformSetAnswer a;
    if (ii.ok()) {
      a = inform_.Set(s.fabric(), s.subnet_prefix, *ii, msg.addr, trusted);
    } else {
      a.status = mad::sa_status::kReqInvalid;
    }
    if (a.status != kNoStatus) ++counters_.by_error[a.status];
    mad::MadMessage out = Frame(msg, req, mad::method::kGetResp, a.status, 0);
    mad::EncodeTo(a.info, std::span<uint8_t>(out.bytes).subspan(mad::kSaHeaderSize));
    return out;
  }
  auto error = [&](uint16_t status) {
    ++counters_.by_error[status];
    return Frame(msg, req, static_cast<uint8_t>(req.hdr.method | mad::method::kResponseBit),
                 status, 0);
  };
  if (req.hdr.method != mad::method::kGet && req.hdr.method != mad::method::kGetTable)
    return error(mad::mad_status::kMethodAttrUnsupported);
  Query q;
  q.mad = req;
  q.data = data;
  q.get = req.hdr.method == mad::method::kGet;
  Collector<mad::InformInfoRecord> c(q);
  for (const mad::InformInfoRecord& r : inform_.Records(trusted))
    if (!c.Add(r)) break;
  if (q.get) {
    if (c.count() == 0) return error(mad::sa_status::kNoRecords);
    if (c.count() > 1) return error(mad::sa_status::kTooManyRecords);
  }
  counters_.records_sent += c.count();
  auto out = PackRecords(
      Frame(msg, req, static_cast<uint8_t>(req.hdr.method | mad::method::kResponseBit),
            kNoStatus, SaRecord<mad::InformInfoRecord>::kAttrOffset),
      q.get, c.TakePayload(), counters_);
  if (!out) return error(mad::sa_status::kNoResources);
  return out;
}

void SaServer::OnRequest(const mad::MadMessage& msg) {
  auto answer = Answer(msg);
  if (!answer) return;
  ++counters_.answered;
  Status st = transport_.Post(std::move(*answer));
  if (!st.ok()) {
    ++counters_.post_failures;
    Log(LogName::kSa).warn("SA-POST-001 answer to LID {} not sent: {}", msg.addr.lid.value(),
                           st.message());
  }
}

std::optional<mad::MadMessage> SaServer::Answer(const mad::MadMessage& msg) {
  ++counters_.requests;
  Query q;
  if (!mad::DecodeSa(msg.bytes, &q.mad).ok()) {
    ++counters_.malformed;
    return std::nullopt;
  }
  const mad::SaMad& req = q.mad;
  ++counters_.by_attribute[req.hdr.attr_id];
  if (req.hdr.is_response()) {
    // A ReportResponse the transport did not match to a Report still waiting (it came
    // after the last retry): the InformManager counts it.
    if (req.hdr.method == mad::method::kReportResp && req.hdr.attr_id == mad::attr::kNotice &&
        req.hdr.mgmt_class == static_cast<uint8_t>(mad::MgmtClass::kSubnAdm)) {
      inform_.OnLateReportResponse(msg);
      return std::nullopt;
    }
    ++counters_.responses_ignored;
    return std::nullopt;
  }
  // An ACK/STOP/ABORT travels with the request method of the transfer it belongs to; the
  // transport consumes those of its own transfers, so any that reaches us is stray.
  if ((req.rmpp_flags & mad::rmpp::kFlagActive) && req.rmpp_type != mad::rmpp::kTypeData) {
    ++counters_.rmpp_control;
    return std::nullopt;
  }
  if (req.hdr.mgmt_class != static_cast<uint8_t>(mad::MgmtClass::kSubnAdm)) {
    ++counters_.malformed;
    return std::nullopt;
  }
  // C15-0.1.5: a request's SM_Key is 0 (untrusted) or the SA key (trusted); any other key
  // is an impostor or a misconfigured client, and is dropped unanswered (OpenSM ERR 1A04).
  // Logged for the first ten and then every thousandth, so a flood cannot fill the log.
  if (req.sm_key != 0 && req.sm_key != options_.sa_key) {
    uint64_t n = ++counters_.sa_key_mismatches;
    if (ShouldLogOccurrence(n)) {
      Log(LogName::kSa).warn("SA-KEY-001 method {:#04x} attribute {:#06x} from LID {} carries "
                             "SM_Key {:#018x}, not the SA key: dropped ({} so far)",
                             req.hdr.method, req.hdr.attr_id, msg.addr.lid.value(), req.sm_key,
                             n);
    }
    return std::nullopt;
  }
  q.data = std::span<const uint8_t>(msg.bytes).subspan(mad::kSaHeaderSize,
                                                        mad::kSaDataSize);
  q.get = req.hdr.method == mad::method::kGet;
  q.enhanced = (req.hdr.attr_mod & mad::kPortInfoCapMaskMatchModifier) != 0;
  q.trusted = options_.sa_key != 0 && req.sm_key == options_.sa_key;
  if (snapshot_ && snapshot_->lids) q.requester = snapshot_->lids->owner(msg.addr.lid);

  const uint8_t resp_method = req.hdr.method | mad::method::kResponseBit;
  auto error = [&](uint16_t status) {
    ++counters_.by_error[status];
    return Frame(msg, req, resp_method, status, 0);
  };

  if (req.hdr.base_version != 1 || req.hdr.class_version != mad::kSaClassVersion) {
    return error(mad::mad_status::kBadVersion);
  }
  // MultiPathRecord is read by GetMulti (o15-0.2.7); GetTable is accepted too, as one
  // MAD's worth of GIDs needs no RMPP request.
  const uint16_t attr = req.hdr.attr_id;
  const bool get_or_table =
      attr == mad::sa_attr::kMultiPathRecord
          ? req.hdr.method == mad::method::kGetMulti || req.hdr.method == mad::method::kGetTable
          : req.hdr.method == mad::method::kGet || req.hdr.method == mad::method::kGetTable;
  bool known_attr = true;
  switch (attr) {
    case mad::sa_attr::kClassPortInfo:
    case mad::sa_attr::kNodeRecord:
    case mad::sa_attr::kPortInfoRecord:
    case mad::sa_attr::kSl2VlTableRecord:
    case mad::sa_attr::kSwitchInfoRecord:
    case mad::sa_attr::kLftRecord:
    case mad::sa_attr::kSmInfoRecord:
    case mad::sa_attr::kLinkRecord:
    case mad::sa_attr::kGuidInfoRecord:
    case mad::sa_attr::kPKeyTableRecord:
    case mad::sa_attr::kVlArbitrationTableRecord:
    case mad::sa_attr::kPathRecord:
    case mad::sa_attr::kMultiPathRecord:
      break;
    default:
      known_attr = false;
  }
  switch (req.hdr.method) {
    case mad::method::kGet:
    case mad::method::kGetTable:
    case mad::method::kSet:
    case mad::method::kDelete:
    case mad::method::kGetMulti:
    case mad::method::kGetTraceTable:
      break;
    default:
      return error(mad::mad_status::kMethodUnsupported);
  }
  if (attr == mad::sa_attr::kServiceRecord) {
    if (!snapshot_) {
      ++counters_.not_ready;
      return error(mad::mad_status::kBusy);
    }
    return AnswerService(msg, req, q.data);
  }
  if (attr == mad::sa_attr::kInformInfo || attr == mad::sa_attr::kInformInfoRecord) {
    if (!snapshot_) {
      ++counters_.not_ready;
      return error(mad::mad_status::kBusy);
    }
    return AnswerInform(msg, req, q.data, q.trusted);
  }
  if (attr == mad::sa_attr::kMcMemberRecord || attr == mad::sa_attr::kMftRecord) {
    if (!snapshot_) {
      ++counters_.not_ready;
      return error(mad::mad_status::kBusy);
    }
    if (attr == mad::sa_attr::kMftRecord) return AnswerMftRecord(msg, req, q.data);
    return AnswerMcMember(msg, req, q.data, q.trusted);
  }
  if (!known_attr || !get_or_table) return error(mad::mad_status::kMethodAttrUnsupported);

  if (!snapshot_) {
    ++counters_.not_ready;
    return error(mad::mad_status::kBusy);
  }
  const SaSnapshot& s = *snapshot_;

  if (attr == mad::sa_attr::kClassPortInfo) {
    if (!q.get) return error(mad::mad_status::kMethodAttrUnsupported);
    mad::ClassPortInfo cpi;
    cpi.base_version = 1;
    cpi.class_version = mad::kSaClassVersion;
    cpi.capability_mask = mad::sa_cap::kIsPortInfoCapMaskMatchSupported |
                          mad::sa_cap::kIsMultiPathSupported |
                          mad::sa_cap::kIsSubnGetSetNoticeSupported |
                          mad::sa_cap::kIsUdMulticastSupported;
    // CapabilityMask2 (15.2.1.3): what this SA does and OpenSM 3.3.23 also claims: the whole
    // PortInfo in PortInfoRecord, its extended speed fields, SendOnlyFullMember joins.
    // (OpenSM also claims alias GUIDs, multicast ServiceRecords, CapabilityMask2 matching,
    // 2x width and HDR, which ibsmd does not serve or has not been checked against.)
    cpi.capability_mask2 = mad::sa_cap2::kIsFullPortInfoRecordSupported |
                           mad::sa_cap2::kIsExtendedSpeedsSupported |
                           mad::sa_cap2::kIsSendOnlyFullMemberSupported;
    cpi.resp_time_value = options_.resp_time_value;
    // No redirection: requests stay on QP1 with the GSI Q_Key; Reports come from QP1 too.
    cpi.redirect_qp = 1;
    cpi.redirect_qkey = mad::kQp1QKey;
    cpi.trap_qkey = mad::kQp1QKey;
    mad::MadMessage out = Frame(msg, req, resp_method, kNoStatus, 0);
    mad::EncodeTo(cpi, std::span<uint8_t>(out.bytes).subspan(mad::kSaHeaderSize));
    return out;
  }

  Found f;
  switch (attr) {
    case mad::sa_attr::kNodeRecord: f = Run<mad::NodeRecord>(s, q, CollectNodes); break;
    case mad::sa_attr::kPortInfoRecord:
      f = Run<mad::PortInfoRecord>(s, q, CollectPortInfos);
      break;
    case mad::sa_attr::kSwitchInfoRecord:
      f = Run<mad::SwitchInfoRecord>(s, q, CollectSwitchInfos);
      break;
    case mad::sa_attr::kLftRecord: f = Run<mad::LftRecord>(s, q, CollectLfts); break;
    case mad::sa_attr::kSmInfoRecord:
      f = Run<mad::SmInfoRecord>(s, q, [this](const SaSnapshot& snap, const Query& query,
                                              Collector<mad::SmInfoRecord>& c) {
        CollectSmInfos(snap, query, other_sms_, c);
      });
      break;
    case mad::sa_attr::kLinkRecord: f = Run<mad::LinkRecord>(s, q, CollectLinks); break;
    case mad::sa_attr::kGuidInfoRecord:
      f = Run<mad::GuidInfoRecord>(s, q, CollectGuidInfos);
      break;
    case mad::sa_attr::kPKeyTableRecord: f = Run<mad::PKeyTableRecord>(s, q, CollectPKeys); break;
    // SL2VL and VLArb tables as read once per node (sm/qos_tables.h); none until read.
    case mad::sa_attr::kSl2VlTableRecord:
      f = Run<mad::Sl2VlTableRecord>(s, q, CollectSl2Vls);
      break;
    case mad::sa_attr::kVlArbitrationTableRecord:
      f = Run<mad::VlArbitrationTableRecord>(s, q, CollectVlArbs);
      break;
    case mad::sa_attr::kPathRecord:
    case mad::sa_attr::kMultiPathRecord: f = RunPaths(s, q, msg); break;
  }
  if (f.multipath.trimmed) ++counters_.multipath_trimmed;
  if (f.multipath_over) {
    const uint64_t n = ++counters_.multipath_refused;
    if (ShouldLogOccurrence(n)) {
      Log(LogName::kSa).info("SA-MP-001 MultiPathRecord from LID {} refused: {} port pairs, "
                             "over the {} one request may ask ({} refused so far)",
                             msg.addr.lid.value(), f.multipath.port_pairs,
                             kMultiPathMaxPortPairs, n);
    }
  }
  if (f.status != kNoStatus) return error(f.status);
  counters_.records_sent += f.count;

  auto out = PackRecords(Frame(msg, req, resp_method, kNoStatus, f.attr_offset), q.get,
                         std::move(f.payload), counters_);
  if (!out) return error(mad::sa_status::kNoResources);
  return out;
}

}  // namespace ibsm::sm
