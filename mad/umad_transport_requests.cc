// UmadTransport requests and answers: what a request or an answer must be before the
// dispatcher takes it (mad/mad_dispatcher.h), and how an RMPP answer too big for the MADs
// ibsim carries whole goes out as a transfer.
#include "mad/umad_transport.h"

#include <algorithm>
#include <utility>

#include <boost/asio/post.hpp>

#include "mad/umad_transport_internal.h"

namespace ibsm::mad {

void UmadTransport::Send(MadMessage request, const SendOptions& options, ResponseHandler done) {
  auto fail = [&](Status s) {
    boost::asio::post(io_, [done = std::move(done), s = std::move(s)] { done(s); });
  };
  if (closed_) return fail(Unavailable("transport closed"));
  auto hdr = Decode<MadHeader>(request.bytes);
  if (!hdr.ok()) return fail(InvalidArgument("request: " + hdr.status().message()));
  if (hdr->is_response()) return fail(InvalidArgument("Send of a response; use Post"));
  if (request.bytes.size() < kMadSize) request.bytes.resize(kMadSize, 0);
  dispatcher_.Send(std::move(request), options, std::move(done));
}

bool UmadTransport::TooBigForTheWire(std::span<const uint8_t> mad) const {
  if (wire_mad_size_ >= kMadSize || !IsRmppActive(mad)) return false;
  auto rh = DecodeRmppHeader(mad);
  constexpr uint8_t kOnly = rmpp::kFlagFirst | rmpp::kFlagLast;
  return rh.ok() && rh->type == rmpp::kTypeData && (rh->flags & kOnly) == kOnly &&
         size_t{rmpp::kRmppHeaderEnd} + rh->data2 > wire_mad_size_;
}

Status UmadTransport::Post(MadMessage message) {
  if (closed_) return Unavailable("transport closed");
  auto hdr = Decode<MadHeader>(message.bytes);
  if (!hdr.ok()) return InvalidArgument("post: " + hdr.status().message());
  if (message.bytes.size() <= kMadSize && !TooBigForTheWire(message.bytes)) {
    message.bytes.resize(kMadSize, 0);
    return dispatcher_.Write(std::move(message));
  }
  if (message.bytes.size() <= kMadSize) {
    // A one-segment RMPP answer whose data does not fit the MADs this medium carries whole
    // (ibsim): sent as a transfer of smaller segments instead.
    auto rh = DecodeRmppHeader(message.bytes);
    message.bytes.resize(std::min<size_t>(kMadSize, rmpp::kRmppHeaderEnd + rh->data2));
  }
  return dispatcher_.PostTransfer(std::move(message));
}

}  // namespace ibsm::mad
