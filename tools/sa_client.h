// A Subnet Administration client (IBA 15) over any mad::Transport: sends one SA request to
// the SA's LID and hands back the answer's status and records. Multi-MAD answers arrive as
// RMPP, which the transports reassemble in user space (mad/rmpp.h), so a GetTable of any
// size works on hardware, on ibsim (whose preload library carries no kernel RMPP but does
// carry the 256-byte segments) and on the in-process simulator alike. ibsmctl's `sa`
// commands and the end-to-end tests read whole tables through it.
//
// Threading: Query runs on the transport's io_context thread; `done` runs there too.
// QueryAndWait drives the io_context itself and is for tools and tests only.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include <boost/asio/io_context.hpp>

#include "base/status.h"
#include "base/types.h"
#include "mad/attr/sa_records.h"
#include "mad/mad.h"
#include "mad/transport.h"

namespace ibsm::tools {

struct SaRequest {
  uint8_t method = mad::method::kGetTable;
  uint16_t attr_id = 0;
  uint32_t attr_mod = 0;
  uint64_t comp_mask = 0;
  uint64_t sm_key = 0;  // the SA key, for requests that want to be trusted
  std::vector<uint8_t> record;  // the request's record template (at most 200 bytes)
};

// An SA answer as the client reads it.
struct SaReply {
  uint8_t method = 0;
  uint16_t status = 0;       // MAD status: 0, or an SA status (mad::sa_status) / MAD error
  uint16_t attr_offset = 0;  // 8-byte words per record
  // The records in the answer, each attr_offset * 8 bytes (a Get answer has at most one).
  std::vector<std::vector<uint8_t>> records;
};

// Parses an SA response: a single MAD (possibly sent at its real length) or a reassembled
// RMPP message. InvalidArgument when the bytes are not an SA response.
Result<SaReply> ParseSaReply(std::span<const uint8_t> bytes);

// "NO_RECORDS", "REQ_INVALID", ..., or "status 0x...." for the rest.
std::string SaStatusName(uint16_t status);

class SaClient {
 public:
  // REQUIRES: `transport` outlives the client. `sa_lid`: where the SA is (the port's SM LID).
  SaClient(mad::Transport& transport, Lid sa_lid, mad::SendOptions send = {});

  // Sends `req`; `done` gets the parsed answer (an SA status is a reply, not an error) or
  // the transport's error (kTimeout after every retry).
  void Query(const SaRequest& req, std::function<void(Result<SaReply>)> done);

  // Query, then runs `io` until the answer is in. For tools and tests.
  Result<SaReply> QueryAndWait(boost::asio::io_context& io, const SaRequest& req);

  Lid sa_lid() const { return sa_lid_; }

 private:
  mad::Transport& transport_;
  Lid sa_lid_;
  mad::SendOptions send_;
};

// The request for every record of type R matching `templ` under `comp_mask`.
template <typename R>
SaRequest TableRequest(const R& templ = R{}, uint64_t comp_mask = 0,
                       uint8_t method = mad::method::kGetTable) {
  SaRequest req;
  req.method = method;
  req.attr_id = mad::SaRecord<R>::kAttrId;
  req.comp_mask = comp_mask;
  req.record.resize(mad::Layout<R>::kSize);
  mad::EncodeRecord(templ, req.record);
  return req;
}

// Decodes every record of `reply` as R. InvalidArgument on the first that does not decode.
template <typename R>
Result<std::vector<R>> DecodeRecords(const SaReply& reply) {
  std::vector<R> out;
  out.reserve(reply.records.size());
  for (const auto& rec : reply.records) {
    if (rec.size() < mad::Layout<R>::kSize)
      return InvalidArgument("SA record of " + std::to_string(rec.size()) + " bytes, " +
                             std::string(mad::Layout<R>::kName) + " needs " +
                             std::to_string(mad::Layout<R>::kSize));
    IBSM_ASSIGN_OR_RETURN(R r, mad::DecodeRecord<R>(rec));
    out.push_back(std::move(r));
  }
  return out;
}

}  // namespace ibsm::tools
