// inform_client: an event subscriber written straight on libibumad, for end-to-end tests
// (run under libumad2sim on ibsim). It is what a host's management daemon does to learn
// of fabric events: register an SA-class (0x03) agent whose method mask includes Report,
// subscribe with SubnAdmSet(InformInfo), then answer every Report with a ReportResponse.
//
//   inform_client [--timeout-ms N] [--no-issm] TRAP
//
// Subscribes (generic, every issuer LID, any type and producer) to TRAP at the SM LID the
// port knows, then waits for a Report of TRAP, answering every Report that arrives.
//
// ibsim hands a QP1 request (the SM's Report is one) only to the client that holds the
// destination port's issm device (ibsim.c find_client), so by default this client opens it,
// as a host-side SA client on ibsim must.
//
// Holding issm sets IsSM in the port's CapabilityMask, so the SM asks this port for SMInfo
// (ibsim forwards it here too): the client registers the SMI classes and answers NOTACTIVE,
// which an SM ignores in its election (an SMP for a class nobody registered would crash
// libumad2sim's reader).
//
// Output (stdout, flushed per line): "subscribed status 0xS", then "report trap T issuer_lid
// L gid 0x..." per Report, "acked" after each ReportResponse. Exit 0 once TRAP was reported,
// 2 on timeout, 1 on any other error.
#include <arpa/inet.h>
#include <endian.h>
#include <fcntl.h>
#include <infiniband/umad.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "mad/attr/inform_info.h"
#include "mad/attr/notice.h"
#include "mad/attr/sm_info.h"
#include "mad/mad.h"

namespace {

using namespace ibsm;
using namespace ibsm::mad;

constexpr uint32_t kGsiQkey = 0x80010000;

void Say(const std::string& line) {
  std::fprintf(stdout, "%s\n", line.c_str());
  std::fflush(stdout);
}

int Fail(const std::string& why) {
  std::fprintf(stderr, "inform_client: %s\n", why.c_str());
  return 1;
}

std::string Hex(std::span<const uint8_t> b) {
  std::string s = "0x";
  char buf[4];
  for (uint8_t v : b) {
    std::snprintf(buf, sizeof(buf), "%02x", v);
    s += buf;
  }
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  int timeout_ms = 30000;
  bool issm = true;
  int trap = -1;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--timeout-ms" && i + 1 < argc) {
      timeout_ms = std::atoi(argv[++i]);
    } else if (a == "--no-issm") {
      issm = false;
    } else if (trap < 0) {
      trap = std::atoi(a.c_str());
    } else {
      trap = -1;
      break;
    }
  }
  if (trap < 0 || trap > 0xFFFF) {
    std::fprintf(stderr, "usage: inform_client [--timeout-ms N] [--no-issm] TRAP\n");
    return 1;
  }

  if (umad_init() < 0) return Fail("umad_init failed");
  umad_port_t port{};
  if (umad_get_port(nullptr, 0, &port) < 0) return Fail("no port");
  const std::string ca = port.ca_name;
  const int port_num = port.portnum;
  const uint16_t sm_lid = static_cast<uint16_t>(port.sm_lid);
  const uint16_t my_lid = static_cast<uint16_t>(port.base_lid);
  const uint64_t my_guid = be64toh(port.port_guid);
  umad_release_port(&port);
  if (sm_lid == 0) return Fail("the port knows no SM LID yet");

  const int fd = umad_open_port(ca.c_str(), port_num);
  if (fd < 0) return Fail("umad_open_port failed");
  // The method mask is a host bitmap by method number: Report (0x06) makes unsolicited
  // Reports reach this agent; responses to our own sends come regardless.
  long mask[16 / sizeof(long)] = {};
  mask[method::kReport / (8 * sizeof(long))] |= 1L << (method::kReport % (8 * sizeof(long)));
  const int agent = umad_register(fd, static_cast<int>(MgmtClass::kSubnAdm), kSaClassVersion, 0,
                                  mask);
  if (agent < 0) return Fail("umad_register(0x03) failed");
  long smi_mask[16 / sizeof(long)] = {};
  for (uint8_t m : {method::kGet, method::kSet})
    smi_mask[m / (8 * sizeof(long))] |= 1L << (m % (8 * sizeof(long)));
  const int agent_dr = umad_register(fd, static_cast<int>(MgmtClass::kSubnDirected), 1, 0,
                                     smi_mask);
  const int agent_lr = umad_register(fd, static_cast<int>(MgmtClass::kSubnLid), 1, 0, smi_mask);
  if (agent_dr < 0 || agent_lr < 0) return Fail("umad_register of the SMI classes failed");
  int issm_fd = -1;
  if (issm) {
    char path[256];
    if (umad_get_issm_path(ca.c_str(), port_num, path, sizeof(path)) < 0)
      return Fail("no issm device");
    issm_fd = ::open(path, O_RDWR | O_NONBLOCK);
    if (issm_fd < 0) return Fail(std::string("cannot open ") + path);
  }
  Say("port lid " + std::to_string(my_lid) + " sm_lid " + std::to_string(sm_lid));

  std::vector<uint8_t> buf(umad_size() + kMadSize, 0);
  auto mad_bytes = [&] { return static_cast<uint8_t*>(umad_get_mad(buf.data())); };
  auto send = [&](std::span<const uint8_t> mad, uint16_t dlid, uint32_t qpn, int tmo) {
    std::fill(buf.begin(), buf.end(), 0);
    std::memcpy(mad_bytes(), mad.data(), kMadSize);
    umad_set_addr(buf.data(), dlid, static_cast<int>(qpn), 0, kGsiQkey);
    return umad_send(fd, agent, buf.data(), static_cast<int>(kMadSize), tmo, 0);
  };

  // SubnAdmSet(InformInfo), Subscribe = 1.
  InformInfo ii;
  ii.lid_range_begin = kInformAllLids;
  ii.is_generic = 1;
  ii.subscribe = 1;
  ii.type = kInformAnyType;
  ii.trap_number_or_device_id = static_cast<uint16_t>(trap);
  ii.producer_type_or_vendor_id = kInformAnyProducer;
  ii.resp_time_value = 18;
  SaMad set;
  set.hdr.mgmt_class = static_cast<uint8_t>(MgmtClass::kSubnAdm);
  set.hdr.class_version = kSaClassVersion;
  set.hdr.method = method::kSet;
  set.hdr.attr_id = sa_attr::kInformInfo;
  set.hdr.tid = 0x1F0F0001;
  EncodeTo(ii, set.data);
  MadBytes out{};
  EncodeSa(set, out);
  if (send(out, sm_lid, 1, 1000) < 0) return Fail("umad_send of the InformInfo Set failed");

  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  bool subscribed = false;
  while (std::chrono::steady_clock::now() < deadline) {
    int len = static_cast<int>(kMadSize);
    std::fill(buf.begin(), buf.end(), 0);
    int r = umad_recv(fd, buf.data(), &len, 200);
    if (r < 0) continue;  // timeout or EINTR: look again until the deadline
    if (umad_status(buf.data()) != 0) {
      if (!subscribed) return Fail("the InformInfo Set was not delivered");
      continue;
    }
    std::vector<uint8_t> in(mad_bytes(), mad_bytes() + kMadSize);
    if (in[1] == static_cast<uint8_t>(MgmtClass::kSubnDirected) ||
        in[1] == static_cast<uint8_t>(MgmtClass::kSubnLid)) {
      Smp smp;
      if (!DecodeFrom(in, &smp).ok() || smp.method != method::kGet ||
          smp.attr_id != attr::kSmInfo)
        continue;
      ib_mad_addr_t* from = umad_get_mad_addr(buf.data());
      const uint16_t slid = ntohs(from->lid);
      SmInfo info;
      info.guid = my_guid;
      info.sm_state = SmState::kNotActive;
      smp.method = method::kGetResp;
      if (smp.is_directed()) smp.direction = 1;
      smp.data.fill(0);
      EncodeTo(info, smp.data);
      MadBytes resp{};
      EncodeTo(smp, resp);
      std::fill(buf.begin(), buf.end(), 0);
      std::memcpy(mad_bytes(), resp.data(), kMadSize);
      umad_set_addr(buf.data(), smp.is_directed() ? 0xFFFF : slid, 0, 0, 0);
      umad_send(fd, smp.is_directed() ? agent_dr : agent_lr, buf.data(),
                static_cast<int>(kMadSize), 0, 0);
      continue;
    }
    SaMad m;
    if (!DecodeSa(in, &m).ok()) continue;
    if (m.hdr.method == method::kGetResp && m.hdr.attr_id == sa_attr::kInformInfo) {
      Say("subscribed status " + std::to_string(m.hdr.status));
      if (m.hdr.status != 0) return 1;
      subscribed = true;
      continue;
    }
    if (m.hdr.method != method::kReport || m.hdr.attr_id != attr::kNotice) continue;
    auto n = Decode<Notice>(std::span<const uint8_t>(m.data));
    if (!n.ok()) continue;
    std::string line = "report trap " + std::to_string(n->trap_number_or_device_id) +
                       " issuer_lid " + std::to_string(n->issuer_lid) + " gid " +
                       Hex(n->issuer_gid);
    if (n->trap_number_or_device_id >= trap::kGidInService &&
        n->trap_number_or_device_id <= trap::kMcastGroupDeleted)
      line += " details_gid " + Hex(Trap64Gid(*n));
    Say(line);
    // ReportResponse (13.4.9): same TID and Notice, back to where the Report came from.
    ib_mad_addr_t* from = umad_get_mad_addr(buf.data());
    const uint16_t slid = ntohs(from->lid);
    const uint32_t sqpn = ntohl(from->qpn);
    SaMad resp = m;
    resp.hdr.method = method::kReportResp;
    EncodeSa(resp, out);
    if (send(out, slid, sqpn == 0 ? 1 : sqpn, 0) < 0) return Fail("ReportResponse not sent");
    Say("acked");
    if (n->trap_number_or_device_id == trap) {
      if (issm_fd >= 0) ::close(issm_fd);
      umad_unregister(fd, agent);
      umad_unregister(fd, agent_dr);
      umad_unregister(fd, agent_lr);
      umad_close_port(fd);
      return 0;
    }
  }
  return 2;
}
