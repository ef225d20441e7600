// mcast_client: joins or leaves a multicast group through the SA, as a host's IPoIB or
// librdmacm would (SubnAdmSet / SubnAdmDelete of MCMemberRecord), for end-to-end tests
// under libumad2sim.
//
//   mcast_client [--timeout-ms N] [--retries N] join MGID [--create] [--state N]
//   mcast_client [--timeout-ms N] [--retries N] leave MGID [--state N]
//
// MGID in IPv6 notation (ff12:a01b::42). The PortGID is the local port's (fe80::GUID), the
// request goes to the SM LID the local port knows. A create names Q_Key 0x1234, P_Key
// 0xffff, SL 0, FlowLabel 0, TClass 0.
//
// Output: "key value" lines (status, mlid, join_state, mgid). Exit 0 when the SA answered
// with status 0, 3 when it answered with an error status, 2 on timeout, 1 otherwise.
#include <arpa/inet.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <boost/asio/io_context.hpp>

#include "mad/attr/mc_member_record.h"
#include "mad/mad.h"
#include "mad/umad_transport.h"

namespace {

using namespace ibsm;
using namespace ibsm::mad;

int Usage() {
  std::fprintf(stderr,
               "usage: mcast_client [--timeout-ms N] [--retries N] join|leave MGID "
               "[--create] [--state N]\n");
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  UmadOptions opts;
  SendOptions send{std::chrono::milliseconds(1000), 3};
  bool create = false;
  int state = join_state::kFull;
  std::vector<std::string> args;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> std::string { return i + 1 < argc ? argv[++i] : ""; };
    if (a == "--timeout-ms") send.timeout = std::chrono::milliseconds(std::atoi(next().c_str()));
    else if (a == "--retries") send.retries = std::atoi(next().c_str());
    else if (a == "--create") create = true;
    else if (a == "--state") state = std::atoi(next().c_str());
    else args.push_back(a);
  }
  if (args.size() != 2 || (args[0] != "join" && args[0] != "leave")) return Usage();
  uint8_t raw[16];
  if (inet_pton(AF_INET6, args[1].c_str(), raw) != 1) {
    std::fprintf(stderr, "mcast_client: %s is not an MGID\n", args[1].c_str());
    return 1;
  }
  GidBytes mgid_bytes;
  std::copy(raw, raw + 16, mgid_bytes.begin());

  boost::asio::io_context io;
  auto t = UmadTransport::Open(io, opts);
  if (!t.ok()) {
    std::fprintf(stderr, "mcast_client: %s\n", t.status().ToString().c_str());
    return 1;
  }
  UmadTransport& transport = **t;
  auto lp = transport.QueryLocalPort();
  if (!lp.ok() || lp->sm_lid.value() == 0) {
    std::fprintf(stderr, "mcast_client: no SM LID on the local port\n");
    return 1;
  }

  McMemberRecord rec;
  rec.set_mgid(ToGid(mgid_bytes));
  rec.set_port_gid(Gid{0xfe80000000000000ull, lp->port_guid.value()});
  rec.join_state = static_cast<uint8_t>(state);
  uint64_t mask = mcr_comp::kJoin;
  if (create) {
    rec.q_key = 0x1234;
    rec.p_key = 0xffff;
    mask = mcr_comp::kCreate;
  }
  SaMad m;
  m.hdr.mgmt_class = static_cast<uint8_t>(MgmtClass::kSubnAdm);
  m.hdr.class_version = kSaClassVersion;
  m.hdr.method = args[0] == "join" ? method::kSet : method::kDelete;
  m.hdr.attr_id = sa_attr::kMcMemberRecord;
  m.comp_mask = mask;
  EncodeRecord(rec, std::span<uint8_t>(m.data));
  MadMessage msg;
  msg.bytes.resize(kMadSize);
  EncodeSa(m, msg.bytes);
  msg.addr.lid = lp->sm_lid;
  msg.addr.qpn = 1;
  msg.addr.qkey = 0x80010000;

  int rc = 1;
  transport.Send(std::move(msg), send, [&](Result<MadMessage> r) {
    if (!r.ok()) {
      std::printf("error %s\n", r.status().ToString().c_str());
      rc = r.status().code() == StatusCode::kTimeout ? 2 : 1;
      return;
    }
    std::vector<uint8_t> bytes = r->bytes;
    if (bytes.size() < kMadSize) bytes.resize(kMadSize, 0);
    SaMad resp;
    if (!DecodeSa(bytes, &resp).ok()) {
      std::printf("error undecodable answer\n");
      return;
    }
    std::printf("status 0x%04x\n", resp.hdr.status);
    if (resp.hdr.status != 0) {
      rc = 3;
      return;
    }
    auto got = DecodeRecord<McMemberRecord>(std::span<const uint8_t>(resp.data));
    if (!got.ok()) {
      std::printf("error %s\n", got.status().ToString().c_str());
      return;
    }
    char text[INET6_ADDRSTRLEN];
    GidBytes g = ToGidBytes(got->mgid());
    inet_ntop(AF_INET6, g.data(), text, sizeof(text));
    std::printf("mgid %s\nmlid 0x%04x\njoin_state %u\n", text, got->mlid, got->join_state);
    rc = 0;
  });
  io.run_for(std::chrono::seconds(30));
  return rc;
}
