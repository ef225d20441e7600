#include "mad/rmpp.h"

#include <algorithm>
#include <string>

namespace ibsm::mad {

void EncodeRmppHeader(const RmppHeader& h, std::span<uint8_t> mad) {
  // Layout<RmppHeader> spans bytes 0-35 so its offsets are the spec's; EncodeTo zeroes all of
  // them, so encode into scratch and copy only the RMPP bytes.
  std::array<uint8_t, rmpp::kRmppHeaderEnd> scratch{};
  EncodeTo(h, scratch);
  constexpr size_t kCommon = Layout<MadHeader>::kSize;
  std::copy(scratch.begin() + kCommon, scratch.end(), mad.begin() + kCommon);
}

Result<RmppHeader> DecodeRmppHeader(std::span<const uint8_t> mad) {
  return Decode<RmppHeader>(mad);
}

std::optional<size_t> RmppHeaderSize(uint8_t mgmt_class) {
  if (mgmt_class == static_cast<uint8_t>(MgmtClass::kSubnAdm)) return kSaHeaderSize;
  if (mgmt_class >= 0x30 && mgmt_class <= 0x4F) return size_t{40};
  return std::nullopt;
}

bool IsRmppActive(std::span<const uint8_t> mad) {
  auto hdr = Decode<MadHeader>(mad);
  if (!hdr.ok() || !RmppHeaderSize(hdr->mgmt_class)) return false;
  auto r = DecodeRmppHeader(mad);
  return r.ok() && (r->flags & rmpp::kFlagActive) != 0;
}

MadBytes MakeRmppReply(std::span<const uint8_t> segment, size_t header_size, uint8_t type,
                       uint8_t status, uint32_t data1, uint32_t data2) {
  MadBytes out{};
  size_t n = std::min({segment.size(), header_size, out.size()});
  std::copy_n(segment.begin(), n, out.begin());
  MadHeader hdr{};
  if (DecodeFrom(out, &hdr).ok()) {
    hdr.method ^= method::kResponseBit;
    EncodeTo(hdr, out);
  }
  RmppHeader r;
  r.version = rmpp::kVersion;
  r.type = type;
  r.flags = rmpp::kFlagActive;
  r.status = status;
  r.data1 = data1;
  r.data2 = data2;
  EncodeRmppHeader(r, out);
  return out;
}

// ---------------------------------------------------------------------------------------------
// Sender

Result<RmppSender> RmppSender::Create(std::span<const uint8_t> message, size_t header_size,
                                      size_t mad_size) {
  if (header_size < rmpp::kRmppHeaderEnd || header_size >= kMadSize) {
    return InvalidArgument("RMPP header size " + std::to_string(header_size) +
                           " outside [36, 256)");
  }
  if (mad_size <= header_size || mad_size > kMadSize) {
    return InvalidArgument("RMPP segment size " + std::to_string(mad_size) + " outside (" +
                           std::to_string(header_size) + ", 256]");
  }
  if (message.size() < header_size) {
    return InvalidArgument("RMPP message of " + std::to_string(message.size()) +
                           " bytes is shorter than its " + std::to_string(header_size) +
                           "-byte headers");
  }
  RmppSender s;
  s.header_size_ = header_size;
  s.data_size_ = mad_size - header_size;
  s.headers_.assign(message.begin(), message.begin() + header_size);
  s.payload_.assign(message.begin() + header_size, message.end());
  size_t n = (s.payload_.size() + s.data_size_ - 1) / s.data_size_;
  if (n == 0) n = 1;
  if (n > UINT32_MAX / 2) return InvalidArgument("RMPP message too large");
  s.segment_count_ = static_cast<uint32_t>(n);
  return s;
}

MadBytes RmppSender::Segment(uint32_t seg) const {
  MadBytes out{};
  std::copy(headers_.begin(), headers_.end(), out.begin());
  size_t begin = size_t{seg - 1} * data_size_;
  size_t end = std::min(payload_.size(), begin + data_size_);
  if (begin < end) std::copy(payload_.begin() + begin, payload_.begin() + end, out.begin() + header_size_);

  const size_t class_header = header_size_ - rmpp::kRmppHeaderEnd;
  const size_t pad = size_t{segment_count_} * data_size_ - payload_.size();
  RmppHeader r;
  r.version = rmpp::kVersion;
  r.type = rmpp::kTypeData;
  r.flags = rmpp::kFlagActive;
  r.data1 = seg;
  if (seg == 1) {
    r.flags |= rmpp::kFlagFirst;
    r.data2 = static_cast<uint32_t>(size_t{segment_count_} * (data_size_ + class_header) - pad);
  }
  if (seg == segment_count_) {
    r.flags |= rmpp::kFlagLast;
    r.data2 = static_cast<uint32_t>(data_size_ + class_header - pad);
  }
  EncodeRmppHeader(r, out);
  return out;
}

MadBytes RmppSender::MakeAbort(uint8_t status) const {
  MadBytes out{};
  std::copy(headers_.begin(), headers_.end(), out.begin());
  RmppHeader r;
  r.version = rmpp::kVersion;
  r.type = rmpp::kTypeAbort;
  r.flags = rmpp::kFlagActive;
  r.status = status;
  EncodeRmppHeader(r, out);
  return out;
}

std::vector<MadBytes> RmppSender::NextSegments() {
  std::vector<MadBytes> out;
  if (aborted_ || done()) return out;
  uint32_t last = std::min(window_last_, segment_count_);
  while (last_sent_ < last) out.push_back(Segment(++last_sent_));
  return out;
}

std::vector<MadBytes> RmppSender::OnTimeout() {
  if (aborted_ || done()) return {};
  last_sent_ = last_acked_;
  return NextSegments();
}

Status RmppSender::OnReply(std::span<const uint8_t> mad, std::optional<MadBytes>* reply) {
  if (reply) reply->reset();
  auto r = DecodeRmppHeader(mad);
  if (!r.ok()) return r.status();
  if (aborted_) return FailedPrecondition("RMPP transfer already aborted");
  auto abort = [&](uint8_t status, std::string why) {
    aborted_ = true;
    abort_status_ = status;
    if (reply) *reply = MakeAbort(status);
    return Corrupt(std::move(why));
  };
  if (r->version != rmpp::kVersion) {
    return abort(rmpp::kStatusUnsupportedVersion,
                 "RMPP version " + std::to_string(r->version) + " in reply");
  }
  switch (r->type) {
    case rmpp::kTypeStop:
    case rmpp::kTypeAbort:
      aborted_ = true;
      abort_status_ = r->status;
      return Unavailable(std::string(r->type == rmpp::kTypeStop ? "STOP" : "ABORT") +
                         " from receiver, RMPP status " + std::to_string(r->status));
    case rmpp::kTypeAck:
      break;
    default:
      return abort(rmpp::kStatusBadType, "RMPP type " + std::to_string(r->type) +
                                             " where ACK, STOP or ABORT was expected");
  }
  const uint32_t seg = r->data1;
  const uint32_t nwl = r->data2;
  if (seg > last_sent_ && seg > last_acked_) {
    return abort(rmpp::kStatusSegmentNumberTooBig,
                 "ACK of segment " + std::to_string(seg) + " never sent (sent " +
                     std::to_string(last_sent_) + ")");
  }
  if (nwl < seg) {
    return abort(rmpp::kStatusNewWindowLastTooSmall,
                 "ACK NewWindowLast " + std::to_string(nwl) + " below segment " +
                     std::to_string(seg));
  }
  if (seg < last_acked_) return Status::Ok();  // stale ACK overtaken by a newer one
  last_acked_ = seg;
  if (last_sent_ < last_acked_) last_sent_ = last_acked_;
  window_last_ = std::max(window_last_, nwl);
  return Status::Ok();
}

// ---------------------------------------------------------------------------------------------
// Receiver

RmppReceiver::RmppReceiver(size_t header_size, uint32_t window, uint32_t max_segments,
                           size_t mad_size)
    : header_size_(std::clamp(header_size, rmpp::kRmppHeaderEnd, kMadSize - 1)),
      data_size_(std::clamp(mad_size, header_size_ + 1, kMadSize) - header_size_),
      window_(std::max<uint32_t>(window, 1)),
      max_segments_(std::max<uint32_t>(max_segments, 1)),
      window_last_(1) {}

RmppReceiver::Step RmppReceiver::Abort(std::span<const uint8_t> mad, uint8_t status, Status why) {
  ++counters_.errors;
  failed_ = true;
  message_.clear();
  return Step{std::move(why), MakeRmppReply(mad, header_size_, rmpp::kTypeAbort, status, 0, 0)};
}

RmppReceiver::Step RmppReceiver::Refuse(std::span<const uint8_t> mad) {
  if (mad.size() < kMadSize) {
    failed_ = true;
    message_.clear();
    return Step{ResourceExhausted("RMPP transfer refused"), std::nullopt};
  }
  return Abort(mad, rmpp::kStatusResourcesExhausted, ResourceExhausted("RMPP transfer refused"));
}

RmppReceiver::Step RmppReceiver::Feed(std::span<const uint8_t> mad) {
  if (mad.size() < kMadSize) {
    ++counters_.errors;
    return Step{Corrupt("RMPP segment of " + std::to_string(mad.size()) + " bytes, need 256"),
                std::nullopt};
  }
  auto r = DecodeRmppHeader(mad);
  if (!r.ok()) {
    ++counters_.errors;
    return Step{r.status(), std::nullopt};
  }
  if (failed_) {
    ++counters_.errors;
    return Step{FailedPrecondition("RMPP transfer already aborted"), std::nullopt};
  }
  if ((r->flags & rmpp::kFlagActive) == 0) {
    ++counters_.errors;
    return Step{Corrupt("RMPP Active flag clear in a segment of an RMPP transfer"), std::nullopt};
  }
  if (r->version != rmpp::kVersion) {
    return Abort(mad, rmpp::kStatusUnsupportedVersion,
                 Corrupt("RMPP version " + std::to_string(r->version)));
  }
  if (r->type == rmpp::kTypeStop || r->type == rmpp::kTypeAbort) {
    ++counters_.errors;
    failed_ = true;
    message_.clear();
    return Step{Unavailable("sender ended the transfer with " +
                            std::string(r->type == rmpp::kTypeStop ? "STOP" : "ABORT") +
                            ", RMPP status " + std::to_string(r->status)),
                std::nullopt};
  }
  if (r->type != rmpp::kTypeData) {
    return Abort(mad, rmpp::kStatusBadType,
                 Corrupt("RMPP type " + std::to_string(r->type) + " where DATA was expected"));
  }
  const uint32_t seg = r->data1;
  const bool first = (r->flags & rmpp::kFlagFirst) != 0;
  const bool last = (r->flags & rmpp::kFlagLast) != 0;
  auto ack = [&](uint32_t s) {
    return MakeRmppReply(mad, header_size_, rmpp::kTypeAck, rmpp::kStatusNormal, s,
                         std::max(window_last_, s));
  };

  if (seg == 0 || (first != (seg == 1))) {
    return Abort(mad, rmpp::kStatusInconsistentFirstAndSegment,
                 Corrupt("RMPP segment " + std::to_string(seg) + " with First flag " +
                         std::to_string(first)));
  }
  if (seg < expected_) {
    // Already have it. Our ACK was probably lost: answer again with the last good segment.
    ++counters_.duplicates;
    return Step{Status::Ok(), ack(expected_ - 1)};
  }
  if (complete_) {
    ++counters_.duplicates;
    return Step{Status::Ok(), ack(expected_ - 1)};
  }
  if (seg > expected_) {
    ++counters_.gaps;
    if (seg > window_last_ + window_) {
      return Abort(mad, rmpp::kStatusSegmentNumberTooBig,
                   Corrupt("RMPP segment " + std::to_string(seg) + " beyond window end " +
                           std::to_string(window_last_)));
    }
    return Step{Status::Ok(), ack(expected_ - 1)};
  }
  // seg == expected_
  if (seg > max_segments_) {
    return Abort(mad, rmpp::kStatusResourcesExhausted,
                 ResourceExhausted("RMPP transfer longer than " + std::to_string(max_segments_) +
                                   " segments"));
  }
  const size_t class_header = header_size_ - rmpp::kRmppHeaderEnd;
  size_t valid = data_size_;
  if (last) {
    if (r->data2 < class_header || r->data2 > data_size_ + class_header) {
      return Abort(mad, rmpp::kStatusInconsistentLastAndLength,
                   Corrupt("RMPP last segment PayloadLength " + std::to_string(r->data2) +
                           " outside [" + std::to_string(class_header) + ", " +
                           std::to_string(data_size_ + class_header) + "]"));
    }
    valid = r->data2 - class_header;
    if (first_length_ != 0) {
      uint64_t expect_first = uint64_t{seg} * (data_size_ + class_header) - (data_size_ - valid);
      if (expect_first != first_length_) {
        return Abort(mad, rmpp::kStatusInconsistentLastAndLength,
                     Corrupt("RMPP first PayloadLength " + std::to_string(first_length_) +
                             " disagrees with last segment's (total " +
                             std::to_string(expect_first) + ")"));
      }
    }
  }
  if (first) {
    first_length_ = r->data2;
    message_.assign(mad.begin(), mad.begin() + header_size_);
  }
  message_.insert(message_.end(), mad.begin() + header_size_,
                  mad.begin() + header_size_ + valid);
  ++counters_.segments;
  ++expected_;
  if (last) {
    complete_ = true;
    return Step{Status::Ok(), ack(seg)};
  }
  if (seg >= window_last_) {
    window_last_ = seg + window_;
    return Step{Status::Ok(), ack(seg)};
  }
  return Step{Status::Ok(), std::nullopt};
}

std::vector<uint8_t> RmppReceiver::TakeMessage() {
  std::vector<uint8_t> out = std::move(message_);
  message_.clear();
  if (out.size() >= rmpp::kRmppHeaderEnd) {
    // The delivered message describes itself as one whole transfer.
    auto r = DecodeRmppHeader(out);
    if (r.ok()) {
      r->flags = rmpp::kFlagActive | rmpp::kFlagFirst | rmpp::kFlagLast;
      r->data1 = 1;
      r->data2 = first_length_;
      EncodeRmppHeader(*r, out);
    }
  }
  return out;
}

}  // namespace ibsm::mad
