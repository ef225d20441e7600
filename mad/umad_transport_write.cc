// UmadTransport send path: a MAD to its agent and address, the write the medium may refuse,
// and the bounded backlog that waits for the socket to take writes again.
#include "mad/umad_transport.h"

#include <algorithm>
#include <cerrno>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <infiniband/umad.h>

#include "base/log.h"
#include "mad/umad_transport_internal.h"

namespace ibsm::mad {
namespace {

// A write the medium refuses for now: a full socket (ibsim), or the kernel short of memory.
bool TransientWrite(int e) {
  return e == EAGAIN || e == EWOULDBLOCK || e == ENOBUFS || e == ENOMEM;
}

// umad_send, and the errno of a failure: libibumad returns -EIO for every failed write and
// leaves write()'s own errno (EAGAIN for a full socket) in errno.
int UmadSend(int port, int agent, void* umad, int length, int timeout_ms, int* err) {
  errno = 0;
  int r = umad_send(port, agent, umad, length, timeout_ms, 0);
  *err = r < 0 ? (errno != 0 ? errno : -r) : 0;
  return r;
}

// How soon a refused write is retried without a writable event: on hardware (no event), and
// on ibsim in case a wake-up is lost (each refused write there prints a libumad2sim error).
constexpr std::chrono::milliseconds kFlushRetry{5};
constexpr std::chrono::milliseconds kFlushRetryIbsim{100};

// The bytes of `mad` umad_send is given. The last DATA segment of an RMPP transfer (a
// one-segment GetTableResp included) goes out at its real length: the headers and the
// PayloadLength bytes it holds. The kernel zero-pads a short MAD to 256 bytes on the wire,
// so nothing changes there; libumad2sim passes the length through to the receiver's
// umad_recv, and saquery counts records by that length (a 256-byte one-record answer reads
// as that record and zero "records" after it). Everything else, SMPs always, is 256 bytes.
size_t SendLength(std::span<const uint8_t> mad) {
  if (mad.size() < kMadSize) return kMadSize;
  auto hs = RmppHeaderSize(mad[1]);
  if (!hs || !IsRmppActive(mad)) return kMadSize;
  auto rh = DecodeRmppHeader(mad);
  if (!rh.ok() || rh->type != rmpp::kTypeData || (rh->flags & rmpp::kFlagLast) == 0)
    return kMadSize;
  return std::clamp<size_t>(size_t{rmpp::kRmppHeaderEnd} + rh->data2, *hs, kMadSize);
}

}  // namespace

Status UmadTransport::WriteMad(MadMessage message, std::chrono::milliseconds kernel_timeout) {
  if (closed_ || port_id_ < 0) return Unavailable("transport closed");
  const std::span<const uint8_t> mad = message.bytes;
  const MadAddress& addr = message.addr;
  auto hdr = Decode<MadHeader>(mad);
  if (!hdr.ok()) return hdr.status();
  int agent = -1;
  int dlid = addr.lid.value();
  int qpn = static_cast<int>(addr.qpn);
  int qkey = static_cast<int>(addr.qkey);
  switch (static_cast<MgmtClass>(hdr->mgmt_class)) {
    case MgmtClass::kSubnDirected:
      agent = agent_dr_;
      dlid = kPermissiveLid.value();
      qpn = 0;
      qkey = 0;
      break;
    case MgmtClass::kSubnLid:
      agent = agent_smi_;
      qpn = 0;
      qkey = 0;
      break;
    case MgmtClass::kSubnAdm:
      agent = agent_sa_;
      break;
    case MgmtClass::kPerfMgt:
      agent = agent_perf_;
      break;
    case MgmtClass::kAggMgmt:
      agent = agent_am_;
      if (agent < 0) return Unavailable("class 0x0b (SHARP) is not registered on this port");
      break;
    default:
      return Unsupported(fmt::format("no agent registered for class {:#04x}", hdr->mgmt_class));
  }
  std::vector<uint8_t> buf(umad_size() + kMadSize, 0);
  std::copy_n(mad.begin(), std::min(mad.size(), kMadSize),
              static_cast<uint8_t*>(umad_get_mad(buf.data())));
  const size_t length = SendLength(mad);
  umad_set_addr(buf.data(), dlid, qpn, addr.sl, qkey);
  umad_set_pkey(buf.data(), addr.pkey_index);
  // A request gets the kernel timeout so the kernel keeps it to match the response (it drops
  // responses to sends without one); libumad2sim ignores it. The dispatcher's timer is
  // authoritative.
  const int timeout_ms = static_cast<int>(kernel_timeout.count());
  Outbound out{std::move(buf), agent, static_cast<int>(length), timeout_ms};
  // Order is kept: once anything waits, everything after it waits behind it.
  if (!backlog_.empty()) return Backlog(std::move(out));
  int err = 0;
  int r = UmadSend(port_id_, agent, out.umad.data(), out.length, timeout_ms, &err);
  if (r < 0 && TransientWrite(err)) {
    ++Counters().write_eagain;
    return Backlog(std::move(out));
  }
  if (r < 0) return IoError("umad_send failed: " + Errno(err));
  ++Counters().sent;
  Log(LogName::kMad).trace("sent class {:#04x} method {:#04x} attr {:#06x} tid {:#x} to lid {}",
                           hdr->mgmt_class, hdr->method, hdr->attr_id, hdr->tid, dlid);
  return Status::Ok();
}

Status UmadTransport::Backlog(Outbound out) {
  if (backlog_.size() >= options_.max_backlog) {
    ++Counters().backlog_dropped;
    if (BacklogLogWorthy(++backlog_full_logged_)) {
      Log(LogName::kMad).warn("MAD-UMAD-030 write backlog full ({} MADs): MAD dropped ({} so "
                              "far)",
                              backlog_.size(), Counters().backlog_dropped);
    }
    return Unavailable("the MAD write backlog is full");
  }
  backlog_.push_back(std::move(out));
  Counters().backlog = backlog_.size();
  Counters().backlog_high_water = std::max(Counters().backlog_high_water, Counters().backlog);
  ArmFlush();
  return Status::Ok();
}

void UmadTransport::ArmFlush() {
  if (closed_) return;
  std::weak_ptr<char> alive = alive_;
  if (ibsim_socket_ && !write_wait_armed_) {
    write_wait_armed_ = true;
    ibsim_socket_->async_wait(boost::asio::posix::stream_descriptor::wait_write,
                              [this, alive](const boost::system::error_code& ec) {
                                if (!alive.lock()) return;
                                write_wait_armed_ = false;
                                if (!ec) FlushBacklog();
                              });
  }
  if (!flush_timer_armed_) {
    flush_timer_armed_ = true;
    flush_timer_.expires_after(ibsim_socket_ ? kFlushRetryIbsim : kFlushRetry);
    flush_timer_.async_wait([this, alive](const boost::system::error_code& ec) {
      if (!alive.lock()) return;
      flush_timer_armed_ = false;
      if (!ec) FlushBacklog();
    });
  }
}

void UmadTransport::FlushBacklog() {
  if (closed_ || port_id_ < 0) return;
  while (!backlog_.empty()) {
    Outbound& o = backlog_.front();
    int err = 0;
    int r = UmadSend(port_id_, o.agent, o.umad.data(), o.length, o.timeout_ms, &err);
    if (r < 0 && TransientWrite(err)) {
      ++Counters().write_eagain;
      break;
    }
    if (r < 0) {
      // The request's own timer (or the RMPP window's) sees to what was lost.
      ++Counters().backlog_dropped;
      Log(LogName::kMad).debug("MAD-UMAD-031 a waiting MAD could not be written: {}",
                               Errno(err));
    } else {
      ++Counters().sent;
    }
    backlog_.pop_front();
  }
  Counters().backlog = backlog_.size();
  if (!backlog_.empty()) ArmFlush();
}

}  // namespace ibsm::mad
