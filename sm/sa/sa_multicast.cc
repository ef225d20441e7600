// The SA's multicast attributes (SaServer members kept apart from sa_server.cc):
// MCMemberRecord Set (join/create), Delete (leave), Get/GetTable; MFTRecord Get/GetTable.
#include <algorithm>
#include <array>

#include "base/log.h"
#include "mad/attr/mc_member_record.h"
#include "mad/rmpp.h"
#include "sm/model/multicast_tree.h"
#include "sm/sa/sa_pack.h"
#include "sm/sa/sa_path.h"
#include "sm/sa/sa_server.h"

namespace ibsm::sm {
namespace {

mad::MadMessage McFrame(const mad::MadMessage& req_msg, const mad::SaMad& req, uint8_t method,
                        uint16_t status, uint16_t attr_offset) {
  mad::SaMad resp;
  resp.hdr = req.hdr;
  resp.hdr.method = method;
  resp.hdr.status = status;
  resp.attr_offset = attr_offset;
  resp.comp_mask = req.comp_mask;
  resp.sm_key = 0;  // C15-0.1.5
  mad::MadMessage out;
  out.bytes.resize(mad::kMadSize);
  mad::EncodeSa(resp, out.bytes);
  out.addr = req_msg.addr;
  out.addr.qkey = 0x80010000;  // the GSI Q_Key
  if (out.addr.qpn == 0) out.addr.qpn = 1;
  return out;
}

// Get: one record in place; GetTable: every record, as RMPP (one segment framed here,
// longer answers segmented by the transport).
template <typename R>
std::optional<mad::MadMessage> Records(const mad::MadMessage& msg, const mad::SaMad& req,
                                       const std::vector<R>& records, SaCounters& counters) {
  const bool get = req.hdr.method == mad::method::kGet;
  const uint8_t resp_method = req.hdr.method | mad::method::kResponseBit;
  constexpr size_t kStride = size_t{mad::SaRecord<R>::kAttrOffset} * 8;
  if (get && records.size() != 1) {
    uint16_t st = records.empty() ? mad::sa_status::kNoRecords : mad::sa_status::kTooManyRecords;
    ++counters.by_error[st];
    return McFrame(msg, req, resp_method, st, 0);
  }
  mad::MadMessage out = McFrame(msg, req, resp_method, mad::mad_status::kOk,
                                mad::SaRecord<R>::kAttrOffset);
  counters.records_sent += records.size();
  if (get) {
    mad::EncodeRecord(records[0], std::span<uint8_t>(out.bytes).subspan(mad::kSaHeaderSize));
    return out;
  }
  std::vector<uint8_t> payload(records.size() * kStride, 0);
  for (size_t i = 0; i < records.size(); ++i)
    mad::EncodeRecord(records[i], std::span<uint8_t>(payload).subspan(i * kStride, kStride));
  auto packed = PackRecords(std::move(out), false, std::move(payload), counters);
  if (!packed) {
    ++counters.by_error[mad::sa_status::kNoResources];
    return McFrame(msg, req, resp_method, mad::sa_status::kNoResources, 0);
  }
  return packed;
}

}  // namespace

std::optional<mad::MadMessage> SaServer::AnswerMcMember(const mad::MadMessage& msg,
                                                        const mad::SaMad& req,
                                                        std::span<const uint8_t> data,
                                                        bool trusted) {
  const uint8_t method = req.hdr.method;
  auto error = [&](uint16_t status) {
    ++counters_.by_error[status];
    // SubnAdmSet is answered by SubnAdmGetResp (15.4.2).
    uint8_t m = method == mad::method::kSet ? mad::method::kGetResp
                                            : static_cast<uint8_t>(method | mad::method::kResponseBit);
    return McFrame(msg, req, m, status, 0);
  };
  if (!mcast_) return error(mad::mad_status::kMethodAttrUnsupported);
  auto want = mad::DecodeRecord<mad::McMemberRecord>(data);
  if (!want.ok()) return error(mad::sa_status::kReqInvalid);
  const SaSnapshot& s = *snapshot_;
  // The requester: the port the MAD came from (by its source LID).
  Guid requester{0};
  PortId requester_port = kNoPort;
  if (auto p = s.fabric().FindPortByLid(msg.addr.lid)) {
    requester_port = *p;
    requester = s.fabric().port(*p).guid;
  }
  // Partitions: a requester sees and leaves only groups of its partitions; a joining port
  // must be a member of the group's partition (OpenSM's rules, ERR 1B14).
  PKeyFilter requester_holds;
  if (s.partitioned) {
    requester_holds = [&s, requester_port](uint16_t pkey) {
      return requester_port != kNoPort && s.HoldsPKey(requester_port, pkey);
    };
  }

  if (method == mad::method::kGet || method == mad::method::kGetTable) {
    return Records(msg, req, mcast_->Query(*want, req.comp_mask, trusted, requester_holds),
                   counters_);
  }
  if (method != mad::method::kSet && method != mad::method::kDelete)
    return error(mad::mad_status::kMethodAttrUnsupported);

  McAnswer a;
  if (method == mad::method::kSet) {
    McPortCaps caps;
    if (auto p = s.fabric().FindPort(Guid{want->port_gid_guid})) {
      const Port& port = s.fabric().port(*p);
      caps.port_guid = port.guid;
      if (*p < s.port_mtu.size()) caps.mtu = s.port_mtu[*p];
      // A switch port 0 has no link of its own: no rate to check.
      if (port.num.value() != 0) caps.rate = RateCode(port.width, port.speed);
      if (s.partitioned) {
        const PortId joining = *p;
        caps.holds_pkey = [&s, joining](uint16_t pkey) { return s.HoldsPKey(joining, pkey); };
        // A proxy join: the requester must share a partition with the port (OpenSM).
        if (joining != requester_port &&
            (requester_port == kNoPort || !s.SharePartition(joining, requester_port))) {
          ++counters_.mc_partition_refusals;
          return error(mad::sa_status::kReqInvalid);
        }
      }
    }
    a = mcast_->Join(*want, req.comp_mask, caps, requester);
  } else {
    a = mcast_->Leave(*want, req.comp_mask, requester, requester_holds);
  }
  if (!a.ok()) return error(a.status);
  mad::MadMessage out = McFrame(msg, req,
                                method == mad::method::kSet ? mad::method::kGetResp
                                                            : mad::method::kDeleteResp,
                                mad::mad_status::kOk, mad::SaRecord<mad::McMemberRecord>::kAttrOffset);
  mad::EncodeRecord(a.record, std::span<uint8_t>(out.bytes).subspan(mad::kSaHeaderSize));
  ++counters_.records_sent;
  return out;
}

// MFTRecords of the tables the SM wants the switches to hold for the groups it has now
// (what it programmed, unless a Set failed: that is retried and logged).
std::optional<mad::MadMessage> SaServer::AnswerMftRecord(const mad::MadMessage& msg,
                                                         const mad::SaMad& req,
                                                         std::span<const uint8_t> data) {
  const uint8_t resp_method = req.hdr.method | mad::method::kResponseBit;
  auto error = [&](uint16_t status) {
    ++counters_.by_error[status];
    return McFrame(msg, req, resp_method, status, 0);
  };
  if (req.hdr.method != mad::method::kGet && req.hdr.method != mad::method::kGetTable)
    return error(mad::mad_status::kMethodAttrUnsupported);
  const SaSnapshot& s = *snapshot_;
  std::vector<mad::MftRecord> out;
  if (mcast_) {
    // The plan walks every group's tree: computed once per change of the groups or of the
    // fabric, not once per request.
    const bool same_snapshot =
        !mft_plan_snapshot_.owner_before(snapshot_) && !snapshot_.owner_before(mft_plan_snapshot_);
    if (!mft_plan_ || !same_snapshot || mft_plan_generation_ != mcast_->generation()) {
      mft_plan_ = std::make_shared<const MftPlan>(PlanMfts(s.fabric(), mcast_->groups()));
      mft_plan_snapshot_ = snapshot_;
      mft_plan_generation_ = mcast_->generation();
      ++counters_.mft_plans_computed;
    }
    const MftPlan& plan = *mft_plan_;
    for (const auto& [n, sw] : plan.switches) {
      uint16_t lid = s.RecordLid(n, PortNum{0});
      if (lid == 0 || sw.masks.empty()) continue;
      std::map<uint32_t, mad::MftRecord> blocks;  // (block << 8 | position)
      for (const auto& [mlid, masks] : sw.masks) {
        uint16_t block = static_cast<uint16_t>((mlid - mad::kMulticastLidBase) / 32);
        for (uint32_t pos = 0; pos < sw.positions; ++pos) {
          mad::MftRecord& r = blocks[uint32_t{block} << 8 | pos];
          r.lid = lid;
          r.block_num = block;
          r.position = static_cast<uint8_t>(pos);
          r.mft.port_mask[(mlid - mad::kMulticastLidBase) % 32] = pos < masks.size() ? masks[pos] : 0;
        }
      }
      for (auto& [k, r] : blocks) {
        std::array<uint8_t, mad::Layout<mad::MftRecord>::kSize> wire{};
        mad::EncodeRecord(r, wire);
        if (mad::Matches<mad::MftRecord>(req.comp_mask, data, wire)) out.push_back(r);
      }
    }
  }
  return Records(msg, req, out, counters_);
}

}  // namespace ibsm::sm
