// umad_probe: a small client of UmadTransport for end-to-end tests (run under libumad2sim).
//
//   umad_probe [options] local                  the local port only
//   umad_probe [options] nodeinfo 0,1,3         DR SMP NodeInfo Get along a path (smpquery -D
//                                               syntax: the leading 0 is the local port)
//   umad_probe [options] rmpp-serve             claim the SM port, answer one SA request by
//                                               echoing its payload in a GetResp (RMPP), exit
//   umad_probe [options] rmpp-send LID BYTES    send an SA Set carrying BYTES of payload to LID,
//                                               print the response's payload size and checksum
//   umad_probe [options] rmpp-forge LID COUNT   send LID the first segment only of COUNT SA Set
//                                               RMPP transfers (TIDs 1..COUNT), as a peer that
//                                               opens reassembly sessions and never ends them
// Options: --ca NAME --port N --guid 0xGUID --sm --timeout-ms N --retries N --linger-ms N
//
// Output: "key value" lines. Exit 0 on success, 2 on timeout, 1 on any other error.
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <functional>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "mad/attr/node_info.h"
#include "mad/mad.h"
#include "mad/umad_transport.h"

namespace {

using namespace ibsm;
using namespace ibsm::mad;

int Usage() {
  std::fprintf(stderr,
               "usage: umad_probe [--ca NAME] [--port N] [--guid 0xGUID] [--sm] "
               "[--timeout-ms N] [--retries N] [--linger-ms N] "
               "local | nodeinfo PATH | rmpp-serve | rmpp-send LID BYTES | "
               "rmpp-forge LID COUNT\n");
  return 1;
}

int ExitFor(const Status& s) { return s.code() == StatusCode::kTimeout ? 2 : 1; }

std::string Head(std::span<const uint8_t> b) {
  std::string s;
  for (size_t i = 0; i < b.size() && i < 8; ++i) s += fmt::format("{:02x}", b[i]);
  return s;
}

uint8_t Pattern(size_t i) { return static_cast<uint8_t>(i * 13 + 1); }

// libumad2sim delivers only the first 224 bytes of each MAD (its receive buffer is
// sizeof(sim_request) - umad_size() = 288 - 64 bytes); bytes 224-255 of every SA segment, i.e.
// the last 32 of its 200 data bytes, come out as garbage. Counts pattern mismatches in the
// bytes that survive ibsim.
size_t PatternMismatches(std::span<const uint8_t> payload) {
  size_t bad = 0;
  for (size_t i = 0; i < payload.size(); ++i)
    if (i % kSaDataSize < kSaDataSize - 32 && payload[i] != Pattern(i)) ++bad;
  return bad;
}

uint32_t Checksum(std::span<const uint8_t> b) {
  uint32_t h = 2166136261u;  // FNV-1a
  for (uint8_t c : b) h = (h ^ c) * 16777619u;
  return h;
}

void PrintCounters(const TransportCounters& c) {
  std::printf("counter_sent %llu\ncounter_received %llu\ncounter_timeouts %llu\n"
              "counter_retries %llu\ncounter_malformed %llu\ncounter_unmatched %llu\n"
              "counter_rmpp_reassembled %llu\ncounter_rmpp_aborted %llu\n",
              (unsigned long long)c.sent, (unsigned long long)c.received,
              (unsigned long long)c.timeouts, (unsigned long long)c.retries,
              (unsigned long long)c.malformed, (unsigned long long)c.unmatched,
              (unsigned long long)c.rmpp_reassembled, (unsigned long long)c.rmpp_aborted);
  std::printf("counter_write_eagain %llu\ncounter_backlog_high_water %llu\n"
              "counter_backlog_dropped %llu\ncounter_in_flight_high_water %llu\n"
              "counter_budget_waits %llu\ncounter_rmpp_refused %llu\n"
              "counter_inbound_dropped %llu\n",
              (unsigned long long)c.write_eagain, (unsigned long long)c.backlog_high_water,
              (unsigned long long)c.backlog_dropped, (unsigned long long)c.in_flight_high_water,
              (unsigned long long)c.budget_waits, (unsigned long long)c.rmpp_refused,
              (unsigned long long)c.inbound_dropped);
}

}  // namespace

int main(int argc, char** argv) {
  UmadOptions opts;
  SendOptions send;
  std::chrono::milliseconds linger{1500};
  std::vector<std::string> args;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> std::string { return i + 1 < argc ? argv[++i] : ""; };
    if (a == "--ca") opts.ca_name = next();
    else if (a == "--port") opts.port_num = std::atoi(next().c_str());
    else if (a == "--guid") opts.port_guid = Guid{std::strtoull(next().c_str(), nullptr, 0)};
    else if (a == "--sm") opts.claim_sm = true;
    else if (a == "--timeout-ms") send.timeout = std::chrono::milliseconds(std::atoi(next().c_str()));
    else if (a == "--retries") send.retries = std::atoi(next().c_str());
    else if (a == "--linger-ms") linger = std::chrono::milliseconds(std::atoi(next().c_str()));
    else args.push_back(a);
  }
  if (args.empty()) return Usage();
  const std::string cmd = args[0];
  if (cmd == "rmpp-serve") opts.claim_sm = true;

  boost::asio::io_context io;
  auto t = UmadTransport::Open(io, opts);
  if (!t.ok()) {
    std::fprintf(stderr, "umad_probe: %s\n", t.status().ToString().c_str());
    return 1;
  }
  UmadTransport& transport = **t;
  auto lp = transport.QueryLocalPort();
  if (!lp.ok()) {
    std::fprintf(stderr, "umad_probe: %s\n", lp.status().ToString().c_str());
    return 1;
  }
  std::printf("local_ca %s\nlocal_port %u\nlocal_node_guid %s\nlocal_port_guid %s\n"
              "local_lid %u\nlocal_sm_lid %u\nlocal_lmc %u\nlocal_state %u\n",
              lp->ca_name.c_str(), lp->port_num.value(), ToString(lp->node_guid).c_str(),
              ToString(lp->port_guid).c_str(), lp->lid.value(), lp->sm_lid.value(), lp->lmc,
              lp->state);
  std::fflush(stdout);

  int rc = 0;
  if (cmd == "local") {
    // nothing more
  } else if (cmd == "nodeinfo" && args.size() == 2) {
    std::vector<uint8_t> path;
    std::string p = args[1];
    size_t pos = 0;
    bool leading = true;
    while (pos <= p.size()) {
      size_t comma = p.find(',', pos);
      std::string tok = p.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
      int v = std::atoi(tok.c_str());
      if (!(leading && v == 0)) path.push_back(static_cast<uint8_t>(v));
      leading = false;
      if (comma == std::string::npos) break;
      pos = comma + 1;
    }
    Smp smp = MakeDrSmp(method::kGet, attr::kNodeInfo, 0, path);
    transport.Send(ToMessage(smp), send, [&](Result<MadMessage> r) {
      if (!r.ok()) {
        std::printf("error %s\n", r.status().ToString().c_str());
        rc = ExitFor(r.status());
        return;
      }
      auto resp = Decode<Smp>(r->bytes);
      if (!resp.ok()) {
        std::printf("error %s\n", resp.status().ToString().c_str());
        rc = 1;
        return;
      }
      std::printf("mad_status %#x\n", resp->status);
      auto ni = Decode<NodeInfo>(resp->data);
      if (!ni.ok()) {
        rc = 1;
        return;
      }
      for (const auto& f : Layout<NodeInfo>::kFields) {
        uint64_t v = f.get(*ni, 0);
        std::printf("%.*s %s\n", static_cast<int>(f.name.size()), f.name.data(),
                    FormatValue(f.format, f.bit_width, &v, 1).c_str());
      }
    });
    io.run();
  } else if (cmd == "rmpp-serve") {
    bool served = false;
    transport.SetUnsolicitedHandler([&](MadMessage m) {
      auto hdr = m.header();
      if (!hdr.ok() || hdr->mgmt_class != static_cast<uint8_t>(MgmtClass::kSubnAdm) || served)
        return;
      served = true;
      std::span<const uint8_t> payload(m.bytes);
      payload = payload.subspan(std::min(m.bytes.size(), kSaHeaderSize));
      std::printf("request_mismatches %zu\n", PatternMismatches(payload));
      std::printf("request_bytes %zu\nrequest_checksum %#x\nrequest_head %s\n", payload.size(),
                  Checksum(payload), Head(payload).c_str());
      MadMessage resp = m;
      hdr->method = method::kGetResp;
      EncodeTo(*hdr, resp.bytes);
      Status s = transport.Post(resp);
      std::printf("post %s\n", s.ToString().c_str());
      std::fflush(stdout);
    });
    std::printf("ready 1\n");
    std::fflush(stdout);
    // Inbound MADs arrive as handlers posted by the receiver thread: keep run() from
    // returning for lack of work until the linger time after the request has passed (the ACKs
    // of our response must be handled).
    auto guard = boost::asio::make_work_guard(io);
    boost::asio::steady_timer stop(io);
    std::function<void()> check = [&] {
      stop.expires_after(served ? linger : std::chrono::milliseconds(50));
      stop.async_wait([&, was_served = served](const boost::system::error_code&) {
        if (was_served) {
          guard.reset();
          io.stop();
        } else {
          check();
        }
      });
    };
    check();
    io.run_for(std::chrono::seconds(60));
  } else if (cmd == "rmpp-send" && args.size() == 3) {
    SaMad sa;
    sa.hdr.mgmt_class = static_cast<uint8_t>(MgmtClass::kSubnAdm);
    sa.hdr.class_version = 2;
    sa.hdr.method = method::kSet;
    sa.hdr.attr_id = 0x0031;  // ServiceRecord
    MadMessage m;
    m.bytes.resize(kMadSize);
    EncodeSa(sa, m.bytes);
    m.bytes.resize(kSaHeaderSize);
    size_t n = std::strtoul(args[2].c_str(), nullptr, 0);
    for (size_t i = 0; i < n; ++i) m.bytes.push_back(Pattern(i));
    std::span<const uint8_t> sent(m.bytes);
    std::printf("request_checksum %#x\nrequest_head %s\n", Checksum(sent.subspan(kSaHeaderSize)),
                Head(sent.subspan(kSaHeaderSize)).c_str());
    m.addr.lid = Lid{static_cast<uint16_t>(std::strtoul(args[1].c_str(), nullptr, 0))};
    transport.Send(std::move(m), send, [&](Result<MadMessage> r) {
      if (!r.ok()) {
        std::printf("error %s\n", r.status().ToString().c_str());
        rc = ExitFor(r.status());
        return;
      }
      std::span<const uint8_t> payload(r->bytes);
      payload = payload.subspan(std::min(r->bytes.size(), kSaHeaderSize));
      std::printf("response_mismatches %zu\n", PatternMismatches(payload));
      std::printf("response_bytes %zu\nresponse_checksum %#x\nresponse_head %s\n",
                  payload.size(), Checksum(payload), Head(payload).c_str());
    });
    io.run_for(std::chrono::seconds(30));
  } else if (cmd == "rmpp-forge" && args.size() == 3) {
    const size_t mad_size = lp->ca_name.rfind("ibsim", 0) == 0 ? kIbsimMadSize : kMadSize;
    const Lid to{static_cast<uint16_t>(std::strtoul(args[1].c_str(), nullptr, 0))};
    const size_t count = std::strtoul(args[2].c_str(), nullptr, 0);
    size_t posted = 0;
    for (size_t tid = 1; tid <= count; ++tid) {
      SaMad sa;
      sa.hdr.mgmt_class = static_cast<uint8_t>(MgmtClass::kSubnAdm);
      sa.hdr.class_version = 2;
      sa.hdr.method = method::kSet;
      sa.hdr.attr_id = 0x0031;  // ServiceRecord
      sa.hdr.tid = tid;
      std::vector<uint8_t> msg(kMadSize);
      EncodeSa(sa, msg);
      msg.resize(kSaHeaderSize);
      for (size_t i = 0; i < 4000; ++i) msg.push_back(Pattern(i));
      auto sender = RmppSender::Create(msg, kSaHeaderSize, mad_size);
      if (!sender.ok()) return 1;
      MadBytes first = sender->NextSegments().front();
      MadMessage m;
      m.bytes.assign(first.begin(), first.end());
      m.addr.lid = to;
      if (transport.Post(std::move(m)).ok()) ++posted;
    }
    std::printf("forged %zu\n", posted);
    // The ACKs and ABORTs that come back are read (posted by the receiver thread, hence the
    // guard); then the counters are printed.
    auto guard = boost::asio::make_work_guard(io);
    io.run_for(linger);
  } else {
    return Usage();
  }
  PrintCounters(transport.counters());
  std::fflush(stdout);
  return rc;
}
