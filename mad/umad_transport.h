// UmadTransport: mad::Transport over libibumad, for real HCAs and for ibsim through its
// preload library (libumad2sim.so).
//
// Why a receiver thread and not the umad fd in the Asio reactor: under libumad2sim the "fd"
// umad_open_port returns is a fake number (>= 1024) that only the preloaded read/write/poll
// understand; epoll cannot watch it. So, as OpenSM's vendor layer does, one thread blocks in
// umad_recv (poll with a 100 ms timeout so Close can stop it) and posts every MAD to the
// io_context.
//
// Matching, timers, retries, RMPP and the in-flight budget are mad::MadDispatcher's, on the
// io_context thread (ARCHITECTURE.md "The MAD path"); this class is the port, its agents, the
// receiver thread and the write path. Agents are registered with rmpp_version 0 so the kernel
// does no RMPP, and libumad2sim ignores umad's timeout_ms, so the dispatcher's timers are
// authoritative; the kernel is still handed each request's timeout (it keeps the request to
// match the response). Responses are matched by management class and the low 32 bits of the
// TID: the kernel's agent (and libumad2sim and ibsim) rewrite the high 32 bits, as OpenSM's
// get_madw assumes.
//
// Writes never block the io thread (README "MAD transport: backpressure"). libumad2sim's
// write() holds its global lock while it writes the MAD to ibsim's socket, and its own
// receiver thread needs that lock to queue what ibsim sends back; a blocking write into a
// full socket therefore wedges both directions (ibsim spins writing to us, we wait for
// ibsim to read). So the ibsim data socket is made non-blocking, a refused write waits in a
// bounded backlog, and the backlog is retried when the socket is writable again (a short
// timer on hardware, whose umad fd libibumad already opens non-blocking). On top of that
// one budget (UmadOptions::max_in_flight, kept by the dispatcher) bounds the requests
// outstanding across every user; waiting requests are started by class: SMPs first, then
// SA, vendor classes, PerfMgt last.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include <boost/asio/io_context.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/steady_timer.hpp>

#include "base/status.h"
#include "base/types.h"
#include "mad/mad_dispatcher.h"
#include "mad/rmpp_inbound.h"
#include "mad/transport.h"

namespace ibsm::mad {

// The bytes of a MAD ibsim carries intact (see UmadTransport::Open).
inline constexpr size_t kIbsimMadSize = 224;

struct UmadOptions {
  // Port selection, as OpenSM's -g: a non-zero port_guid wins; else ca_name/port_num (empty
  // name / 0 port: libibumad's default, the first CA and its first active port).
  std::string ca_name;
  int port_num = 0;
  Guid port_guid{0};
  // Open the port's issm device so the port advertises IsSM (ibsim then hands this client
  // every QP1 request for the port, SA queries and SMInfo included).
  bool claim_sm = false;
  // Register as the SA (class 0x03 requests reach us). A pure SA client can turn it off.
  bool sa_server = true;
  // RMPP transfers we send as responses (Post) use these per-window timers.
  SendOptions rmpp_post{std::chrono::milliseconds(200), 3};
  // An inbound RMPP transfer with no new segment for this long is abandoned.
  std::chrono::milliseconds rmpp_receive_idle{std::chrono::seconds(10)};
  // Caps on what peers' inbound RMPP transfers may hold (mad/rmpp_inbound.h); its `idle` is
  // rmpp_receive_idle above.
  RmppInboundLimits rmpp_inbound;
  // Requests (Send) and outbound RMPP transfers (Post) outstanding at once, across every
  // user of the transport; more requests wait, by class priority. 0: no limit. Responses
  // that fit one MAD are never held back.
  size_t max_in_flight = 256;
  // MADs the medium refused that may wait to be written; past it a write fails (counted in
  // backlog_dropped). The budget above keeps it far from full in practice.
  size_t max_backlog = 4096;
  // MADs the receiver thread may have handed to the io thread and not yet seen handled: past
  // half of it unsolicited MADs are dropped, past all of it answers to our requests too
  // (counted in inbound_dropped), so a flood cannot grow the queue without bound.
  size_t max_inbound_queued = 8192;
};

// Whether a MAD the receiver thread read answers something of ours: a response, an RMPP
// ACK/STOP/ABORT of a transfer, or our own send come back (`umad_status` non-zero).
bool AnswersUs(std::span<const uint8_t> mad, uint32_t umad_status);
// Whether it is handed to the io thread with `queued` MADs already waiting there.
inline bool InboundAdmitted(size_t queued, bool answers_us, size_t cap) {
  return queued < (answers_us ? cap : cap / 2);
}

class UmadTransport final : public Transport, private MadWire {
 public:
  // Opens the port, registers the agents (SMI LID-routed 0x01 and directed 0x81 with
  // Get/Set/Trap/TrapRepress, SA 0x03 with the SA's request methods, PerfMgt 0x04 as client),
  // optionally claims the SM port, and starts the receiver thread.
  // REQUIRES: called on `io`'s thread; the transport must be destroyed before `io`.
  static Result<std::unique_ptr<UmadTransport>> Open(boost::asio::io_context& io,
                                                     const UmadOptions& options);

  ~UmadTransport() override;
  UmadTransport(const UmadTransport&) = delete;
  UmadTransport& operator=(const UmadTransport&) = delete;

  void Send(MadMessage request, const SendOptions& options, ResponseHandler done) override;
  Status Post(MadMessage message) override;
  void SetUnsolicitedHandler(UnsolicitedHandler handler) override;
  Result<LocalPort> QueryLocalPort() override;
  const TransportCounters& counters() const override { return dispatcher_.counters(); }
  void Close() override;

 private:
  struct Inbound;
  struct Outbound;

  UmadTransport(boost::asio::io_context& io, const UmadOptions& options);
  Status OpenPort();
  void ReceiverLoop();
  void OnInbound(Inbound in);
  // A lone RMPP segment whose data runs past wire_mad_size_ (ibsim).
  bool TooBigForTheWire(std::span<const uint8_t> mad) const;
  // MadWire: one MAD to its agent and address, or into the backlog.
  Status WriteMad(MadMessage mad, std::chrono::milliseconds kernel_timeout) override;
  Status Backlog(Outbound out);
  void FlushBacklog();
  void ArmFlush();
  void FindIbsimSocket();
  // The medium's own counters (sent, backlog, inbound drops) live beside the dispatcher's.
  TransportCounters& Counters() { return dispatcher_.counters(); }

  boost::asio::io_context& io_;
  UmadOptions options_;
  // Guards asynchronous callbacks: they run only while this token is alive.
  std::shared_ptr<char> alive_ = std::make_shared<char>(0);
  int port_id_ = -1;
  int issm_fd_ = -1;
  size_t wire_mad_size_ = kMadSize;  // bytes of a MAD the medium carries intact (Open)
  std::string ca_name_;
  int port_num_ = 0;
  int agent_smi_ = -1, agent_dr_ = -1, agent_sa_ = -1, agent_perf_ = -1;
  int agent_am_ = -1;  // SHARP aggregation management (class 0x0B); -1 when refused
  std::atomic<bool> stop_{false};
  std::atomic<size_t> inbound_queued_{0};    // handed to the io thread, not yet handled
  std::atomic<uint64_t> inbound_dropped_{0};  // receiver thread's count (counters mirror it)
  std::thread receiver_;
  bool closed_ = false;

  // Backpressure (see the top of this file).
  std::deque<Outbound> backlog_;
  std::optional<boost::asio::posix::stream_descriptor> ibsim_socket_;  // a dup, for waits
  boost::asio::steady_timer flush_timer_;
  bool flush_timer_armed_ = false;
  bool write_wait_armed_ = false;
  uint64_t backlog_full_logged_ = 0;

  MadDispatcher dispatcher_;
};

}  // namespace ibsm::mad
