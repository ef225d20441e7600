// What the SA's answer files share (sm/sa/sa_server.cc, sm/sa/sa_records.cc, sm/sa/sa_services.cc);
// not for other code: the decoded request, the collector that matches records against it,
// the response framing, and the collectors of the records that describe the fabric.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <vector>

#include "mad/attr/sa_records.h"
#include "mad/mad.h"
#include "sm/sa/sa_pack.h"
#include "sm/sa/sa_server.h"

namespace ibsm::sm::sa_internal {

using mad::Layout;
using mad::SaRecord;

inline constexpr uint16_t kNoStatus = mad::mad_status::kOk;

// What one request asks, decoded once.
struct Query {
  mad::SaMad mad;
  std::span<const uint8_t> data;  // the request's record template (200 bytes)
  bool enhanced = false;          // PortInfoRecord CapabilityMask "bits set" matching
  bool trusted = false;           // presented the SA key
  bool get = false;               // Get (one record) rather than GetTable
  PortId requester = kNoPort;     // the end port owning the request's source LID
};

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

// An SA response to `req_msg` (request `req`) with the given method, status and attribute
// offset, its data left zero.
mad::MadMessage Frame(const mad::MadMessage& req_msg, const mad::SaMad& req, uint8_t method,
                      uint16_t status, uint16_t attr_offset);

// The answer to a Get or GetTable from what `c` collected: a Get that found no record or
// several gets NO_RECORDS / TOO_MANY_RECORDS; else the records framed at R's attribute
// offset (GetTable as RMPP), NO_RESOURCES when they cannot be packed. Errors are counted by
// status, records sent in `records_sent`.
template <typename R>
mad::MadMessage AnswerCollected(const mad::MadMessage& msg, const mad::SaMad& req,
                                const Query& q, Collector<R>& c, SaCounters& counters) {
  const auto resp = static_cast<uint8_t>(req.hdr.method | mad::method::kResponseBit);
  auto error = [&](uint16_t status) {
    ++counters.by_error[status];
    return Frame(msg, req, resp, status, 0);
  };
  if (q.get && c.count() != 1)
    return error(c.count() == 0 ? mad::sa_status::kNoRecords : mad::sa_status::kTooManyRecords);
  counters.records_sent += c.count();
  auto out = PackRecords(Frame(msg, req, resp, kNoStatus, SaRecord<R>::kAttrOffset), q.get,
                         c.TakePayload(), counters);
  return out ? std::move(*out) : error(mad::sa_status::kNoResources);
}

// The records that describe the fabric (sm/sa/sa_records.cc): each adds to `c` every record of
// its type in snapshot `s` that the requester may see, until `c` asks to stop.
void CollectNodes(const SaSnapshot& s, const Query& q, Collector<mad::NodeRecord>& c);
void CollectPortInfos(const SaSnapshot& s, const Query& q, Collector<mad::PortInfoRecord>& c);
void CollectSwitchInfos(const SaSnapshot& s, const Query& q,
                        Collector<mad::SwitchInfoRecord>& c);
void CollectLfts(const SaSnapshot& s, const Query& q, Collector<mad::LftRecord>& c);
void CollectSmInfos(const SaSnapshot& s, const Query& q,
                    const std::vector<mad::SmInfoRecord>& others,
                    Collector<mad::SmInfoRecord>& c);
void CollectLinks(const SaSnapshot& s, const Query& q, Collector<mad::LinkRecord>& c);
void CollectGuidInfos(const SaSnapshot& s, const Query& q, Collector<mad::GuidInfoRecord>& c);
void CollectPKeys(const SaSnapshot& s, const Query& q, Collector<mad::PKeyTableRecord>& c);
void CollectSl2Vls(const SaSnapshot& s, const Query& q, Collector<mad::Sl2VlTableRecord>& c);
void CollectVlArbs(const SaSnapshot& s, const Query& q,
                   Collector<mad::VlArbitrationTableRecord>& c);

}  // namespace ibsm::sm::sa_internal
