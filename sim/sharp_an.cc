#include "sim/sharp_an.h"

#include <algorithm>
#include <set>

#include "base/log.h"
#include "mad/attr/path_record.h"

namespace ibsm::sim {
namespace {
constexpr uint16_t kOk = mad::mad_status::kOk;
constexpr uint16_t kInvalid = mad::mad_status::kInvalidField;
constexpr uint16_t kUnsupported = mad::mad_status::kMethodAttrUnsupported;
}  // namespace

SharpSim::SharpSim(const Fabric& fabric, SimAnOptions options) : options_(options) {
  for (NodeId n = 0; n < fabric.node_count(); ++n) {
    auto sp = AggregationNodeSwitchPort(fabric, n);
    if (!sp) continue;
    An an;
    an.an = n;
    an.sw = fabric.port(*sp).node;
    an.sw_port = fabric.port(*sp).num;
    by_an_[n] = ans_.size();
    by_sw_[an.sw] = ans_.size();
    by_guid_[fabric.node(n).guid] = ans_.size();
    ans_.push_back(std::move(an));
  }
}

const SharpSim::An* SharpSim::FindAn(Guid an_guid) const {
  auto it = by_guid_.find(an_guid);
  return it == by_guid_.end() ? nullptr : &ans_[it->second];
}

void SharpSim::SetLimits(Guid an_guid, uint8_t radix, uint16_t tree_table_size) {
  auto it = by_guid_.find(an_guid);
  if (it != by_guid_.end()) limits_[it->second] = {radix, tree_table_size};
}

SharpSim::Limits SharpSim::LimitsOf(const An& an) const {
  auto it = limits_.find(static_cast<size_t>(&an - ans_.data()));
  return it != limits_.end() ? it->second : Limits{options_.tree_radix, options_.tree_table_size};
}

void SharpSim::OnNodeReset(NodeId node) {
  // A switch power cycle resets the AN in its ASIC as well (and its enable bit).
  auto reset = [](An& an) {
    an.enabled = false;
    an.qps.clear();
    an.trees.clear();
    an.next_qpn = 0x100;
  };
  if (auto it = by_sw_.find(node); it != by_sw_.end()) reset(ans_[it->second]);
  if (auto it = by_an_.find(node); it != by_an_.end()) reset(ans_[it->second]);
}

void SharpSim::AddCapabilities(NodeId node, mad::GeneralInfoCapabilities& caps) const {
  if (by_sw_.count(node) == 0) return;
  caps.Set(mad::general_cap::kSharpAggregationNode);
  if (options_.special_port_marking) caps.Set(mad::general_cap::kSpecialPortsMarking);
}

void SharpSim::SetMarked(NodeId an_node, bool marked) {
  if (auto it = by_an_.find(an_node); it != by_an_.end()) ans_[it->second].marked = marked;
}

std::optional<uint16_t> SharpSim::HandleSmp(NodeId node, PortNum arrival, uint8_t method,
                                            uint16_t attr_id, uint32_t attr_mod,
                                            std::span<uint8_t> data) {
  (void)arrival;
  auto it = by_sw_.find(node);
  if (it == by_sw_.end()) return std::nullopt;  // legacy switch or CA: not ours
  An& an = ans_[it->second];
  if (attr_id == mad::vendor_attr::kMlnxExtendedPortInfo) {
    // Only the AN-facing port has an AN to enable; other ports answer the bit clear.
    const bool an_port = attr_mod == an.sw_port.value();
    if (method == mad::method::kSet) {
      auto want = mad::Decode<mad::MlnxExtendedPortInfo>(data);
      if (!want.ok()) return kInvalid;
      if (want->port_recovered) return kInvalid;  // "On SET, only 0 is valid"
      if (!an_port && want->sharp_an_en) return kInvalid;
      if (an_port) {
        if (an.enabled && !want->sharp_an_en) {
          an.qps.clear();  // disabling the AN drops what it held
          an.trees.clear();
        }
        an.enabled = want->sharp_an_en != 0;
      }
    } else if (method != mad::method::kGet) {
      return kUnsupported;
    }
    std::fill(data.begin(), data.end(), uint8_t{0});
    // The AN port reads as recovered, so an SM that writes the Get back unchanged is refused.
    mad::MlnxExtendedPortInfo out{static_cast<uint8_t>(an_port && an.enabled),
                                  static_cast<uint8_t>(an_port)};
    if (an_port && an.marked && options_.special_port_marking) {
      out.is_special_port = 1;
      out.special_port_type = mad::special_port_type::kAggregationNode;
    }
    mad::EncodeTo(out, data);
    return kOk;
  }
  return std::nullopt;
}

bool SharpSim::HandleGmp(NodeId node, PortNum arrival, std::span<uint8_t> bytes) {
  (void)arrival;
  if (bytes.size() < mad::kMadSize ||
      bytes[1] != static_cast<uint8_t>(mad::MgmtClass::kAggMgmt))
    return false;
  auto it = by_an_.find(node);
  if (it == by_an_.end()) return false;
  An& an = ans_[it->second];
  if (!an.enabled) {
    ++counters_.ignored;
    return false;
  }
  mad::AmMad m;
  if (!mad::DecodeAm(bytes, &m).ok()) return false;
  ++counters_.requests;
  uint16_t status = kOk;
  std::span<uint8_t> data(m.data);
  const uint8_t method = m.hdr.method;
  if (m.hdr.class_version != mad::kAmClassVersion) {
    status = mad::mad_status::kBadVersion;
  } else if (method != mad::method::kGet && method != mad::method::kSet) {
    status = mad::mad_status::kMethodUnsupported;
  } else {
    const bool set = method == mad::method::kSet;
    switch (m.hdr.attr_id) {
      case mad::am_attr::kAnInfo: status = set ? kUnsupported : AnInfoGet(an, data); break;
      case mad::am_attr::kQpAllocation: status = set ? QpAlloc(an, data) : kUnsupported; break;
      case mad::am_attr::kQpcConfig:
        status = set ? QpcSet(an, data) : QpcGet(an, m.hdr.attr_mod, data);
        break;
      case mad::am_attr::kTreeConfig:
        status = set ? TreeSet(an, data) : TreeGet(an, data);
        break;
      case mad::am_attr::kResourceCleanup: status = set ? Cleanup(an, data) : kUnsupported; break;
      default: status = kUnsupported; break;
    }
  }
  if (status != kOk) ++counters_.refused;
  if (auto lose = lose_.find(m.hdr.attr_id);
      method == mad::method::kSet && lose != lose_.end() && lose->second > 0) {
    --lose->second;
    ++counters_.answers_lost;
    return false;  // applied (or refused); nothing comes back
  }
  m.hdr.method = mad::method::kGetResp;
  m.hdr.status = status;
  mad::EncodeAm(m, bytes);
  Log(LogName::kSim).trace("AN {} attr {:#x} method {:#x} status {:#x}", an.an, m.hdr.attr_id,
                           method, status);
  return true;
}

uint16_t SharpSim::AnInfoGet(const An& an, std::span<uint8_t> data) const {
  Limits l = LimitsOf(an);
  mad::AnInfo info;
  info.tree_table_size = l.tree_table_size;
  info.tree_radix = l.radix;
  size_t used = 0;
  for (const auto& [id, t] : an.trees) used = std::max(used, t.child_qpn.size());
  info.tree_radix_used = static_cast<uint8_t>(used);
  info.sharp_version_active = options_.sharp_version;
  info.sharp_version_supported = options_.sharp_version;
  info.max_groups = l.tree_table_size;
  info.max_qps = options_.max_qps;
  info.line_size = 128;
  mad::EncodeTo(info, data);
  return kOk;
}

uint16_t SharpSim::QpAlloc(An& an, std::span<uint8_t> data) {
  auto req = mad::Decode<mad::QpAllocation>(data);
  if (!req.ok() || req->count == 0 || req->count > mad::kQpAllocationMax) return kInvalid;
  if (req->opcode == mad::qp_alloc_op::kRelease) {
    // All or nothing: every QPN must be held by that job and tree.
    for (size_t i = 0; i < req->count; ++i) {
      auto q = an.qps.find(req->qpn[i]);
      if (q == an.qps.end() || q->second.job_id != req->job_id || q->second.tree_id != req->tree_id)
        return kInvalid;
    }
    for (size_t i = 0; i < req->count; ++i) an.qps.erase(req->qpn[i]);
    return kOk;
  }
  if (req->opcode != mad::qp_alloc_op::kAllocate) return kInvalid;
  if (an.qps.size() + req->count > options_.max_qps) return kInvalid;
  mad::QpAllocation resp = *req;
  resp.qpn.fill(0);
  for (size_t i = 0; i < req->count; ++i) {
    while (an.qps.count(an.next_qpn) || an.next_qpn == 0) an.next_qpn = (an.next_qpn + 1) & 0xFFFFFF;
    Qp qp;
    qp.tree_id = req->tree_id;
    qp.job_id = req->job_id;
    qp.qpc.qpn = an.next_qpn;
    qp.qpc.tree_id = req->tree_id;
    an.qps[an.next_qpn] = qp;
    resp.qpn[i] = an.next_qpn;
    an.next_qpn = (an.next_qpn + 1) & 0xFFFFFF;
  }
  mad::EncodeTo(resp, data);
  return kOk;
}

const char* SharpSim::IncompleteRcField(const mad::QpcConfig& c) {
  if (c.transport != mad::qp_transport::kRc) return "transport";
  if (!mad::IsValidMtu(c.mtu)) return "mtu";
  if ((c.pkey & 0x7FFF) == 0) return "pkey";  // base 0 is no partition (IBA 10.9.1.2)
  if (c.qkey == 0) return "qkey";
  if (c.send_psn == 0 || c.send_psn >= mad::kPsnLimit) return "send_psn";
  if (c.recv_psn == 0 || c.recv_psn >= mad::kPsnLimit) return "recv_psn";
  if (c.remote_lid == 0 || c.remote_lid >= 0xC000) return "remote_lid";
  if (c.remote_guid == 0) return "remote_guid";
  if (c.local_ack_timeout == 0) return "local_ack_timeout";
  return nullptr;
}

uint16_t SharpSim::QpcSet(An& an, std::span<uint8_t> data) {
  auto req = mad::Decode<mad::QpcConfig>(data);
  if (!req.ok()) return kInvalid;
  auto it = an.qps.find(req->qpn);
  if (it == an.qps.end() || req->tree_id != it->second.tree_id) return kInvalid;
  if (req->state == mad::qp_state::kReady) {
    if (const char* bad = IncompleteRcField(*req)) {
      Log(LogName::kSim).debug("AN {} QPCConfig of QP {:#x} refused: {} unset or invalid", an.an,
                               req->qpn, bad);
      return kInvalid;
    }
  } else if (req->state != mad::qp_state::kReset) {
    return kInvalid;
  }
  it->second.qpc = *req;
  return kOk;
}

uint16_t SharpSim::QpcGet(const An& an, uint32_t mod, std::span<uint8_t> data) const {
  auto req = mad::Decode<mad::QpcConfig>(data);
  if (mod != 0 || !req.ok()) return kInvalid;
  auto it = an.qps.find(req->qpn);
  if (it == an.qps.end()) return kInvalid;
  mad::EncodeTo(it->second.qpc, data);
  return kOk;
}

uint16_t SharpSim::TreeSet(An& an, std::span<uint8_t> data) {
  auto req = mad::Decode<mad::TreeConfig>(data);
  if (!req.ok() || req->num_children > mad::kTreeConfigMaxChildren) return kInvalid;
  const Limits l = LimitsOf(an);
  auto owned = [&](uint32_t qpn) {
    auto q = an.qps.find(qpn);
    return q != an.qps.end() && q->second.tree_id == req->tree_id;
  };
  auto existing = an.trees.find(req->tree_id);
  Tree t;
  switch (req->opcode) {
    case mad::tree_op::kWriteTree:
      if (existing == an.trees.end() && an.trees.size() >= l.tree_table_size) return kInvalid;
      break;
    case mad::tree_op::kAddChildren:
    case mad::tree_op::kRemoveChildren:
    case mad::tree_op::kSetParent:
      if (existing == an.trees.end()) return kInvalid;
      t = existing->second;
      break;
    default: return kInvalid;
  }
  if (req->opcode == mad::tree_op::kWriteTree || req->opcode == mad::tree_op::kSetParent) {
    if (req->parent_qpn != 0 && !owned(req->parent_qpn)) return kInvalid;
    t.parent_qpn = req->parent_qpn;
  }
  if (req->opcode == mad::tree_op::kWriteTree) {
    t.state = req->state;
    t.mode = req->mode;
    t.child_qpn.clear();
  }
  for (size_t i = 0; i < req->num_children; ++i) {
    const uint32_t q = req->child_qpn[i];
    if (!owned(q) || q == t.parent_qpn) return kInvalid;
    if (req->opcode == mad::tree_op::kRemoveChildren) {
      std::erase(t.child_qpn, q);
      continue;
    }
    const size_t idx = req->child_index[i];
    if (idx >= l.radix) return kInvalid;
    if (t.child_qpn.size() <= idx) t.child_qpn.resize(idx + 1, 0);
    t.child_qpn[idx] = q;
  }
  // No holes and no QP twice: a child index names a slot the tree really has.
  std::vector<uint32_t> seen = t.child_qpn;
  std::sort(seen.begin(), seen.end());
  if ((!seen.empty() && seen.front() == 0) ||
      std::adjacent_find(seen.begin(), seen.end()) != seen.end())
    return kInvalid;
  an.trees[req->tree_id] = std::move(t);
  return kOk;
}

// The request's data names the tree and the first child wanted (mad/attr/sharp.h); the
// modifier is not looked at, so a Get addressed by modifier finds no tree 0.
uint16_t SharpSim::TreeGet(const An& an, std::span<uint8_t> data) const {
  auto req = mad::Decode<mad::TreeConfig>(data);
  if (!req.ok()) return kInvalid;
  const uint16_t id = req->tree_id;
  const size_t first = req->record_locator;
  auto it = an.trees.find(id);
  if (it == an.trees.end()) return kInvalid;
  const Tree& t = it->second;
  mad::TreeConfig r;
  r.opcode = mad::tree_op::kWriteTree;
  r.state = t.state;
  r.tree_id = id;
  r.record_locator = static_cast<uint8_t>(first);
  r.mode = t.mode;
  r.parent_qpn = t.parent_qpn;
  size_t n = first < t.child_qpn.size() ? std::min(t.child_qpn.size() - first, mad::kTreeConfigMaxChildren) : 0;
  r.num_children = static_cast<uint8_t>(n);
  for (size_t i = 0; i < n; ++i) {
    r.child_index[i] = static_cast<uint8_t>(first + i);
    r.child_qpn[i] = t.child_qpn[first + i];
  }
  mad::EncodeTo(r, data);
  return kOk;
}

uint16_t SharpSim::Cleanup(An& an, std::span<uint8_t> data) {
  auto req = mad::Decode<mad::ResourceCleanup>(data);
  if (!req.ok()) return kInvalid;
  switch (req->scope) {
    case mad::cleanup_scope::kAll:
      an.trees.clear();
      an.qps.clear();
      return kOk;
    case mad::cleanup_scope::kJob: {
      // The job's QPs, and the trees they carried.
      std::set<uint16_t> trees;
      for (const auto& [qpn, qp] : an.qps)
        if (qp.job_id == req->job_id) trees.insert(qp.tree_id);
      std::erase_if(an.qps, [&](const auto& kv) { return kv.second.job_id == req->job_id; });
      for (uint16_t t : trees) an.trees.erase(t);
      return kOk;
    }
    case mad::cleanup_scope::kTree:
      an.trees.erase(req->tree_id);
      std::erase_if(an.qps, [&](const auto& kv) { return kv.second.tree_id == req->tree_id; });
      return kOk;
    case mad::cleanup_scope::kQp: {
      auto q = an.qps.find(req->qpn);
      if (q == an.qps.end() || q->second.job_id != req->job_id || q->second.tree_id != req->tree_id)
        return kInvalid;
      // A QP a tree still names is in use: free the tree (or its child slot) first.
      if (auto t = an.trees.find(req->tree_id); t != an.trees.end()) {
        const Tree& tree = t->second;
        if (tree.parent_qpn == req->qpn ||
            std::find(tree.child_qpn.begin(), tree.child_qpn.end(), req->qpn) != tree.child_qpn.end())
          return kInvalid;
      }
      an.qps.erase(q);
      return kOk;
    }
    default: return kInvalid;
  }
}

}  // namespace ibsm::sim
