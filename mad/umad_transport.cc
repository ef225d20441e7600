#include "mad/umad_transport.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstring>
#include <filesystem>
#include <utility>
#include <vector>

#include <boost/asio/post.hpp>
#include <fmt/format.h>
#include <infiniband/umad.h>

#include "base/log.h"
#include "mad/attr/sharp.h"

namespace ibsm::mad {
namespace {

constexpr uint32_t kGsiQkey = 0x80010000;
constexpr int kRecvPollMs = 100;  // how long Close may wait for the receiver thread

// Class versions we register (SMI 14.2.1, SA 15.2.1, PerfMgt 16.1.1).
constexpr int kSmiClassVersion = 1;
constexpr int kSaClassVersion = 2;
constexpr int kPerfClassVersion = 1;

// umad_register's method mask is a host-memory bitmap indexed by method number, not a wire
// field.
struct MethodMask {
  long bits[16 / sizeof(long)] = {};
  void Set(uint8_t m) {
    constexpr size_t kBitsPerWord = 8 * sizeof(long);
    bits[m / kBitsPerWord] |= 1L << (m % kBitsPerWord);
  }
};

std::string Errno(int e) { return std::strerror(e < 0 ? -e : e); }

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

// Which queue a request waits in for the in-flight budget: SMPs (sweep, SMInfo, traps'
// follow-ups) first, then SA, then vendor classes (AR, SHARP), the PerfMgr last.
size_t BudgetPriority(uint8_t mgmt_class) {
  switch (static_cast<MgmtClass>(mgmt_class)) {
    case MgmtClass::kSubnDirected:
    case MgmtClass::kSubnLid:
      return 0;
    case MgmtClass::kSubnAdm:
      return 1;
    case MgmtClass::kPerfMgt:
      return 3;
    default:
      return 2;
  }
}

// The first ten, then every thousandth (as sm/log_worthy.h): a wedged medium must not
// flood the log.
bool BacklogLogWorthy(uint64_t n) { return n <= 10 || n % 1000 == 0; }

// Our own timer waits a little longer than the timeout handed to the kernel, so that on real
// hardware the kernel's ETIMEDOUT return of the send arrives first and one attempt ends once.
std::chrono::milliseconds AttemptDeadline(std::chrono::milliseconds t) {
  return t + t / 4 + std::chrono::milliseconds(5);
}

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

bool AnswersUs(std::span<const uint8_t> mad, uint32_t umad_status) {
  if (umad_status != 0) return true;
  if (mad.size() < Layout<MadHeader>::kSize) return false;
  if ((mad[3] & method::kResponseBit) != 0) return true;
  if (!RmppHeaderSize(mad[1]) || mad.size() < rmpp::kRmppHeaderEnd || !IsRmppActive(mad))
    return false;
  auto rh = DecodeRmppHeader(mad);
  return rh.ok() && rh->type != rmpp::kTypeData;
}

// One MAD read by the receiver thread, handed to the io_context thread.
struct UmadTransport::Inbound {
  std::vector<uint8_t> bytes;
  uint32_t status = 0;  // umad status: non-zero = our own send came back undelivered
  MadAddress from;
};

struct UmadTransport::Pending {
  explicit Pending(boost::asio::io_context& io) : timer(io) {}
  MadMessage request;
  SendOptions options;
  ResponseHandler done;
  uint64_t attempt = 0;
  bool started = false;  // holds a slot of the in-flight budget
  boost::asio::steady_timer timer;
  std::optional<RmppSender> sender;     // request sent as RMPP
  std::optional<RmppReceiver> receiver;  // response arriving as RMPP
};

struct UmadTransport::OutTransfer {
  explicit OutTransfer(boost::asio::io_context& io, RmppSender s) : sender(std::move(s)), timer(io) {}
  RmppSender sender;
  MadAddress to;
  int attempts = 0;
  boost::asio::steady_timer timer;
};

// One MAD the medium refused, waiting in the backlog exactly as it is to be written.
struct UmadTransport::Outbound {
  std::vector<uint8_t> umad;
  int agent = -1;
  int length = 0;
  int timeout_ms = 0;
};

namespace {
RmppInboundLimits InboundLimits(const UmadOptions& o) {
  RmppInboundLimits l = o.rmpp_inbound;
  l.idle = o.rmpp_receive_idle;
  return l;
}
}  // namespace

UmadTransport::UmadTransport(boost::asio::io_context& io, const UmadOptions& options)
    : io_(io),
      options_(options),
      inbound_rmpp_(InboundLimits(options)),
      rmpp_expiry_(io),
      flush_timer_(io) {}

Result<std::unique_ptr<UmadTransport>> UmadTransport::Open(boost::asio::io_context& io,
                                                           const UmadOptions& options) {
  std::unique_ptr<UmadTransport> t(new UmadTransport(io, options));
  IBSM_RETURN_IF_ERROR(t->OpenPort());
  t->receiver_ = std::thread([p = t.get()] { p->ReceiverLoop(); });
  return t;
}

Status UmadTransport::OpenPort() {
  if (umad_init() < 0) return Unavailable("umad_init failed: no InfiniBand user MAD support");

  std::string ca = options_.ca_name;
  int port = options_.port_num;
  if (options_.port_guid.value() != 0) {
    char names[UMAD_MAX_DEVICES][UMAD_CA_NAME_LEN];
    int n = umad_get_cas_names(names, UMAD_MAX_DEVICES);
    bool found = false;
    for (int i = 0; i < n && !found; ++i) {
      __be64 guids[UMAD_CA_MAX_PORTS + 1] = {};
      int np = umad_get_ca_portguids(names[i], guids, UMAD_CA_MAX_PORTS + 1);
      for (int j = 0; j < np; ++j) {
        if (be64toh(guids[j]) == options_.port_guid.value()) {
          ca = names[i];
          port = j;
          found = true;
          break;
        }
      }
    }
    if (!found) return NotFound("no local port has GUID " + ToString(options_.port_guid));
  }

  umad_port_t p{};
  if (int r = umad_get_port(ca.empty() ? nullptr : ca.c_str(), port, &p); r < 0) {
    return Unavailable(fmt::format("umad_get_port({}, {}) failed: {}", ca.empty() ? "default" : ca,
                                   port, Errno(r)));
  }
  ca_name_ = p.ca_name;
  // ibsim (Debian's 0.10 with its preload library, devices named ibsim<N>) delivers a MAD's
  // first 224 bytes intact and the rest as whatever its buffer held: every segment of an
  // RMPP transfer arrived with garbage in its last 32 bytes. On ibsim both ends of our own
  // RMPP (ibsmd and ibsmctl) therefore fill segments to 224 bytes only.
  wire_mad_size_ = ca_name_.rfind("ibsim", 0) == 0 ? kIbsimMadSize : kMadSize;
  if (wire_mad_size_ != kMadSize)
    Log(LogName::kMad).info("MAD-UMAD-020 ibsim device: RMPP segments carry {} bytes",
                            wire_mad_size_);
  inbound_rmpp_.set_mad_size(wire_mad_size_);
  port_num_ = p.portnum;
  umad_release_port(&p);

  port_id_ = umad_open_port(ca_name_.c_str(), port_num_);
  if (port_id_ < 0) {
    return Unavailable(fmt::format("umad_open_port({}, {}) failed: {}", ca_name_, port_num_,
                                   Errno(port_id_)));
  }
  if (wire_mad_size_ != kMadSize) {
    FindIbsimSocket();
  } else if (int fd = umad_get_fd(port_id_); fd >= 0) {
    // libibumad opens the umad device non-blocking already; made sure of, since a blocking
    // write would stall the io thread (see the top of umad_transport.h).
    int fl = ::fcntl(fd, F_GETFL);
    if (fl >= 0 && (fl & O_NONBLOCK) == 0) (void)::fcntl(fd, F_SETFL, fl | O_NONBLOCK);
  }

  // SMI: Get/Set (SMInfo from other SMs), Trap/TrapRepress (traps to the SM), as OpenSM
  // registers its SMI binding (responder + trap processor).
  MethodMask smi;
  for (uint8_t m : {method::kGet, method::kSet, method::kTrap, method::kTrapRepress}) smi.Set(m);
  MethodMask sa;
  if (options_.sa_server) {
    for (uint8_t m : {method::kGet, method::kSet, method::kGetTable, method::kGetTraceTable,
                      method::kGetMulti, method::kDelete})
      sa.Set(m);
  }
  MethodMask none;
  struct Reg {
    int* agent;
    MgmtClass cls;
    int version;
    MethodMask* mask;
  } regs[] = {
      {&agent_dr_, MgmtClass::kSubnDirected, kSmiClassVersion, &smi},
      {&agent_smi_, MgmtClass::kSubnLid, kSmiClassVersion, &smi},
      {&agent_sa_, MgmtClass::kSubnAdm, kSaClassVersion, &sa},
      {&agent_perf_, MgmtClass::kPerfMgt, kPerfClassVersion, &none},
  };
  for (auto& r : regs) {
    // rmpp_version 0: RMPP is ours (mad/rmpp.h), the kernel must not reassemble.
    *r.agent = umad_register(port_id_, static_cast<int>(r.cls), r.version, 0, r.mask->bits);
    if (*r.agent < 0) {
      return Unavailable(fmt::format("umad_register(class {:#04x}) on {}:{} failed: {}",
                                     static_cast<int>(r.cls), ca_name_, port_num_,
                                     Errno(*r.agent)));
    }
  }
  // SHARP's class is optional: without it the SM runs, and sharp_enable reports every AN
  // as not answering (SM-SHARP-00x) instead of failing the port.
  agent_am_ = umad_register(port_id_, static_cast<int>(MgmtClass::kAggMgmt), kAmClassVersion, 0,
                            none.bits);
  if (agent_am_ < 0) {
    Log(LogName::kMad).warn("umad_register(class 0x0b, SHARP aggregation management) on {}:{} "
                            "failed: {}; SHARP MADs cannot be sent",
                            ca_name_, port_num_, Errno(agent_am_));
  }

  if (options_.claim_sm) {
    char path[256];
    if (umad_get_issm_path(ca_name_.c_str(), port_num_, path, sizeof(path)) < 0) {
      return Unavailable(fmt::format("no issm device for {}:{}", ca_name_, port_num_));
    }
    // Holding the issm device open sets IsSM in the port's CapabilityMask (as OpenSM's
    // osm_vendor_set_sm does); closing it clears the bit.
    issm_fd_ = ::open(path, O_RDWR | O_NONBLOCK);
    if (issm_fd_ < 0) {
      return Unavailable(fmt::format("cannot open {} to claim the SM port: {}", path,
                                     std::strerror(errno)));
    }
  }
  Log(LogName::kMad).info("opened {} port {} (SM port claimed: {})", ca_name_, port_num_,
                          options_.claim_sm);
  return Status::Ok();
}

// libumad2sim hands out a fake umad fd; the datagram socket it writes our MADs to (and
// reads ibsim's from) is bound to the abstract name "<IBSIM_SOCKNAME>:in<pid>" (ibsim's
// umad2sim/sim_client.c). Found among our descriptors and made non-blocking, so a full
// ibsim makes umad_send fail with EAGAIN instead of blocking with libumad2sim's lock held.
// libumad2sim's receiver thread polls that socket before reading it, so it is unaffected.
namespace {

// Our descriptor of the libumad2sim socket bound to the abstract name "...<suffix>", or -1.
int FindUmad2simSocket(const std::string& suffix) {
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator("/proc/self/fd", ec)) {
    int fd = -1;
    try {
      fd = std::stoi(e.path().filename().string());
    } catch (...) {
      continue;
    }
    sockaddr_un a{};
    socklen_t len = sizeof(a);
    if (::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) continue;
    constexpr size_t kPath = offsetof(sockaddr_un, sun_path);
    if (a.sun_family != AF_UNIX || len <= kPath + 1 || a.sun_path[0] != '\0') continue;
    std::string name(a.sun_path + 1, ::strnlen(a.sun_path + 1, len - kPath - 1));
    if (name.size() >= suffix.size() &&
        name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0)
      return fd;
  }
  return -1;
}

// How long one of libumad2sim's control exchanges with ibsim may wait once we close.
constexpr std::chrono::milliseconds kIbsimCtlTimeout{100};

}  // namespace

// libumad2sim hands out a fake umad fd; the datagram socket it writes our MADs to (and
// reads ibsim's from) is bound to the abstract name "<IBSIM_SOCKNAME>:in<pid>" (ibsim's
// umad2sim/sim_client.c). Found among our descriptors and made non-blocking, so a full
// ibsim makes umad_send fail with EAGAIN instead of blocking with libumad2sim's lock held.
// libumad2sim's receiver thread polls that socket before reading it, so it is unaffected.
void UmadTransport::FindIbsimSocket() {
  const std::string suffix = ":in" + std::to_string(::getpid());
  const int found = FindUmad2simSocket(suffix);
  int fl = found >= 0 ? ::fcntl(found, F_GETFL) : -1;
  if (fl < 0 || ::fcntl(found, F_SETFL, fl | O_NONBLOCK) < 0) {
    Log(LogName::kMad).warn("MAD-UMAD-021 ibsim device but no libumad2sim data socket found "
                            "(\"...{}\"): writes to ibsim may block",
                            suffix);
    return;
  }
  int dup = ::fcntl(found, F_DUPFD_CLOEXEC, 0);
  if (dup >= 0) ibsim_socket_.emplace(io_, dup);
  Log(LogName::kMad).info("MAD-UMAD-022 ibsim data socket fd {} set non-blocking", found);
}

UmadTransport::~UmadTransport() { Close(); }

void UmadTransport::Close() {
  if (closed_) return;
  closed_ = true;
  stop_ = true;
  if (receiver_.joinable()) receiver_.join();
  auto pending = std::move(pending_);
  pending_.clear();
  posts_.clear();
  inbound_rmpp_.Clear();
  rmpp_expiry_.cancel();
  for (auto& q : waiting_) q.clear();
  started_ = 0;
  backlog_.clear();
  counters_.backlog = 0;
  counters_.in_flight = 0;
  flush_timer_.cancel();
  if (ibsim_socket_) {
    boost::system::error_code ignored;
    ibsim_socket_->close(ignored);  // the dup only; libumad2sim's socket stays
    ibsim_socket_.reset();
  }
  if (wire_mad_size_ != kMadSize) {
    // Closing the issm device, and libumad2sim's exit handler, each ask ibsim something on
    // the control socket ":ctl<pid>" and block for the answer: a stopped ibsim would keep
    // ibsmd from exiting. From here on each exchange waits at most kIbsimCtlTimeout.
    if (int ctl = FindUmad2simSocket(":ctl" + std::to_string(::getpid())); ctl >= 0) {
      timeval tv{0, static_cast<suseconds_t>(
                        std::chrono::microseconds(kIbsimCtlTimeout).count())};
      (void)::setsockopt(ctl, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
      (void)::setsockopt(ctl, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
    }
  }
  if (issm_fd_ >= 0) ::close(issm_fd_);
  issm_fd_ = -1;
  if (port_id_ >= 0) umad_close_port(port_id_);
  port_id_ = -1;
  for (auto& [key, p] : pending) {
    p->timer.cancel();
    if (p->done) p->done(Unavailable("transport closed"));
  }
}

void UmadTransport::ReceiverLoop() {
  std::vector<uint8_t> buf(umad_size() + kMadSize);
  std::weak_ptr<char> alive = alive_;
  // Answers come in bursts (up to max_wire_smps in flight): what is already queued is read
  // without waiting and handed over in one post, so the io thread is woken once per burst
  // rather than once per MAD (cross-thread wake-ups were a fifth of ibsmd's CPU on ibsim).
  constexpr size_t kMaxBatch = 64;
  std::vector<Inbound> batch;
  while (!stop_) {
    int length = static_cast<int>(kMadSize);
    int r = umad_recv(port_id_, buf.data(), &length, batch.empty() ? kRecvPollMs : 0);
    if (r >= 0) {
      Inbound in;
      in.status = static_cast<uint32_t>(umad_status(buf.data()));
      const ib_mad_addr_t* a = umad_get_mad_addr(buf.data());
      in.from.lid = Lid{ntohs(a->lid)};
      in.from.qpn = ntohl(a->qpn);
      in.from.qkey = kGsiQkey;
      in.from.sl = a->sl;
      in.from.pkey_index = a->pkey_index;
      size_t n = length < 0 ? 0 : std::min<size_t>(static_cast<size_t>(length), kMadSize);
      const auto* mad = static_cast<const uint8_t*>(umad_get_mad(buf.data()));
      if (!InboundAdmitted(inbound_queued_.load() + batch.size(),
                           AnswersUs({mad, n}, in.status), options_.max_inbound_queued)) {
        uint64_t dropped = ++inbound_dropped_;
        if (BacklogLogWorthy(dropped)) {
          Log(LogName::kMad).warn("MAD-UMAD-032 the io thread is {} MADs behind: a MAD from "
                                  "lid {} dropped ({} so far)",
                                  inbound_queued_.load(), in.from.lid, dropped);
        }
        continue;
      }
      in.bytes.assign(mad, mad + n);
      batch.push_back(std::move(in));
      if (batch.size() < kMaxBatch) continue;
    } else if (batch.empty()) {
      if (r != -ETIMEDOUT && r != -EWOULDBLOCK && r != -EINTR && r != -EAGAIN) {
        // A broken port must not spin a core.
        std::this_thread::sleep_for(std::chrono::milliseconds(kRecvPollMs));
      }
      continue;
    }
    inbound_queued_ += batch.size();
    boost::asio::post(io_, [this, alive, batch = std::move(batch)]() mutable {
      for (Inbound& in : batch) {
        if (!alive.lock()) return;
        OnInbound(std::move(in));
        --inbound_queued_;
      }
      if (alive.lock()) counters_.inbound_dropped = inbound_dropped_.load();
    });
    batch.clear();
  }
}

Status UmadTransport::WriteMad(std::span<const uint8_t> mad, const MadAddress& addr) {
  if (closed_ || port_id_ < 0) return Unavailable("transport closed");
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
  // responses to sends without one); libumad2sim ignores it. Our timer is authoritative.
  int timeout_ms = 0;
  if (!hdr->is_response() && hdr->method != method::kTrapRepress) {
    auto it = pending_.find({hdr->mgmt_class, static_cast<uint32_t>(hdr->tid)});
    if (it != pending_.end() && !it->second->sender)
      timeout_ms = static_cast<int>(it->second->options.timeout.count());
  }
  Outbound out{std::move(buf), agent, static_cast<int>(length), timeout_ms};
  // Order is kept: once anything waits, everything after it waits behind it.
  if (!backlog_.empty()) return Backlog(std::move(out));
  int err = 0;
  int r = UmadSend(port_id_, agent, out.umad.data(), out.length, timeout_ms, &err);
  if (r < 0 && TransientWrite(err)) {
    ++counters_.write_eagain;
    return Backlog(std::move(out));
  }
  if (r < 0) return IoError("umad_send failed: " + Errno(err));
  ++counters_.sent;
  Log(LogName::kMad).trace("sent class {:#04x} method {:#04x} attr {:#06x} tid {:#x} to lid {}",
                           hdr->mgmt_class, hdr->method, hdr->attr_id, hdr->tid, dlid);
  return Status::Ok();
}

Status UmadTransport::Backlog(Outbound out) {
  if (backlog_.size() >= options_.max_backlog) {
    ++counters_.backlog_dropped;
    if (BacklogLogWorthy(++backlog_full_logged_)) {
      Log(LogName::kMad).warn("MAD-UMAD-030 write backlog full ({} MADs): MAD dropped ({} so "
                              "far)",
                              backlog_.size(), counters_.backlog_dropped);
    }
    return Unavailable("the MAD write backlog is full");
  }
  backlog_.push_back(std::move(out));
  counters_.backlog = backlog_.size();
  counters_.backlog_high_water = std::max(counters_.backlog_high_water, counters_.backlog);
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
      ++counters_.write_eagain;
      break;
    }
    if (r < 0) {
      // The request's own timer (or the RMPP window's) sees to what was lost.
      ++counters_.backlog_dropped;
      Log(LogName::kMad).debug("MAD-UMAD-031 a waiting MAD could not be written: {}",
                               Errno(err));
    } else {
      ++counters_.sent;
    }
    backlog_.pop_front();
  }
  counters_.backlog = backlog_.size();
  if (!backlog_.empty()) ArmFlush();
}

void UmadTransport::ArmTimer(boost::asio::steady_timer& timer, std::chrono::milliseconds after,
                             std::function<void()> fn) {
  timer.expires_after(after);
  std::weak_ptr<char> alive = alive_;
  timer.async_wait([alive, fn = std::move(fn)](const boost::system::error_code& ec) {
    if (ec || !alive.lock()) return;
    fn();
  });
}

void UmadTransport::Send(MadMessage request, const SendOptions& options, ResponseHandler done) {
  auto fail = [&](Status s) {
    boost::asio::post(io_, [done = std::move(done), s = std::move(s)] { done(s); });
  };
  if (closed_) return fail(Unavailable("transport closed"));
  auto hdr = Decode<MadHeader>(request.bytes);
  if (!hdr.ok()) return fail(InvalidArgument("request: " + hdr.status().message()));
  if (hdr->is_response()) return fail(InvalidArgument("Send of a response; use Post"));
  uint32_t tid = next_tid_++;
  if (next_tid_ == 0) next_tid_ = 1;
  hdr->tid = tid;
  if (request.bytes.size() < kMadSize) request.bytes.resize(kMadSize, 0);
  EncodeTo(*hdr, request.bytes);

  auto p = std::make_unique<Pending>(io_);
  if (request.bytes.size() > kMadSize) {
    auto hs = RmppHeaderSize(hdr->mgmt_class);
    if (!hs) {
      return fail(InvalidArgument(fmt::format("{}-byte message in class {:#04x}, which has no RMPP",
                                              request.bytes.size(), hdr->mgmt_class)));
    }
    auto sender = RmppSender::Create(request.bytes, *hs, wire_mad_size_);
    if (!sender.ok()) return fail(sender.status());
    p->sender = std::move(sender).value();
  }
  p->request = std::move(request);
  p->options = options;
  p->done = std::move(done);
  TidKey key{hdr->mgmt_class, tid};
  pending_[key] = std::move(p);
  const bool queued = std::any_of(waiting_.begin(), waiting_.end(),
                                  [](const auto& q) { return !q.empty(); });
  if (queued || (options_.max_in_flight != 0 && InFlight() >= options_.max_in_flight)) {
    ++counters_.budget_waits;
    waiting_[BudgetPriority(key.first)].push_back(key);
    return Admit();
  }
  StartRequest(key);
}

void UmadTransport::NoteInFlight() {
  counters_.in_flight = InFlight();
  counters_.in_flight_high_water = std::max(counters_.in_flight_high_water, counters_.in_flight);
}

void UmadTransport::StartRequest(const TidKey& key) {
  auto it = pending_.find(key);
  if (it == pending_.end()) return;
  it->second->started = true;
  ++started_;
  NoteInFlight();
  SendAttempt(key);
}

// Starts waiting requests, highest priority first, while the budget has room. Re-entered
// from a handler that sends (a request finishing on a write error): the outer loop goes on.
void UmadTransport::Admit() {
  if (admitting_ || closed_) return;
  admitting_ = true;
  while (options_.max_in_flight == 0 || InFlight() < options_.max_in_flight) {
    auto q = std::find_if(waiting_.begin(), waiting_.end(),
                          [](const auto& w) { return !w.empty(); });
    if (q == waiting_.end()) break;
    TidKey key = q->front();
    q->pop_front();
    StartRequest(key);
  }
  admitting_ = false;
}

void UmadTransport::ErasePost(const PostKey& key) {
  posts_.erase(key);
  NoteInFlight();
  Admit();
}

void UmadTransport::SendAttempt(const TidKey& key) {
  auto it = pending_.find(key);
  if (it == pending_.end()) return;
  Pending& p = *it->second;
  if (++p.attempt > 1) ++counters_.retries;
  p.receiver.reset();
  Status st;
  if (p.sender) {
    std::vector<MadBytes> segs;
    if (p.attempt > 1 && p.sender->done()) {
      // Whole request delivered but no response: send it again from the start.
      auto hs = RmppHeaderSize(key.first);
      auto fresh = RmppSender::Create(p.request.bytes, *hs, wire_mad_size_);
      if (fresh.ok()) p.sender = std::move(fresh).value();
      segs = p.sender->NextSegments();
    } else {
      segs = p.attempt > 1 ? p.sender->OnTimeout() : p.sender->NextSegments();
    }
    for (const auto& s : segs) {
      st = WriteMad(s, p.request.addr);
      if (!st.ok()) break;
    }
  } else {
    st = WriteMad(p.request.bytes, p.request.addr);
  }
  if (!st.ok()) return FinishPending(key, st);
  uint64_t attempt = p.attempt;
  ArmTimer(p.timer, AttemptDeadline(p.options.timeout),
           [this, key, attempt] { OnRequestTimeout(key, attempt); });
}

void UmadTransport::OnRequestTimeout(const TidKey& key, uint64_t attempt) {
  auto it = pending_.find(key);
  if (it == pending_.end() || it->second->attempt != attempt) return;
  Pending& p = *it->second;
  if (p.attempt <= static_cast<uint64_t>(std::max(p.options.retries, 0))) return SendAttempt(key);
  ++counters_.timeouts;
  if (p.sender && !p.sender->done()) {
    ++counters_.rmpp_aborted;
    (void)WriteMad(p.sender->MakeAbort(rmpp::kStatusTooManyRetries), p.request.addr);
  }
  auto hdr = Decode<MadHeader>(p.request.bytes);
  Log(LogName::kMad).debug("MAD-UMAD-010 no response to class {:#04x} attr {:#06x} tid {:#x} "
                           "after {} attempts",
                           key.first, hdr.ok() ? hdr->attr_id : 0, key.second, p.attempt);
  FinishPending(key, Timeout(fmt::format("no response to class {:#04x} attr {:#06x} after {} "
                                         "attempts",
                                         key.first, hdr.ok() ? hdr->attr_id : 0, p.attempt)));
}

void UmadTransport::FinishPending(const TidKey& key, Result<MadMessage> result) {
  auto it = pending_.find(key);
  if (it == pending_.end()) return;
  std::unique_ptr<Pending> p = std::move(it->second);
  pending_.erase(it);
  p->timer.cancel();
  if (p->started && started_ > 0) --started_;
  NoteInFlight();
  if (p->done) p->done(std::move(result));
  Admit();
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
    return WriteMad(message.bytes, message.addr);
  }
  if (message.bytes.size() <= kMadSize) {
    // A one-segment RMPP answer whose data does not fit the MADs this medium carries whole
    // (ibsim): sent as a transfer of smaller segments instead.
    auto rh = DecodeRmppHeader(message.bytes);
    message.bytes.resize(std::min<size_t>(kMadSize, rmpp::kRmppHeaderEnd + rh->data2));
  }
  auto hs = RmppHeaderSize(hdr->mgmt_class);
  if (!hs) {
    return InvalidArgument(fmt::format("{}-byte message in class {:#04x}, which has no RMPP",
                                       message.bytes.size(), hdr->mgmt_class));
  }
  auto sender = RmppSender::Create(message.bytes, *hs, wire_mad_size_);
  if (!sender.ok()) return sender.status();
  PostKey key{hdr->mgmt_class, static_cast<uint32_t>(hdr->tid), message.addr.lid.value(),
              message.addr.qpn};
  auto t = std::make_unique<OutTransfer>(io_, std::move(sender).value());
  t->to = message.addr;
  posts_[key] = std::move(t);
  NoteInFlight();
  PumpOutTransfer(key);
  return Status::Ok();
}

void UmadTransport::PumpOutTransfer(const PostKey& key) {
  auto it = posts_.find(key);
  if (it == posts_.end()) return;
  OutTransfer& t = *it->second;
  if (t.sender.done()) {
    ErasePost(key);
    return;
  }
  for (const auto& s : t.sender.NextSegments()) {
    if (!WriteMad(s, t.to).ok()) {
      ++counters_.rmpp_aborted;
      ErasePost(key);
      return;
    }
  }
  ArmTimer(t.timer, options_.rmpp_post.timeout, [this, key] {
    auto it2 = posts_.find(key);
    if (it2 == posts_.end()) return;
    OutTransfer& tt = *it2->second;
    if (++tt.attempts > options_.rmpp_post.retries) {
      ++counters_.rmpp_aborted;
      Log(LogName::kMad).warn("MAD-RMPP-001 RMPP transfer tid {:#x} to lid {} got no ACK after "
                              "{} resends; aborted",
                              std::get<1>(key), tt.to.lid, options_.rmpp_post.retries);
      (void)WriteMad(tt.sender.MakeAbort(rmpp::kStatusTooManyRetries), tt.to);
      ErasePost(key);
      return;
    }
    ++counters_.retries;
    for (const auto& s : tt.sender.OnTimeout()) (void)WriteMad(s, tt.to);
    PumpOutTransfer(key);
  });
}

void UmadTransport::SetUnsolicitedHandler(UnsolicitedHandler handler) {
  unsolicited_ = std::move(handler);
}

void UmadTransport::OnInbound(Inbound in) {
  ++counters_.received;
  // A peer may send an RMPP last segment short (see SendLength); libumad2sim delivers it at
  // that length, the kernel padded. The missing tail is zeros on the wire.
  if (in.bytes.size() >= rmpp::kRmppHeaderEnd && in.bytes.size() < kMadSize)
    in.bytes.resize(kMadSize, 0);
  if (in.bytes.size() < kMadSize) {
    ++counters_.malformed;
    Log(LogName::kMad).debug("MAD-UMAD-001 dropped a {}-byte MAD (need {})", in.bytes.size(),
                             kMadSize);
    return;
  }
  auto hdr = Decode<MadHeader>(in.bytes);
  if (!hdr.ok() || hdr->base_version != 1) {
    ++counters_.malformed;
    Log(LogName::kMad).debug("MAD-UMAD-002 dropped a MAD with base version {}",
                             hdr.ok() ? hdr->base_version : 0);
    return;
  }
  Log(LogName::kMad).trace("recv class {:#04x} method {:#04x} attr {:#06x} tid {:#x} status {}",
                           hdr->mgmt_class, hdr->method, hdr->attr_id, hdr->tid, in.status);
  TidKey key{hdr->mgmt_class, static_cast<uint32_t>(hdr->tid)};

  if (in.status != 0) {
    // Our own send came back: ibsim could not route it (status 110), or the kernel's timeout.
    auto it = pending_.find(key);
    if (it != pending_.end() && !hdr->is_response()) {
      Pending& p = *it->second;
      p.timer.cancel();
      OnRequestTimeout(key, p.attempt);
    } else if (!hdr->is_response() ||
               posts_.count(PostKey{key.first, key.second, in.from.lid.value(),
                                    in.from.qpn}) == 0) {
      ++counters_.unmatched;
    }
    return;
  }

  if (auto hs = RmppHeaderSize(hdr->mgmt_class)) {
    auto rh = DecodeRmppHeader(in.bytes);
    if (rh.ok() && (rh->flags & rmpp::kFlagActive) != 0) {
      OnRmppInbound(in, *hdr, *rh, *hs);
      return;
    }
  }

  if (hdr->is_response()) {
    auto it = pending_.find(key);
    if (it == pending_.end()) {
      ++counters_.unmatched;
      return;
    }
    FinishPending(key, MadMessage{std::move(in.bytes), in.from});
    return;
  }
  ++counters_.unsolicited;
  if (unsolicited_) unsolicited_(MadMessage{std::move(in.bytes), in.from});
}

void UmadTransport::OnRmppInbound(Inbound& in, const MadHeader& hdr, const RmppHeader& rh,
                                  size_t hdr_size) {
  TidKey key{hdr.mgmt_class, static_cast<uint32_t>(hdr.tid)};
  MadAddress reply_to = in.from;
  reply_to.qkey = kGsiQkey;

  if (rh.type == rmpp::kTypeAck || rh.type == rmpp::kTypeStop || rh.type == rmpp::kTypeAbort) {
    // Answers to a transfer we send carry our method with the response bit flipped.
    std::optional<MadBytes> abort;
    if (hdr.is_response()) {
      auto it = pending_.find(key);
      if (it == pending_.end() || !it->second->sender) {
        ++counters_.unmatched;
        return;
      }
      Pending& p = *it->second;
      Status st = p.sender->OnReply(in.bytes, &abort);
      if (abort) (void)WriteMad(*abort, p.request.addr);
      if (!st.ok()) {
        ++counters_.rmpp_aborted;
        return FinishPending(key, st);
      }
      for (const auto& s : p.sender->NextSegments()) (void)WriteMad(s, p.request.addr);
      uint64_t attempt = p.attempt;
      ArmTimer(p.timer, AttemptDeadline(p.options.timeout),
               [this, key, attempt] { OnRequestTimeout(key, attempt); });
      return;
    }
    const PostKey pkey{key.first, key.second, in.from.lid.value(), in.from.qpn};
    auto it = posts_.find(pkey);
    if (it == posts_.end()) {
      // The final ACK of a one-segment RMPP response we Posted as a plain MAD lands here too,
      // and so does an answer from a host the transfer is not going to.
      ++counters_.unmatched;
      return;
    }
    OutTransfer& t = *it->second;
    Status st = t.sender.OnReply(in.bytes, &abort);
    if (abort) (void)WriteMad(*abort, t.to);
    if (!st.ok()) {
      ++counters_.rmpp_aborted;
      Log(LogName::kMad).warn("MAD-RMPP-002 RMPP transfer tid {:#x} to lid {} ended: {}",
                              key.second, t.to.lid, st.ToString());
      ErasePost(pkey);
      return;
    }
    t.attempts = 0;
    t.timer.cancel();
    PumpOutTransfer(pkey);
    return;
  }

  if (rh.type != rmpp::kTypeData) {
    ++counters_.malformed;
    return;
  }

  if (hdr.is_response()) {
    auto it = pending_.find(key);
    if (it == pending_.end()) {
      ++counters_.unmatched;
      return;
    }
    Pending& p = *it->second;
    const bool first = rh.data1 == 1 && (rh.flags & rmpp::kFlagFirst) != 0;
    if (!p.receiver || (first && (p.receiver->complete() || p.receiver->failed()))) {
      p.receiver.emplace(hdr_size, 32, 16384, wire_mad_size_);
    }
    auto step = p.receiver->Feed(in.bytes);
    if (step.reply) (void)WriteMad(*step.reply, reply_to);
    if (p.receiver->failed()) {
      ++counters_.rmpp_aborted;
      return FinishPending(key, step.status);
    }
    if (!step.status.ok()) {
      ++counters_.malformed;
      return;
    }
    if (p.receiver->complete()) {
      ++counters_.rmpp_reassembled;
      return FinishPending(key, MadMessage{p.receiver->TakeMessage(), in.from});
    }
    uint64_t attempt = p.attempt;
    ArmTimer(p.timer, AttemptDeadline(p.options.timeout),
             [this, key, attempt] { OnRequestTimeout(key, attempt); });
    return;
  }

  const RmppInboundKey ikey{hdr.mgmt_class, static_cast<uint32_t>(hdr.tid), in.from.lid.value(),
                            in.from.qpn};
  auto o = inbound_rmpp_.Feed(ikey, hdr_size, in.bytes, std::chrono::steady_clock::now());
  if (o.step.reply) (void)WriteMad(*o.step.reply, reply_to);
  ArmRmppExpiry();
  if (o.refused != RmppRefusal::kNone) {
    ++counters_.rmpp_refused;
    if (BacklogLogWorthy(counters_.rmpp_refused)) {
      static constexpr const char* kWhy[] = {"", "its source holds too many transfers",
                                             "too many transfers in all",
                                             "transfers hold too many bytes in all"};
      Log(LogName::kMad).warn("MAD-RMPP-004 inbound RMPP tid {:#x} from lid {} qp {} refused: "
                              "{} ({} sessions, {} bytes held; {} refused so far)",
                              key.second, in.from.lid, in.from.qpn,
                              kWhy[static_cast<size_t>(o.refused)], inbound_rmpp_.size(),
                              inbound_rmpp_.bytes(), counters_.rmpp_refused);
    }
    return;
  }
  if (o.failed) {
    ++counters_.rmpp_aborted;
    if (BacklogLogWorthy(counters_.rmpp_aborted)) {
      Log(LogName::kMad).warn("MAD-RMPP-003 inbound RMPP tid {:#x} from lid {} aborted: {}",
                              key.second, in.from.lid, o.step.status.ToString());
    }
    return;
  }
  if (!o.step.status.ok()) {
    ++counters_.malformed;
    return;
  }
  if (o.message) {
    ++counters_.rmpp_reassembled;
    ++counters_.unsolicited;
    if (unsolicited_) unsolicited_(MadMessage{std::move(*o.message), in.from});
  }
}

// One timer for every inbound session: frees the idle and the too old (mad/rmpp_inbound.h).
void UmadTransport::ArmRmppExpiry() {
  if (rmpp_expiry_armed_ || closed_ || inbound_rmpp_.size() == 0) return;
  rmpp_expiry_armed_ = true;
  const auto every = std::clamp<std::chrono::milliseconds>(
      inbound_rmpp_.limits().idle / 4, std::chrono::milliseconds(10), std::chrono::seconds(1));
  ArmTimer(rmpp_expiry_, every, [this] {
    rmpp_expiry_armed_ = false;
    counters_.rmpp_aborted += inbound_rmpp_.Expire(std::chrono::steady_clock::now());
    ArmRmppExpiry();
  });
}

Result<LocalPort> UmadTransport::QueryLocalPort() {
  if (closed_) return Unavailable("transport closed");
  umad_ca_t ca{};
  if (int r = umad_get_ca(ca_name_.c_str(), &ca); r < 0) {
    return Unavailable("umad_get_ca(" + ca_name_ + ") failed: " + Errno(r));
  }
  LocalPort lp;
  lp.node_guid = Guid{be64toh(ca.node_guid)};
  umad_release_ca(&ca);
  umad_port_t p{};
  if (int r = umad_get_port(ca_name_.c_str(), port_num_, &p); r < 0) {
    return Unavailable(fmt::format("umad_get_port({}, {}) failed: {}", ca_name_, port_num_,
                                   Errno(r)));
  }
  lp.port_guid = Guid{be64toh(p.port_guid)};
  lp.port_num = PortNum{static_cast<uint8_t>(p.portnum)};
  lp.lid = Lid{static_cast<uint16_t>(p.base_lid)};
  lp.sm_lid = Lid{static_cast<uint16_t>(p.sm_lid)};
  lp.lmc = static_cast<uint8_t>(p.lmc);
  lp.state = static_cast<uint8_t>(p.state);
  lp.ca_name = ca_name_;
  umad_release_port(&p);
  return lp;
}

}  // namespace ibsm::mad
