// UmadTransport setup and teardown: choosing and opening the port, registering the agents,
// claiming the SM port, finding ibsim's data socket, Close, and QueryLocalPort.
#include "mad/umad_transport.h"

#include <fcntl.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstring>
#include <filesystem>
#include <utility>

#include <fmt/format.h>
#include <infiniband/umad.h>

#include "base/log.h"
#include "mad/attr/sharp.h"
#include "mad/umad_transport_internal.h"

namespace ibsm::mad {
namespace {

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

DispatcherOptions Dispatching(const UmadOptions& o) {
  DispatcherOptions d;
  d.match_low_tid = true;  // see the top of umad_transport.h
  d.first_tid = 1;
  d.kernel_timeouts = true;
  d.rmpp_stall_waits = false;
  d.in_flight_budget = true;
  d.max_in_flight = o.max_in_flight;
  d.rmpp_post = o.rmpp_post;
  d.rmpp_inbound = o.rmpp_inbound;
  d.rmpp_inbound.idle = o.rmpp_receive_idle;
  d.log_name = LogName::kMad;
  d.rmpp_log_id = "MAD-RMPP";
  d.timeout_log_id = "MAD-UMAD-010";
  return d;
}

}  // namespace

UmadTransport::UmadTransport(boost::asio::io_context& io, const UmadOptions& options)
    : io_(io), options_(options), flush_timer_(io), dispatcher_(io, *this, Dispatching(options)) {}

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
  dispatcher_.set_mad_size(wire_mad_size_);
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
  backlog_.clear();
  Counters().backlog = 0;
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
  // Last, as always: a handler that sends again finds the transport closed.
  dispatcher_.Close(Unavailable("transport closed"), /*deferred=*/false);
}

void UmadTransport::SetUnsolicitedHandler(UnsolicitedHandler handler) {
  dispatcher_.SetUnsolicitedHandler(std::move(handler));
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
