// The Subnet Administrator's front (sm/sa/sa_server.h): decoding and checking each request,
// dispatching it by attribute, PathRecord and MultiPathRecord through sm/sa_path, framing
// and packing the answers, and the SaSnapshot's lookups. The fabric's records are collected
// in sa_records.cc, ServiceRecords and InformInfo answered in sa_services.cc, multicast in
// sa_multicast.cc.
#include "sm/sa/sa_server.h"

#include <algorithm>
#include <array>
#include <functional>

#include "base/log.h"
#include "mad/attr/class_port_info.h"
#include "mad/attr/path_record.h"
#include "mad/rmpp.h"
#include "base/log_limit.h"
#include "sm/sa/sa_pack.h"
#include "sm/sa/sa_path.h"
#include "sm/sa/sa_server_internal.h"

namespace ibsm::sm {
namespace {

using mad::Layout;
using mad::SaRecord;
using sa_internal::Collector;
using sa_internal::CollectGuidInfos;
using sa_internal::CollectLfts;
using sa_internal::CollectLinks;
using sa_internal::CollectNodes;
using sa_internal::CollectPKeys;
using sa_internal::CollectPortInfos;
using sa_internal::CollectSl2Vls;
using sa_internal::CollectSmInfos;
using sa_internal::CollectSwitchInfos;
using sa_internal::CollectVlArbs;
using sa_internal::Frame;
using sa_internal::kNoStatus;
using sa_internal::Query;

// A PathRecord takes 64 bytes: 8 words, unpadded (PathRecord and MultiPathRecord answers).
constexpr uint16_t kPathAttrOffset = mad::Layout<mad::PathRecord>::kSize / 8;

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

}  // namespace

namespace sa_internal {

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

}  // namespace sa_internal

namespace {

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
                   ha::SaRows* store)
    : transport_(transport),
      options_(options),
      clock_(clock),
      store_(store),
      inform_(transport, options.inform, store) {}


void SaServer::Publish(std::shared_ptr<const SaSnapshot> snapshot) {
  if (!snapshot) return;
  snapshot_ = std::move(snapshot);
  // Subscribers whose port left the fabric get no more Reports (OpenSM drops them too).
  inform_.DropGone(snapshot_->fabric());
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
    // SL2VL and VLArb tables as read once per node (sm/model/qos_tables.h); none until read.
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
