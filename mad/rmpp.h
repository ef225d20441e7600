// RMPP (IBA 13.6): reliable multi-packet transfers of GMPs, done in user space because the
// transport registers its agents with rmpp_version 0 (ibsim has no RMPP at all, and the kernel
// must not do it twice). Both sides are pure state machines: they take wire bytes in and hand
// wire bytes out, and never touch a clock or a socket. The caller (UmadTransport) sends what
// they return and drives timeouts.
//
// Message format shared with MadMessage: a message is `header_size` bytes of headers (common
// MAD header, RMPP header, class header; for SA 56 bytes) followed by the payload of any
// length. Each DATA segment carries the headers and up to kMadSize - header_size payload bytes.
//
// PayloadLength follows the Linux kernel (mad_rmpp.c), which is what peers check against: it
// counts the class header of every segment, i.e. first segment: segments * (256 - 36) - pad,
// last segment: (256 - 36) - pad, where pad is the unused tail of the last segment.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "base/status.h"
#include "mad/field.h"
#include "mad/mad.h"

namespace ibsm::mad {

// The RMPP header at bytes 24-35, in the offsets of the whole MAD (13.6.2.1). Bytes 0-23
// (the common header) are not part of this layout's fields; encode it after the MadHeader's
// bytes are in place only through EncodeRmppHeader below.
struct RmppHeader {
  uint8_t version = 0;
  uint8_t type = 0;
  uint8_t resp_time = 0;
  uint8_t flags = 0;
  uint8_t status = 0;
  uint32_t data1 = 0;  // DATA: SegmentNumber; ACK: SegmentNumber acknowledged
  uint32_t data2 = 0;  // DATA: PayloadLength (first/last); ACK: NewWindowLast
};

template <>
struct Layout<RmppHeader> {
  static constexpr std::string_view kName = "RmppHeader";
  static constexpr size_t kSize = 36;
  static constexpr std::array kFields = {
      F<&RmppHeader::version>("rmpp_version", 192, 8),
      F<&RmppHeader::type>("rmpp_type", 200, 8),
      F<&RmppHeader::resp_time>("rmpp_resp_time", 208, 5),
      F<&RmppHeader::flags>("rmpp_flags", 213, 3, FieldFormat::kHex),
      F<&RmppHeader::status>("rmpp_status", 216, 8),
      F<&RmppHeader::data1>("rmpp_data1", 224, 32),
      F<&RmppHeader::data2>("rmpp_data2", 256, 32),
  };
};
static_assert(LayoutIsValid<RmppHeader>());

namespace rmpp {
// Frozen wire values (13.6.2.1, Table 179 RMPP status).
inline constexpr uint8_t kVersion = 1;
inline constexpr size_t kRmppHeaderEnd = 36;             // common + RMPP header
inline constexpr size_t kPayloadUnit = kMadSize - kRmppHeaderEnd;  // 220: what PayloadLength counts
inline constexpr uint8_t kStatusNormal = 0;
inline constexpr uint8_t kStatusResourcesExhausted = 1;
inline constexpr uint8_t kStatusTotalTimeTooLong = 118;
inline constexpr uint8_t kStatusInconsistentLastAndLength = 119;
inline constexpr uint8_t kStatusInconsistentFirstAndSegment = 120;
inline constexpr uint8_t kStatusBadType = 121;
inline constexpr uint8_t kStatusNewWindowLastTooSmall = 122;
inline constexpr uint8_t kStatusSegmentNumberTooBig = 123;
inline constexpr uint8_t kStatusIllegalStatus = 124;
inline constexpr uint8_t kStatusUnsupportedVersion = 125;
inline constexpr uint8_t kStatusTooManyRetries = 126;
inline constexpr uint8_t kStatusUnspecified = 127;
}  // namespace rmpp

// Writes `h` into bytes 24-35 of `mad`, leaving bytes 0-23 and 36+ untouched.
// REQUIRES: mad.size() >= 36.
void EncodeRmppHeader(const RmppHeader& h, std::span<uint8_t> mad);
// Corrupt if `mad` is shorter than 36 bytes.
Result<RmppHeader> DecodeRmppHeader(std::span<const uint8_t> mad);

// Bytes of headers before the payload for classes that carry an RMPP header, or nullopt for
// classes that do not (SMPs, PerfMgt). SA: 56; vendor range 2 (0x30-0x4F, with OUI): 40.
std::optional<size_t> RmppHeaderSize(uint8_t mgmt_class);

// True when `mad` is a GMP of an RMPP class with the Active flag set.
bool IsRmppActive(std::span<const uint8_t> mad);

// Builds the ACK/STOP/ABORT answer to `segment` (a received DATA MAD): its headers copied, the
// response bit of the method flipped (as the kernel does, so ACKs of responses travel as
// requests), payload zeroed.
MadBytes MakeRmppReply(std::span<const uint8_t> segment, size_t header_size, uint8_t type,
                       uint8_t status, uint32_t data1, uint32_t data2);

// Splits one message into DATA segments and tracks the sender's window (13.6.3.3).
// Usage: Create; send NextSegments(); feed every ACK/STOP/ABORT to OnReply() and send what
// NextSegments() then returns; on the caller's timer call OnTimeout() and send its result.
// done() once the last segment is acknowledged.
class RmppSender {
 public:
  // `message` = headers (MAD header with class, method, TID, attribute; class header) then
  // payload. The RMPP header bytes in `message` are ignored. InvalidArgument if the message
  // is shorter than header_size or header_size is not in [36, 256). `mad_size`: the bytes
  // of each 256-byte segment that carry data (headers included); less than 256 only on a
  // medium that loses a MAD's tail (ibsim, see UmadTransport), where both ends must agree.
  static Result<RmppSender> Create(std::span<const uint8_t> message, size_t header_size,
                                   size_t mad_size = kMadSize);

  uint32_t segment_count() const { return segment_count_; }
  bool done() const { return last_acked_ >= segment_count_; }
  bool aborted() const { return aborted_; }
  // The status the peer sent in STOP/ABORT, or that we abort with.
  uint8_t abort_status() const { return abort_status_; }

  // Segments inside the window not sent yet; marks them sent.
  std::vector<MadBytes> NextSegments();
  // Call when the caller's per-window timer fires: every segment after the last acked one and
  // inside the window is returned again (a resend). Empty when done or aborted.
  std::vector<MadBytes> OnTimeout();
  // Feeds an inbound ACK, STOP or ABORT of this transfer. Not OK when the peer stopped or
  // aborted, or when the ACK is invalid; then `reply` (if set) is the ABORT to send back.
  Status OnReply(std::span<const uint8_t> mad, std::optional<MadBytes>* reply = nullptr);

  // DATA segment `seg` (1-based). REQUIRES: 1 <= seg <= segment_count().
  MadBytes Segment(uint32_t seg) const;
  // An ABORT of this transfer with `status` (used by the caller after too many retries).
  MadBytes MakeAbort(uint8_t status) const;

 private:
  RmppSender() = default;

  std::vector<uint8_t> headers_;
  std::vector<uint8_t> payload_;
  size_t header_size_ = 0;
  size_t data_size_ = 0;
  uint32_t segment_count_ = 0;
  uint32_t last_acked_ = 0;
  uint32_t last_sent_ = 0;
  uint32_t window_last_ = 1;  // 13.6.3.3: a sender starts with a window of one segment
  bool aborted_ = false;
  uint8_t abort_status_ = rmpp::kStatusNormal;
};

// Counters an RmppReceiver keeps (the transport sums them).
struct RmppReceiverCounters {
  uint64_t segments = 0;    // DATA segments accepted in order
  uint64_t duplicates = 0;  // segments already received (ignored)
  uint64_t gaps = 0;        // segments past the next expected one (ACK of last good sent)
  uint64_t errors = 0;      // segments rejected as corrupt or inconsistent
};

// Reassembles DATA segments of one transfer, in order, and produces ACKs (13.6.3.2).
class RmppReceiver {
 public:
  struct Step {
    Status status;                 // not OK: the segment was bad or the transfer failed
    std::optional<MadBytes> reply;  // ACK, STOP or ABORT to send back to the sender
  };

  // `window`: how many segments the sender may have outstanding; `max_segments` bounds the
  // memory one transfer may take (larger transfers are aborted with ResourcesExhausted).
  // `mad_size` as for RmppSender::Create.
  explicit RmppReceiver(size_t header_size, uint32_t window = 32, uint32_t max_segments = 16384,
                        size_t mad_size = kMadSize);

  // Feeds one received MAD of this transfer (untrusted bytes of any length).
  Step Feed(std::span<const uint8_t> mad);

  bool complete() const { return complete_; }
  bool failed() const { return failed_; }
  const RmppReceiverCounters& counters() const { return counters_; }
  // Payload bytes held so far (what the transfer costs in memory until TakeMessage).
  size_t bytes() const { return message_.size(); }
  // Ends the transfer as out of resources (the caller's caps, not the sender's fault): the
  // ABORT (status 1, ResourcesExhausted) answers `mad`, a segment of this transfer.
  Step Refuse(std::span<const uint8_t> mad);
  // The reassembled message: first segment's headers, then the payload, trimmed to the length
  // the last segment states. REQUIRES: complete().
  std::vector<uint8_t> TakeMessage();

 private:
  Step Abort(std::span<const uint8_t> mad, uint8_t status, Status why);

  size_t header_size_;
  size_t data_size_;
  uint32_t window_;
  uint32_t max_segments_;
  uint32_t expected_ = 1;     // next segment number wanted
  uint32_t window_last_ = 0;  // last segment the sender may send (0: none ACKed yet)
  uint32_t first_length_ = 0;
  bool complete_ = false;
  bool failed_ = false;
  std::vector<uint8_t> message_;
  RmppReceiverCounters counters_;
};

}  // namespace ibsm::mad
