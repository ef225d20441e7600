#include "tools/sa_client.h"

#include <algorithm>
#include <optional>

#include <fmt/format.h>

namespace ibsm::tools {

Result<SaReply> ParseSaReply(std::span<const uint8_t> bytes) {
  if (bytes.size() < mad::kSaHeaderSize)
    return InvalidArgument(fmt::format("SA answer of {} bytes, shorter than its {}-byte headers",
                                       bytes.size(), mad::kSaHeaderSize));
  // DecodeSa wants a whole MAD; the headers are all it reads from a longer message.
  std::vector<uint8_t> first(bytes.begin(), bytes.begin() + std::min(bytes.size(), mad::kMadSize));
  first.resize(mad::kMadSize, 0);
  mad::SaMad m;
  if (Status s = mad::DecodeSa(first, &m); !s.ok()) return s;
  if (m.hdr.mgmt_class != static_cast<uint8_t>(mad::MgmtClass::kSubnAdm))
    return InvalidArgument(fmt::format("answer of class 0x{:02x}, not SA", m.hdr.mgmt_class));
  if ((m.hdr.method & mad::method::kResponseBit) == 0)
    return InvalidArgument(fmt::format("method 0x{:02x} is not a response", m.hdr.method));

  SaReply r;
  r.method = m.hdr.method;
  r.status = m.hdr.status;
  r.attr_offset = m.attr_offset;
  if (r.status != 0 || r.attr_offset == 0) return r;

  // Where the records end. A reassembled RMPP message is exactly headers + payload; a lone
  // segment says its length in PayloadLength (counted from the SA class header, 36 bytes
  // in); a MAD sent at its real length ends where it ends.
  size_t end = bytes.size();
  constexpr size_t kRmppHeaderEnd = 36;
  bool lone_segment = (m.rmpp_flags & mad::rmpp::kFlagActive) &&
                      (m.rmpp_flags & mad::rmpp::kFlagFirst) &&
                      (m.rmpp_flags & mad::rmpp::kFlagLast) && bytes.size() <= mad::kMadSize;
  if (lone_segment && m.rmpp_data2 > 0)
    end = std::min(end, kRmppHeaderEnd + size_t{m.rmpp_data2});
  // A Get answer carries one record however long the MAD.
  size_t stride = size_t{r.attr_offset} * 8;
  if (r.method == mad::method::kGetResp) end = std::min(end, mad::kSaHeaderSize + stride);
  for (size_t at = mad::kSaHeaderSize; at + stride <= end; at += stride)
    r.records.emplace_back(bytes.begin() + at, bytes.begin() + at + stride);
  return r;
}

std::string SaStatusName(uint16_t status) {
  switch (status) {
    case 0: return "OK";
    case mad::sa_status::kNoResources: return "NO_RESOURCES";
    case mad::sa_status::kReqInvalid: return "REQ_INVALID";
    case mad::sa_status::kNoRecords: return "NO_RECORDS";
    case mad::sa_status::kTooManyRecords: return "TOO_MANY_RECORDS";
    case mad::sa_status::kReqInvalidGid: return "REQ_INVALID_GID";
    case mad::sa_status::kReqInsufficientComponents: return "REQ_INSUFFICIENT_COMPONENTS";
    case mad::sa_status::kReqDenied: return "REQ_DENIED";
    case mad::mad_status::kBusy: return "BUSY";
    case mad::mad_status::kBadVersion: return "BAD_VERSION";
    case mad::mad_status::kMethodUnsupported: return "METHOD_UNSUPPORTED";
    case mad::mad_status::kMethodAttrUnsupported: return "METHOD_ATTR_UNSUPPORTED";
    case mad::mad_status::kInvalidField: return "INVALID_FIELD";
    default: return fmt::format("status 0x{:04x}", status);
  }
}

SaClient::SaClient(mad::Transport& transport, Lid sa_lid, mad::SendOptions send)
    : transport_(transport), sa_lid_(sa_lid), send_(send) {}

void SaClient::Query(const SaRequest& req, std::function<void(Result<SaReply>)> done) {
  if (req.record.size() > mad::kSaDataSize) {
    done(InvalidArgument(fmt::format("SA request record of {} bytes, at most {} fit",
                                     req.record.size(), mad::kSaDataSize)));
    return;
  }
  mad::SaMad m;
  m.hdr.mgmt_class = static_cast<uint8_t>(mad::MgmtClass::kSubnAdm);
  m.hdr.class_version = mad::kSaClassVersion;
  m.hdr.method = req.method;
  m.hdr.attr_id = req.attr_id;
  m.hdr.attr_mod = req.attr_mod;
  m.sm_key = req.sm_key;
  m.comp_mask = req.comp_mask;
  std::copy(req.record.begin(), req.record.end(), m.data.begin());
  mad::MadMessage msg;
  msg.bytes.resize(mad::kMadSize);
  mad::EncodeSa(m, msg.bytes);
  msg.addr.lid = sa_lid_;
  transport_.Send(std::move(msg), send_, [done = std::move(done)](Result<mad::MadMessage> r) {
    if (!r.ok()) {
      done(r.status());
      return;
    }
    done(ParseSaReply(r->bytes));
  });
}

Result<SaReply> SaClient::QueryAndWait(boost::asio::io_context& io, const SaRequest& req) {
  std::optional<Result<SaReply>> got;
  Query(req, [&](Result<SaReply> r) { got = std::move(r); });
  io.restart();
  while (!got && io.run_one() > 0) {
  }
  if (!got) return Unavailable("the io_context ran out of work before the SA answered");
  return std::move(*got);
}

}  // namespace ibsm::tools
