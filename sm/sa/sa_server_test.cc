#include "sm/sa/sa_server.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <optional>
#include <set>

#include <boost/asio/io_context.hpp>

#include <filesystem>

#include "fabric/generators.h"
#include "ha/state_store.h"
#include "mad/attr/class_port_info.h"
#include "mad/testing/fake_transport.h"
#include "sim/sim_transport.h"
#include "sim/simulator.h"
#include "sm/sa/sa_path.h"
#include "sm/sweep/subnet_manager.h"
#include "sm/testing/test_util.h"

namespace ibsm::sm {
namespace {

using testutil::CaPorts;

using mad::MadMessage;
using mad::SaMad;

// An SA answer as a client reads it: status, and the records at the attribute offset.
struct Answer {
  uint8_t method = 0;
  uint16_t status = 0;
  uint16_t attr_offset = 0;
  std::vector<std::vector<uint8_t>> records;
  std::vector<uint8_t> bytes;
};

// The SM on the first CA of `fabric` after one heavy sweep, and an SA client (a
// SimTransport) on the second CA asking it over the simulated fabric.
class SaOnSimulator {
 public:
  // `clock` and `store` (both optional) go to the SubnetManager.
  // `tune` (optional) changes the SM's options before it starts.
  explicit SaOnSimulator(const Fabric& fabric, uint8_t lmc = 0, const Clock* clock = nullptr,
                         ha::StateStore* store = nullptr,
                         const std::function<void(SubnetManagerOptions*)>& tune = nullptr)
      : fabric_(fabric), sim_(fabric), cas_(CaPorts(fabric)),
        sm_transport_(io_, sim_, cas_.at(0)), client_(io_, sim_, cas_.at(1)) {
    SubnetManagerOptions o;
    o.once = true;
    o.send.timeout = std::chrono::milliseconds(20);
    o.send.retries = 4;
    o.sm_priority = 5;
    o.lids.lmc = lmc;
    if (tune) tune(&o);
    sm_ = std::make_unique<SubnetManager>(io_, sm_transport_, clock ? *clock : clock_, store, o);
    sm_->Start([this](const SweepStats& s) {
      up_ = s.subnet_up;
      io_.stop();
    });
    io_.run();
  }

  bool up() const { return up_; }
  SubnetManager& sm() { return *sm_; }
  sim::Simulator& sim() { return sim_; }
  const Fabric& fabric() const { return fabric_; }
  PortId sm_port() const { return cas_[0]; }
  PortId client_port() const { return cas_[1]; }

  Answer Ask(uint8_t method, uint16_t attr, uint64_t comp_mask,
             std::span<const uint8_t> record = {}, uint32_t attr_mod = 0,
             uint64_t sm_key = 0) {
    SaMad m;
    m.hdr.mgmt_class = static_cast<uint8_t>(mad::MgmtClass::kSubnAdm);
    m.hdr.class_version = mad::kSaClassVersion;
    m.hdr.method = method;
    m.hdr.attr_id = attr;
    m.hdr.attr_mod = attr_mod;
    m.comp_mask = comp_mask;
    m.sm_key = sm_key;
    std::copy(record.begin(), record.end(), m.data.begin());
    MadMessage msg;
    msg.bytes.resize(mad::kMadSize);
    mad::EncodeSa(m, msg.bytes);
    msg.addr.lid = sm_->sm_lid();
    return Send(std::move(msg));
  }

  Answer Send(MadMessage msg) {
    std::optional<Result<MadMessage>> got;
    client_.Send(std::move(msg), mad::SendOptions{std::chrono::milliseconds(500), 2},
                 [&](Result<MadMessage> r) {
                   got = std::move(r);
                   io_.stop();
                 });
    io_.restart();
    io_.run();
    Answer a;
    EXPECT_TRUE(got && got->ok()) << (got ? got->status().message() : "no answer");
    if (!got || !got->ok()) return a;
    a.bytes = (*got)->bytes;
    // A reassembled RMPP answer is trimmed to its payload: the headers still decode.
    std::vector<uint8_t> padded = a.bytes;
    if (padded.size() < mad::kMadSize) padded.resize(mad::kMadSize, 0);
    SaMad resp;
    EXPECT_TRUE(mad::DecodeSa(padded, &resp).ok());
    a.method = resp.hdr.method;
    a.status = resp.hdr.status;
    a.attr_offset = resp.attr_offset;
    size_t stride = size_t{resp.attr_offset} * 8;
    if (a.status == 0 && stride > 0) {
      size_t end = a.method == mad::method::kGetResp ? mad::kSaHeaderSize + stride
                                                     : a.bytes.size();
      for (size_t at = mad::kSaHeaderSize; at + stride <= end; at += stride)
        a.records.emplace_back(a.bytes.begin() + at, a.bytes.begin() + at + stride);
    }
    return a;
  }

  // PathRecord has no SaRecord<> entry (it embeds no SMP attribute): plain EncodeTo.
  Answer AskPath(uint8_t method, uint64_t comp_mask, const mad::PathRecord& r) {
    std::vector<uint8_t> buf(mad::Layout<mad::PathRecord>::kSize);
    mad::EncodeTo(r, buf);
    return Ask(method, mad::sa_attr::kPathRecord, comp_mask, buf);
  }

  template <typename R>
  Answer AskFor(uint8_t method, uint64_t comp_mask, const R& r, uint32_t attr_mod = 0,
                uint64_t sm_key = 0) {
    std::vector<uint8_t> buf(mad::Layout<R>::kSize);
    mad::EncodeRecord(r, buf);
    return Ask(method, mad::SaRecord<R>::kAttrId, comp_mask, buf, attr_mod, sm_key);
  }

 private:
  Fabric fabric_;
  boost::asio::io_context io_;
  sim::Simulator sim_;
  std::vector<PortId> cas_;
  sim::SimTransport sm_transport_;
  sim::SimTransport client_;
  SystemClock clock_;
  std::unique_ptr<SubnetManager> sm_;
  bool up_ = false;
};

template <typename R>
std::vector<R> Decode(const Answer& a) {
  std::vector<R> out;
  for (const auto& rec : a.records) {
    auto r = mad::DecodeRecord<R>(rec);
    EXPECT_TRUE(r.ok());
    if (r.ok()) out.push_back(*r);
  }
  return out;
}

Fabric Ft2(int k) { return FatTree2(k).value(); }

constexpr uint64_t kLid = 1u << 0;

TEST(SaServerTest, NodeRecordTableListsEveryEndPortOfTheFabric) {
  SaOnSimulator t(Ft2(4));
  ASSERT_TRUE(t.up());
  Answer a = t.Ask(mad::method::kGetTable, mad::sa_attr::kNodeRecord, 0);
  EXPECT_EQ(a.method, mad::method::kGetTableResp);
  EXPECT_EQ(a.status, 0);
  EXPECT_EQ(a.attr_offset, 14);
  auto nrs = Decode<mad::NodeRecord>(a);
  const Fabric& f = t.fabric();
  EXPECT_EQ(nrs.size(), f.node_count());  // FatTree2: single-port CAs and switches
  std::set<uint64_t> guids, want;
  for (const auto& nr : nrs) {
    guids.insert(nr.node_info.node_guid);
    auto n = f.FindNode(Guid{nr.node_info.node_guid});
    ASSERT_TRUE(n.has_value());
    EXPECT_EQ(nr.node_description.str(), t.sim().node_description(*n));
    EXPECT_NE(nr.lid, 0);
    PortNum end{static_cast<uint8_t>(f.node(*n).is_switch() ? 0 : 1)};
    EXPECT_EQ(nr.lid, t.sim().port_info(f.port_id(*n, end)).lid);
  }
  for (const auto& n : f.nodes()) want.insert(n.guid.value());
  EXPECT_EQ(guids, want);
}

TEST(SaServerTest, GetOfOneLidReturnsThatNodeAndOnlyIt) {
  SaOnSimulator t(Ft2(4));
  ASSERT_TRUE(t.up());
  const Fabric& f = t.fabric();
  PortId target = CaPorts(f).back();
  mad::NodeRecord want;
  want.lid = t.sim().port_info(target).lid;
  Answer a = t.AskFor(mad::method::kGet, kLid, want);
  EXPECT_EQ(a.method, mad::method::kGetResp);
  ASSERT_EQ(a.status, 0);
  auto nrs = Decode<mad::NodeRecord>(a);
  ASSERT_EQ(nrs.size(), 1u);
  EXPECT_EQ(nrs[0].lid, want.lid);
  EXPECT_EQ(nrs[0].node_info.port_guid, f.port(target).guid.value());
  EXPECT_EQ(nrs[0].node_info.node_type, mad::NodeType::kCa);
}

TEST(SaServerTest, GetAnswersNoRecordsOrTooManyRecordsAsSaStatus) {
  SaOnSimulator t(Ft2(4));
  ASSERT_TRUE(t.up());
  mad::NodeRecord none;
  none.lid = 0xBFFF;
  EXPECT_EQ(t.AskFor(mad::method::kGet, kLid, none).status, mad::sa_status::kNoRecords);
  EXPECT_EQ(t.Ask(mad::method::kGet, mad::sa_attr::kNodeRecord, 0).status,
            mad::sa_status::kTooManyRecords);
  // A GetTable with no match is an empty table, not an error.
  Answer empty = t.AskFor(mad::method::kGetTable, kLid, none);
  EXPECT_EQ(empty.status, 0);
  EXPECT_TRUE(empty.records.empty());
  EXPECT_EQ(t.sm().sa().counters().by_error.at(mad::sa_status::kNoRecords), 1u);
}

TEST(SaServerTest, NodeRecordsSelectedByNodeGuidAndByNodeType) {
  SaOnSimulator t(Ft2(4));
  ASSERT_TRUE(t.up());
  const Fabric& f = t.fabric();
  NodeId sw = 0;
  while (!f.node(sw).is_switch()) ++sw;
  mad::NodeRecord want;
  want.node_info.node_guid = f.node(sw).guid.value();
  auto by_guid = Decode<mad::NodeRecord>(t.AskFor(mad::method::kGetTable, 1u << 7, want));
  ASSERT_EQ(by_guid.size(), 1u);
  EXPECT_EQ(by_guid[0].node_description.str(), f.node(sw).description);

  want.node_info.node_type = mad::NodeType::kSwitch;
  auto switches = Decode<mad::NodeRecord>(t.AskFor(mad::method::kGetTable, 1u << 4, want));
  EXPECT_EQ(switches.size(), f.switch_count());
}

TEST(SaServerTest, PortInfoRecordsOfASwitchCoverEveryPortWithProgrammedState) {
  SaOnSimulator t(Ft2(4));
  ASSERT_TRUE(t.up());
  const Fabric& f = t.fabric();
  NodeId sw = 0;
  while (!f.node(sw).is_switch()) ++sw;
  mad::PortInfoRecord want;
  want.lid = t.sim().port_info(f.port_id(sw, PortNum{0})).lid;
  Answer a = t.AskFor(mad::method::kGetTable, kLid, want);
  ASSERT_EQ(a.status, 0);
  EXPECT_EQ(a.attr_offset, 9);
  auto pirs = Decode<mad::PortInfoRecord>(a);
  ASSERT_EQ(pirs.size(), size_t{f.node(sw).num_ports} + 1);
  for (const auto& r : pirs) {
    EXPECT_EQ(r.lid, want.lid);
    PortId p = f.port_id(sw, PortNum{r.port_num});
    EXPECT_EQ(r.port_info.port_state, t.sim().port_info(p).port_state) << int(r.port_num);
    EXPECT_EQ(r.port_info.m_key, 0u) << "M_Key hidden from an untrusted requester";
  }
  // Port 1 only: LID and PortNum components.
  want.port_num = 1;
  auto one = Decode<mad::PortInfoRecord>(t.AskFor(mad::method::kGet, kLid | 2, want));
  ASSERT_EQ(one.size(), 1u);
  EXPECT_EQ(one[0].port_num, 1);
  EXPECT_EQ(one[0].port_info.port_state, 4);  // ACTIVE after the sweep
}

TEST(SaServerTest, LinkRecordsListBothDirectionsOfEveryCable) {
  SaOnSimulator t(Ft2(4));
  ASSERT_TRUE(t.up());
  auto lrs = Decode<mad::LinkRecord>(t.Ask(mad::method::kGetTable, mad::sa_attr::kLinkRecord, 0));
  EXPECT_EQ(lrs.size(), 2 * t.fabric().link_count());
  std::set<std::tuple<int, int, int, int>> seen;
  for (const auto& r : lrs) seen.insert({r.from_lid, r.from_port_num, r.to_lid, r.to_port_num});
  for (const auto& r : lrs)
    EXPECT_TRUE(seen.count({r.to_lid, r.to_port_num, r.from_lid, r.from_port_num}));
}

TEST(SaServerTest, SwitchInfoAndLftRecordsShowWhatTheSwitchesHold) {
  SaOnSimulator t(Ft2(4));
  ASSERT_TRUE(t.up());
  const Fabric& f = t.fabric();
  auto swirs = Decode<mad::SwitchInfoRecord>(
      t.Ask(mad::method::kGetTable, mad::sa_attr::kSwitchInfoRecord, 0));
  EXPECT_EQ(swirs.size(), f.switch_count());
  NodeId sw = 0;
  while (!f.node(sw).is_switch()) ++sw;
  uint16_t lid = t.sim().port_info(f.port_id(sw, PortNum{0})).lid;
  mad::LftRecord want;
  want.lid = lid;
  want.block_num = 0;
  Answer a = t.AskFor(mad::method::kGetTable, kLid | 2, want);
  auto lfts = Decode<mad::LftRecord>(a);
  ASSERT_EQ(lfts.size(), 1u);
  for (uint16_t l = 1; l < 64; ++l) {
    if (t.sim().lft_entry(sw, Lid{l}) == mad::kLftDropPort) continue;
    EXPECT_EQ(lfts[0].lft.port[l], t.sim().lft_entry(sw, Lid{l})) << "LID " << l;
  }
  for (const auto& s : swirs) {
    if (s.lid == lid) {
      EXPECT_GT(s.switch_info.linear_fdb_top, 0);
    }
  }
}

TEST(SaServerTest, SmInfoRecordNamesTheMasterAndShowsItsKeyOnlyToTheTrusted) {
  SaOnSimulator t(Ft2(4));
  ASSERT_TRUE(t.up());
  auto plain = Decode<mad::SmInfoRecord>(
      t.Ask(mad::method::kGetTable, mad::sa_attr::kSmInfoRecord, 0));
  ASSERT_EQ(plain.size(), 1u);
  EXPECT_EQ(plain[0].lid, t.sm().sm_lid().value());
  EXPECT_EQ(plain[0].sm_info.guid, t.fabric().port(t.sm_port()).guid.value());
  EXPECT_EQ(plain[0].sm_info.sm_state, mad::SmState::kMaster);
  EXPECT_EQ(plain[0].sm_info.priority, 5);
  EXPECT_EQ(plain[0].sm_info.sm_key, 0u);
  auto trusted = Decode<mad::SmInfoRecord>(
      t.Ask(mad::method::kGetTable, mad::sa_attr::kSmInfoRecord, 0, {}, 0, /*sm_key=*/1));
  ASSERT_EQ(trusted.size(), 1u);
  EXPECT_EQ(trusted[0].sm_info.sm_key, 1u);
}

TEST(SaServerTest, GuidInfoRecordCarriesThePortGuidAtIndexZero) {
  SaOnSimulator t(Ft2(4));
  ASSERT_TRUE(t.up());
  PortId target = CaPorts(t.fabric()).back();
  mad::GuidInfoRecord want;
  want.lid = t.sim().port_info(target).lid;
  auto girs = Decode<mad::GuidInfoRecord>(t.AskFor(mad::method::kGet, kLid, want));
  ASSERT_EQ(girs.size(), 1u);
  EXPECT_EQ(girs[0].guid_info.guid[0], t.fabric().port(target).guid.value());
}

TEST(SaServerTest, ClassPortInfoAdvertisesTheSaClassVersion) {
  SaOnSimulator t(Ft2(4));
  ASSERT_TRUE(t.up());
  Answer a = t.Ask(mad::method::kGet, mad::sa_attr::kClassPortInfo, 0);
  ASSERT_EQ(a.status, 0);
  auto cpi = mad::Decode<mad::ClassPortInfo>(
      std::span<const uint8_t>(a.bytes).subspan(mad::kSaHeaderSize));
  ASSERT_TRUE(cpi.ok());
  EXPECT_EQ(cpi->class_version, 2);
  EXPECT_TRUE(cpi->capability_mask & mad::sa_cap::kIsPortInfoCapMaskMatchSupported);
  // As OpenSM answers: no redirection (QP1, the GSI Q_Key), RespTimeValue from the SM's
  // transaction timeout (20 ms here: 4.096 us * 2^13 = 33.6 ms is the first that covers it).
  EXPECT_EQ(cpi->redirect_qp, 1u);
  EXPECT_EQ(cpi->redirect_qkey, 0x80010000u);
  EXPECT_EQ(cpi->trap_qkey, 0x80010000u);
  EXPECT_EQ(cpi->resp_time_value, 13);
  EXPECT_TRUE(cpi->capability_mask2 & mad::sa_cap2::kIsSendOnlyFullMemberSupported);
}

TEST(SaServerTest, RespTimeValueCoversTheTransactionTimeoutAsOpenSmComputesIt) {
  using std::chrono::milliseconds;
  EXPECT_EQ(RespTimeValueFor(milliseconds(200)), 16);  // OpenSM's default answer
  EXPECT_EQ(RespTimeValueFor(milliseconds(1)), 8);
  EXPECT_EQ(RespTimeValueFor(milliseconds(268)), 16);
  EXPECT_EQ(RespTimeValueFor(milliseconds(269)), 17);
  EXPECT_EQ(RespTimeValueFor(milliseconds(600000)), 28);
  EXPECT_EQ(RespTimeValueFor(milliseconds(100000000)), 31);
}

TEST(SaServerTest, UnservedAttributesAndMethodsGetMadStatusNotSilence) {
  SaOnSimulator t(Ft2(4));
  ASSERT_TRUE(t.up());
  // MCMemberRecord has no GetMulti (sm/sa/sa_multicast.cc serves Get, GetTable, Set, Delete).
  EXPECT_EQ(t.Ask(mad::method::kGetMulti, mad::sa_attr::kMcMemberRecord, 0).status,
            mad::mad_status::kMethodAttrUnsupported);
  EXPECT_EQ(t.Ask(mad::method::kGetTable, 0x7777, 0).status,
            mad::mad_status::kMethodAttrUnsupported);
  EXPECT_EQ(t.Ask(mad::method::kSet, mad::sa_attr::kNodeRecord, 0).status,
            mad::mad_status::kMethodAttrUnsupported);
  EXPECT_EQ(t.Ask(0x09, mad::sa_attr::kNodeRecord, 0).status,
            mad::mad_status::kMethodUnsupported);
  EXPECT_GE(t.sm().sa().counters().by_attribute.at(mad::sa_attr::kMcMemberRecord), 1u);
}

TEST(SaServerTest, BigNodeRecordTableArrivesWholeOverRmpp) {
  SaOnSimulator t(FatTree3(8).value());
  ASSERT_TRUE(t.up());
  Answer a = t.Ask(mad::method::kGetTable, mad::sa_attr::kNodeRecord, 0);
  ASSERT_EQ(a.status, 0);
  auto nrs = Decode<mad::NodeRecord>(a);
  EXPECT_EQ(nrs.size(), 208u);
  EXPECT_EQ(nrs.size(), t.fabric().node_count());
  std::set<uint64_t> guids;
  for (const auto& nr : nrs) guids.insert(nr.node_info.port_guid);
  EXPECT_EQ(guids.size(), 208u);
  EXPECT_EQ(t.sm().sa().counters().rmpp_answers, 1u);
}

// --- the server alone, on untrusted bytes ---------------------------------------------

using RecordingTransport = mad::FakeTransport;  // keeps what the server posts

MadMessage Request(uint8_t method, uint16_t attr) {
  SaMad m;
  m.hdr.mgmt_class = 3;
  m.hdr.class_version = 2;
  m.hdr.method = method;
  m.hdr.attr_id = attr;
  MadMessage msg;
  msg.bytes.resize(mad::kMadSize);
  mad::EncodeSa(m, msg.bytes);
  msg.addr.lid = Lid{9};
  msg.addr.qkey = 0;
  return msg;
}

uint16_t StatusOf(const MadMessage& m) { return m.header()->status; }

namespace pc = mad::path_comp;

std::vector<mad::PathRecord> DecodePaths(const Answer& a) {
  std::vector<mad::PathRecord> out;
  for (const auto& rec : a.records) {
    mad::PathRecord r;
    EXPECT_TRUE(mad::DecodeFrom(rec, &r).ok());
    out.push_back(r);
  }
  return out;
}

mad::GidBytes GidOf(const Fabric& f, PortId p) {
  return mad::ToGidBytes(mad::Gid{0xfe80000000000000ull, f.port(p).guid.value()});
}

TEST(SaServerTest, PathRecordGetBetweenTwoHostsGivesTheirLidsMtuRateAndReversible) {
  SaOnSimulator t(Ft2(4));
  ASSERT_TRUE(t.up());
  const Fabric& f = t.fabric();
  PortId src = t.client_port();
  PortId dst = CaPorts(f).back();
  mad::PathRecord want;
  want.slid = t.sim().port_info(src).lid;
  want.dlid = t.sim().port_info(dst).lid;
  Answer a = t.AskPath(mad::method::kGet, pc::kSlid | pc::kDlid, want);
  EXPECT_EQ(a.method, mad::method::kGetResp);
  ASSERT_EQ(a.status, 0);
  EXPECT_EQ(a.attr_offset, 8);
  auto prs = DecodePaths(a);
  ASSERT_EQ(prs.size(), 1u);
  EXPECT_EQ(prs[0].slid, want.slid);
  EXPECT_EQ(prs[0].dlid, want.dlid);
  EXPECT_EQ(prs[0].sgid, GidOf(f, src));
  EXPECT_EQ(prs[0].dgid, GidOf(f, dst));
  EXPECT_EQ(prs[0].mtu, mad::mtu::k4096);  // the simulator's MTUCap on every port
  EXPECT_EQ(prs[0].rate, RateCode(f.port(src).width, f.port(src).speed));
  EXPECT_EQ(prs[0].reversible, 1);
  EXPECT_EQ(prs[0].pkey, 0xFFFF);

  // No source named: the path starts at the requester's port.
  mad::PathRecord to_dst;
  to_dst.dlid = want.dlid;
  Answer from_me = t.AskPath(mad::method::kGet, pc::kDlid, to_dst);
  ASSERT_EQ(from_me.status, 0);
  auto mine = DecodePaths(from_me);
  ASSERT_EQ(mine.size(), 1u);
  EXPECT_EQ(mine[0].slid, want.slid);
}

// qos TRUE with a QoS policy file (docs/qos.md): a PathRecord without an SL gets the SL of
// the first qos-ulps rule that matches, a request naming another SL gets no path; with
// qos FALSE the policy is not used.
TEST(SaServerTest, PathRecordsTakeTheirSlFromTheQosPolicy) {
  const Fabric fabric = Ft2(4);
  const PortId dst = CaPorts(fabric).back();
  auto parsed = conf::ParseQosPolicy(
      fmt::format("qos-ulps\n default : 2\n any, target-port-guid {:#x} : 9\n"
                  " any, service-id 0x10 : 4\nend-qos-ulps\n",
                  fabric.port(dst).guid.value()),
      "qos-policy.conf");
  ASSERT_TRUE(parsed.ok()) << parsed.errors[0].ToString();
  auto policy = std::make_shared<const conf::QosPolicy>(parsed.policy);
  for (bool qos : {true, false}) {
    SCOPED_TRACE(qos ? "qos TRUE" : "qos FALSE");
    SaOnSimulator t(fabric, 0, nullptr, nullptr, [&](SubnetManagerOptions* o) {
      o->qos = qos;
      o->qos_policy = policy;
    });
    ASSERT_TRUE(t.up());
    mad::PathRecord want;
    want.slid = t.sim().port_info(t.client_port()).lid;
    want.dlid = t.sim().port_info(dst).lid;
    auto to_dst = DecodePaths(t.AskPath(mad::method::kGet, pc::kSlid | pc::kDlid, want));
    ASSERT_EQ(to_dst.size(), 1u);
    EXPECT_EQ(to_dst[0].sl, qos ? 9 : 0);
    // Another destination: the service-ID rule, only when the mask names the service ID.
    mad::PathRecord other = want;
    other.dlid = t.sim().port_info(CaPorts(fabric)[2]).lid;
    other.service_id = 0x10;
    auto by_sid = DecodePaths(
        t.AskPath(mad::method::kGet, pc::kSlid | pc::kDlid | pc::kServiceId, other));
    ASSERT_EQ(by_sid.size(), 1u);
    EXPECT_EQ(by_sid[0].sl, qos ? 4 : 0);
    auto by_default = DecodePaths(t.AskPath(mad::method::kGet, pc::kSlid | pc::kDlid, other));
    ASSERT_EQ(by_default.size(), 1u);
    EXPECT_EQ(by_default[0].sl, qos ? 2 : 0);
    // A request for SL 3 where the policy says 9: no path (OpenSM's ERR 1F1F).
    want.sl = 3;
    Answer refused = t.AskPath(mad::method::kGet, pc::kSlid | pc::kDlid | pc::kSl, want);
    if (qos) {
      EXPECT_EQ(refused.status, mad::sa_status::kNoRecords);
    } else {
      EXPECT_EQ(refused.status, 0);
    }
  }
}

TEST(SaServerTest, PathRecordTableWithLmcTwoHasEveryOneOfTheSixteenLidPairs) {
  SaOnSimulator t(Ft2(4), 2);
  ASSERT_TRUE(t.up());
  const Fabric& f = t.fabric();
  PortId src = t.client_port();
  PortId dst = CaPorts(f).back();
  mad::PathRecord want;
  want.sgid = GidOf(f, src);
  want.dgid = GidOf(f, dst);
  Answer a = t.AskPath(mad::method::kGetTable, pc::kSgid | pc::kDgid, want);
  EXPECT_EQ(a.method, mad::method::kGetTableResp);
  ASSERT_EQ(a.status, 0);
  auto prs = DecodePaths(a);
  ASSERT_EQ(prs.size(), 16u);
  const uint16_t sbase = t.sim().port_info(src).lid, dbase = t.sim().port_info(dst).lid;
  std::set<std::pair<uint16_t, uint16_t>> pairs;
  for (const auto& pr : prs) {
    EXPECT_GE(pr.slid, sbase);
    EXPECT_LT(pr.slid, sbase + 4);
    EXPECT_GE(pr.dlid, dbase);
    EXPECT_LT(pr.dlid, dbase + 4);
    pairs.insert({pr.slid, pr.dlid});
  }
  EXPECT_EQ(pairs.size(), 16u);
  EXPECT_EQ(t.sm().sa().counters().rmpp_answers, 1u);  // 16 x 64 bytes: more than one MAD
}

TEST(SaServerTest, MultiPathRecordGetMultiLimitsTheAnswerToNumbPath) {
  SaOnSimulator t(Ft2(4), 2);
  ASSERT_TRUE(t.up());
  const Fabric& f = t.fabric();
  mad::MultiPathRequest req;
  req.record.numb_path = 2;
  req.sgids.push_back(mad::ToGid(GidOf(f, t.client_port())));
  req.dgids.push_back(mad::ToGid(GidOf(f, CaPorts(f).back())));
  std::vector<uint8_t> buf(mad::kSaDataSize);
  ASSERT_TRUE(mad::EncodeMultiPathRequest(req, buf).ok());
  namespace mc = mad::multipath_comp;
  Answer a = t.Ask(mad::method::kGetMulti, mad::sa_attr::kMultiPathRecord,
                   mc::kSgidCount | mc::kDgidCount | mc::kNumbPath, buf);
  ASSERT_EQ(a.status, 0);
  EXPECT_EQ(a.method, mad::method::kGetMulti | mad::method::kResponseBit);
  auto prs = DecodePaths(a);
  ASSERT_EQ(prs.size(), 2u);
  EXPECT_NE(prs[0].slid, prs[1].slid);  // most disjoint first: no LID shared
  EXPECT_NE(prs[0].dlid, prs[1].dlid);
}

// A GetMulti of MultiPathRecord as the SA receives it once RMPP has reassembled it: the
// whole request, however many GIDs it carries, from `from`.
MadMessage MultiPathRequestFrom(Lid from, const mad::MultiPathRequest& req) {
  SaMad m;
  m.hdr.mgmt_class = 3;
  m.hdr.class_version = 2;
  m.hdr.method = mad::method::kGetMulti;
  m.hdr.attr_id = mad::sa_attr::kMultiPathRecord;
  m.comp_mask = mad::multipath_comp::kSgidCount | mad::multipath_comp::kDgidCount;
  MadMessage msg;
  msg.bytes.resize(mad::kMadSize);
  mad::EncodeSa(m, msg.bytes);
  msg.bytes.resize(mad::kSaHeaderSize + mad::MultiPathRequestSize(req));
  EXPECT_TRUE(mad::EncodeMultiPathRequest(
                  req, std::span<uint8_t>(msg.bytes).subspan(mad::kSaHeaderSize))
                  .ok());
  msg.addr.lid = from;
  return msg;
}

TEST(SaServerTest, AMultiPathRequestOfMaximalCountsIsCappedAndAnsweredQuickly) {
  SaOnSimulator t(Ft2(24));  // 288 hosts
  ASSERT_TRUE(t.up());
  const Fabric& f = t.fabric();
  const std::vector<PortId> hosts = CaPorts(f);
  RecordingTransport tr;
  ManualClock clock;
  SaServer sa(tr, {}, clock);
  sa.Publish(t.sm().sa().snapshot());
  const Lid from{t.sim().port_info(t.client_port()).lid};
  // 255 distinct SGIDs x 255 distinct DGIDs: 65,025 port pairs, refused before any route
  // is walked (before the cap: about 2 x 10^9 pair comparisons and 65,025 routes).
  mad::MultiPathRequest all;
  for (size_t i = 0; i < 255; ++i) {
    all.sgids.push_back(mad::ToGid(GidOf(f, hosts[i])));
    all.dgids.push_back(mad::ToGid(GidOf(f, hosts[hosts.size() - 1 - i])));
  }
  auto out = sa.Answer(MultiPathRequestFrom(from, all));
  ASSERT_TRUE(out);
  EXPECT_EQ(StatusOf(*out), mad::sa_status::kNoResources);
  EXPECT_EQ(sa.counters().multipath_refused, 1u);
  EXPECT_EQ(sa.counters().by_error.at(mad::sa_status::kNoResources), 1u);
  // The same counts naming one pair 255 times over are one pair: answered.
  mad::MultiPathRequest same;
  same.sgids.assign(255, mad::ToGid(GidOf(f, hosts[3])));
  same.dgids.assign(255, mad::ToGid(GidOf(f, hosts[200])));
  out = sa.Answer(MultiPathRequestFrom(from, same));
  ASSERT_TRUE(out);
  EXPECT_EQ(StatusOf(*out), 0);
  mad::PathRecord pr;
  ASSERT_TRUE(mad::DecodeFrom(std::span<const uint8_t>(out->bytes).subspan(mad::kSaHeaderSize),
                              &pr)
                  .ok());
  EXPECT_EQ(pr.slid, t.sim().port_info(hosts[3]).lid);
  EXPECT_EQ(pr.dlid, t.sim().port_info(hosts[200]).lid);
  EXPECT_EQ(sa.counters().multipath_refused, 1u);
}

TEST(SaServerTest, PathRecordGetToAnUnknownLidIsNoRecords) {
  SaOnSimulator t(Ft2(4));
  ASSERT_TRUE(t.up());
  mad::PathRecord want;
  want.slid = t.sim().port_info(t.client_port()).lid;
  want.dlid = 0xBFFF;
  EXPECT_EQ(t.AskPath(mad::method::kGet, pc::kSlid | pc::kDlid, want).status,
            mad::sa_status::kNoRecords);
  // A GetTable says the same with an empty table.
  Answer table = t.AskPath(mad::method::kGetTable, pc::kSlid | pc::kDlid, want);
  EXPECT_EQ(table.status, 0);
  EXPECT_TRUE(table.records.empty());
}

TEST(SaServerTest, PathRecordGetWithoutARouteIsNoRecords) {
  SaOnSimulator t(Ft2(4));
  ASSERT_TRUE(t.up());
  const Fabric& f = t.fabric();
  // The same snapshot with every LFT entry dropped: no LID pair has a route.
  auto s = std::make_shared<SaSnapshot>(*t.sm().sa().snapshot());
  auto dropped = std::make_shared<routing::RoutingTables>(*s->tables);
  for (auto& sw : dropped->switches) std::fill(sw.lft.begin(), sw.lft.end(), routing::kDropPort);
  s->tables = dropped;
  RecordingTransport tr;
  ManualClock clock;
  SaServer sa(tr, {}, clock);
  sa.Publish(s);
  mad::PathRecord want;
  want.slid = t.sim().port_info(t.client_port()).lid;
  want.dlid = t.sim().port_info(CaPorts(f).back()).lid;
  SaMad m;
  m.hdr.mgmt_class = 3;
  m.hdr.class_version = 2;
  m.hdr.method = mad::method::kGet;
  m.hdr.attr_id = mad::sa_attr::kPathRecord;
  m.comp_mask = pc::kSlid | pc::kDlid;
  mad::EncodeTo(want, m.data);
  MadMessage msg;
  msg.bytes.resize(mad::kMadSize);
  mad::EncodeSa(m, msg.bytes);
  msg.addr.lid = Lid{want.slid};
  auto out = sa.Answer(msg);
  ASSERT_TRUE(out);
  EXPECT_EQ(StatusOf(*out), mad::sa_status::kNoRecords);
}

TEST(SaServerAloneTest, RequestsBeforeTheFirstSnapshotAreAnsweredBusy) {
  RecordingTransport tr;
  ManualClock clock;
  SaServer sa(tr, {}, clock);
  sa.OnRequest(Request(mad::method::kGetTable, mad::sa_attr::kNodeRecord));
  ASSERT_EQ(tr.posted.size(), 1u);
  EXPECT_EQ(StatusOf(tr.posted[0]), mad::mad_status::kBusy);
  EXPECT_EQ(tr.posted[0].addr.lid, Lid{9});
  EXPECT_EQ(tr.posted[0].addr.qkey, 0x80010000u);
  EXPECT_EQ(sa.counters().not_ready, 1u);
}

TEST(SaServerAloneTest, MalformedAndStrayMadsAreDroppedAndCounted) {
  RecordingTransport tr;
  ManualClock clock;
  SaServer sa(tr, {}, clock);
  sa.Publish(std::make_shared<SaSnapshot>());
  MadMessage shorty = Request(mad::method::kGet, mad::sa_attr::kNodeRecord);
  shorty.bytes.resize(40);
  sa.OnRequest(shorty);
  sa.OnRequest(MadMessage{});
  sa.OnRequest(Request(mad::method::kGetTableResp, mad::sa_attr::kNodeRecord));
  // An RMPP ACK of a one-segment answer comes back as a GetTable with type ACK.
  MadMessage ack = Request(mad::method::kGetTable, mad::sa_attr::kNodeRecord);
  SaMad m;
  ASSERT_TRUE(mad::DecodeSa(ack.bytes, &m).ok());
  m.rmpp_version = 1;
  m.rmpp_type = mad::rmpp::kTypeAck;
  m.rmpp_flags = mad::rmpp::kFlagActive;
  mad::EncodeSa(m, ack.bytes);
  sa.OnRequest(ack);
  EXPECT_TRUE(tr.posted.empty());
  EXPECT_EQ(sa.counters().malformed, 2u);
  EXPECT_EQ(sa.counters().responses_ignored, 1u);
  EXPECT_EQ(sa.counters().rmpp_control, 1u);
}

TEST(SaServerAloneTest, WrongClassVersionIsAnsweredBadVersion) {
  RecordingTransport tr;
  ManualClock clock;
  SaServer sa(tr, {}, clock);
  sa.Publish(std::make_shared<SaSnapshot>());
  MadMessage req = Request(mad::method::kGet, mad::sa_attr::kNodeRecord);
  req.bytes[2] = 1;
  sa.OnRequest(req);
  ASSERT_EQ(tr.posted.size(), 1u);
  EXPECT_EQ(StatusOf(tr.posted[0]), mad::mad_status::kBadVersion);
}

TEST(SaServerAloneTest, EmptySnapshotGivesEmptyTablesNotCrashes) {
  RecordingTransport tr;
  ManualClock clock;
  SaServer sa(tr, {}, clock);
  sa.Publish(std::make_shared<SaSnapshot>());
  for (uint16_t attr : {mad::sa_attr::kNodeRecord, mad::sa_attr::kPortInfoRecord,
                        mad::sa_attr::kSwitchInfoRecord, mad::sa_attr::kLftRecord,
                        mad::sa_attr::kSmInfoRecord, mad::sa_attr::kLinkRecord,
                        mad::sa_attr::kGuidInfoRecord, mad::sa_attr::kPKeyTableRecord,
                        mad::sa_attr::kSl2VlTableRecord,
                        mad::sa_attr::kVlArbitrationTableRecord}) {
    tr.posted.clear();
    sa.OnRequest(Request(mad::method::kGetTable, attr));
    ASSERT_EQ(tr.posted.size(), 1u) << attr;
    EXPECT_EQ(StatusOf(tr.posted[0]), 0) << attr;
    auto rh = mad::DecodeRmppHeader(tr.posted[0].bytes);
    ASSERT_TRUE(rh.ok());
    EXPECT_EQ(rh->flags, mad::rmpp::kFlagActive | mad::rmpp::kFlagFirst | mad::rmpp::kFlagLast);
  }
}

TEST(SaServerTest, ARequestWithAWrongSaKeyIsDroppedUnansweredAndCounted) {
  RecordingTransport tr;
  ManualClock clock;
  SaServerOptions o;
  o.sa_key = 0x1234;
  SaServer sa(tr, o, clock);
  sa.Publish(std::make_shared<SaSnapshot>());
  auto with_key = [](uint64_t key) {
    SaMad m;
    m.hdr.mgmt_class = 3;
    m.hdr.class_version = 2;
    m.hdr.method = mad::method::kGetTable;
    m.hdr.attr_id = mad::sa_attr::kNodeRecord;
    m.sm_key = key;
    MadMessage msg;
    msg.bytes.resize(mad::kMadSize);
    mad::EncodeSa(m, msg.bytes);
    msg.addr.lid = Lid{9};
    return msg;
  };
  sa.OnRequest(with_key(0x9999));
  EXPECT_TRUE(tr.posted.empty()) << "C15-0.1.5: neither 0 nor the SA key: no answer";
  EXPECT_EQ(sa.counters().sa_key_mismatches, 1u);
  sa.OnRequest(with_key(0));       // untrusted
  sa.OnRequest(with_key(0x1234));  // trusted
  EXPECT_EQ(tr.posted.size(), 2u);
  EXPECT_EQ(sa.counters().sa_key_mismatches, 1u);
}

// --- ServiceRecord -------------------------------------------------------------------

namespace sr = mad::sr_comp;
constexpr uint64_t kSrName = 1ull << 6;
constexpr uint64_t kSrData8First = 1ull << 7;
constexpr uint64_t kSrKey = sr::kServiceId | sr::kServiceGid | sr::kServicePKey;

mad::ServiceRecord ServiceOn(const SaOnSimulator& t, PortId port, uint64_t id,
                             const char* name, uint32_t lease = mad::kServiceLeaseInfinite) {
  mad::ServiceRecord r;
  r.service_id = id;
  const uint64_t prefix = 0xfe80000000000000ull;
  const uint64_t guid = t.fabric().port(port).guid.value();
  for (int i = 0; i < 8; ++i) {
    r.service_gid[i] = static_cast<uint8_t>(prefix >> (56 - 8 * i));
    r.service_gid[8 + i] = static_cast<uint8_t>(guid >> (56 - 8 * i));
  }
  r.service_p_key = 0xffff;
  r.service_lease = lease;
  std::string_view n(name);
  std::copy_n(n.begin(), std::min(n.size(), r.service_name.size() - 1), r.service_name.begin());
  r.service_data8[0] = static_cast<uint8_t>(id);
  return r;
}

std::string NameOf(const mad::ServiceRecord& r) {
  return std::string(reinterpret_cast<const char*>(r.service_name.data()));
}

TEST(SaServerTest, AServiceRegisteredWithSetIsFoundByNameAndData) {
  SaOnSimulator t(Ft2(4));
  ASSERT_TRUE(t.up());
  mad::ServiceRecord web = ServiceOn(t, t.client_port(), 0x10, "web");
  Answer set = t.AskFor(mad::method::kSet, kSrKey, web);
  EXPECT_EQ(set.status, 0);
  EXPECT_EQ(set.method, mad::method::kGetResp);
  auto stored = Decode<mad::ServiceRecord>(set);
  ASSERT_EQ(stored.size(), 1u);
  EXPECT_EQ(NameOf(stored[0]), "web");
  ASSERT_EQ(t.AskFor(mad::method::kSet, kSrKey, ServiceOn(t, t.sm_port(), 0x20, "db")).status, 0);

  auto all = Decode<mad::ServiceRecord>(t.Ask(mad::method::kGetTable,
                                               mad::sa_attr::kServiceRecord, 0));
  ASSERT_EQ(all.size(), 2u);
  mad::ServiceRecord want;
  std::strcpy(reinterpret_cast<char*>(want.service_name.data()), "db");
  auto by_name = Decode<mad::ServiceRecord>(t.AskFor(mad::method::kGet, kSrName, want));
  ASSERT_EQ(by_name.size(), 1u);
  EXPECT_EQ(by_name[0].service_id, 0x20u);
  want.service_data8[0] = 0x10;
  auto by_data = Decode<mad::ServiceRecord>(t.AskFor(mad::method::kGetTable, kSrData8First, want));
  ASSERT_EQ(by_data.size(), 1u);
  EXPECT_EQ(NameOf(by_data[0]), "web");
  want.service_id = 0x99;
  EXPECT_EQ(t.AskFor(mad::method::kGet, sr::kServiceId, want).status, mad::sa_status::kNoRecords);
  EXPECT_EQ(t.sm().sa().counters().services_registered, 2u);
}

TEST(SaServerTest, ASecondSetWithTheSameKeyReplacesTheRecord) {
  SaOnSimulator t(Ft2(4));
  ASSERT_TRUE(t.up());
  ASSERT_EQ(t.AskFor(mad::method::kSet, kSrKey, ServiceOn(t, t.client_port(), 1, "old")).status, 0);
  ASSERT_EQ(t.AskFor(mad::method::kSet, kSrKey, ServiceOn(t, t.client_port(), 1, "new")).status, 0);
  auto all = Decode<mad::ServiceRecord>(t.Ask(mad::method::kGetTable,
                                               mad::sa_attr::kServiceRecord, 0));
  ASSERT_EQ(all.size(), 1u);
  EXPECT_EQ(NameOf(all[0]), "new");
}

TEST(SaServerTest, AServiceKeyIsHiddenFromTheUntrustedAndGuardsReplaceAndDelete) {
  SaOnSimulator t(Ft2(4));
  ASSERT_TRUE(t.up());
  mad::ServiceRecord r = ServiceOn(t, t.client_port(), 0x51, "keyed");
  r.service_key.fill(0xA5);
  ASSERT_EQ(t.AskFor(mad::method::kSet, kSrKey, r).status, 0);
  auto plain = Decode<mad::ServiceRecord>(
      t.Ask(mad::method::kGetTable, mad::sa_attr::kServiceRecord, 0));
  ASSERT_EQ(plain.size(), 1u);
  EXPECT_EQ(plain[0].service_key, (std::array<uint8_t, 16>{})) << "the key is not shown";
  auto trusted = Decode<mad::ServiceRecord>(
      t.Ask(mad::method::kGetTable, mad::sa_attr::kServiceRecord, 0, {}, 0, /*sm_key=*/1));
  ASSERT_EQ(trusted.size(), 1u);
  EXPECT_EQ(trusted[0].service_key, r.service_key);

  // Someone without the key can neither replace nor delete the registration.
  mad::ServiceRecord impostor = ServiceOn(t, t.client_port(), 0x51, "hijack");
  EXPECT_EQ(t.AskFor(mad::method::kSet, kSrKey, impostor).status, mad::sa_status::kReqDenied);
  EXPECT_EQ(t.AskFor(mad::method::kDelete, kSrKey, impostor).status, mad::sa_status::kReqDenied);
  EXPECT_EQ(t.sm().sa().counters().service_key_refused, 2u);
  ASSERT_EQ(t.sm().sa().services().size(), 1u);
  EXPECT_EQ(NameOf(t.sm().sa().services()[0]), "keyed");
  // The owner (the same key) replaces it, then deletes it.
  mad::ServiceRecord update = r;
  std::strcpy(reinterpret_cast<char*>(update.service_name.data()), "keyed-v2");
  EXPECT_EQ(t.AskFor(mad::method::kSet, kSrKey, update).status, 0);
  EXPECT_EQ(NameOf(t.sm().sa().services()[0]), "keyed-v2");
  EXPECT_EQ(t.AskFor(mad::method::kDelete, kSrKey, update).status, 0);
  EXPECT_TRUE(t.sm().sa().services().empty());
}

TEST(SaServerTest, AServiceOnAGidOutsideTheFabricIsRefused) {
  SaOnSimulator t(Ft2(4));
  ASSERT_TRUE(t.up());
  mad::ServiceRecord r = ServiceOn(t, t.client_port(), 1, "ghost");
  r.service_gid[15] ^= 0x77;  // no such port GUID
  EXPECT_EQ(t.AskFor(mad::method::kSet, kSrKey, r).status, mad::sa_status::kReqInvalidGid);
  r = ServiceOn(t, t.client_port(), 1, "elsewhere");
  r.service_gid[0] = 0x20;  // another subnet's prefix
  EXPECT_EQ(t.AskFor(mad::method::kSet, kSrKey, r).status, mad::sa_status::kReqInvalidGid);
  EXPECT_TRUE(t.sm().sa().services().empty());
}

TEST(SaServerTest, DeleteRemovesTheServiceAndAnswersWithIt) {
  SaOnSimulator t(Ft2(4));
  ASSERT_TRUE(t.up());
  mad::ServiceRecord r = ServiceOn(t, t.client_port(), 7, "gone-soon");
  ASSERT_EQ(t.AskFor(mad::method::kSet, kSrKey, r).status, 0);
  // A Delete must name the registration: ServiceID, ServiceGID and ServiceP_Key.
  EXPECT_EQ(t.AskFor(mad::method::kDelete, sr::kServiceId, r).status,
            mad::sa_status::kReqInsufficientComponents);
  Answer del = t.AskFor(mad::method::kDelete, kSrKey, r);
  EXPECT_EQ(del.status, 0);
  EXPECT_EQ(del.method, mad::method::kDeleteResp);
  auto gone = Decode<mad::ServiceRecord>(del);
  ASSERT_EQ(gone.size(), 1u);
  EXPECT_EQ(NameOf(gone[0]), "gone-soon");
  EXPECT_EQ(t.AskFor(mad::method::kDelete, kSrKey, r).status, mad::sa_status::kNoRecords);
  EXPECT_TRUE(Decode<mad::ServiceRecord>(
                  t.Ask(mad::method::kGetTable, mad::sa_attr::kServiceRecord, 0))
                  .empty());
  EXPECT_EQ(t.sm().sa().counters().services_deleted, 1u);
}

TEST(SaServerTest, AServiceLeaseRunsOutOnTheSmClock) {
  ManualClock clock;
  SaOnSimulator t(Ft2(4), 0, &clock);
  ASSERT_TRUE(t.up());
  ASSERT_EQ(t.AskFor(mad::method::kSet, kSrKey | sr::kServiceLease,
                     ServiceOn(t, t.client_port(), 1, "short", 10))
                .status,
            0);
  ASSERT_EQ(t.AskFor(mad::method::kSet, kSrKey, ServiceOn(t, t.client_port(), 2, "forever"))
                .status,
            0);
  clock.Advance(std::chrono::seconds(9));
  EXPECT_EQ(Decode<mad::ServiceRecord>(
                t.Ask(mad::method::kGetTable, mad::sa_attr::kServiceRecord, 0))
                .size(),
            2u);
  clock.Advance(std::chrono::seconds(1));
  auto left = Decode<mad::ServiceRecord>(
      t.Ask(mad::method::kGetTable, mad::sa_attr::kServiceRecord, 0));
  ASSERT_EQ(left.size(), 1u);
  EXPECT_EQ(NameOf(left[0]), "forever");
  EXPECT_EQ(t.sm().sa().counters().services_expired, 1u);
}

TEST(SaServerTest, ServicesSurviveARestartThroughTheStateFileAndExpireWhileDown) {
  char tmpl[] = "/tmp/ibsm_sa_sr_XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const std::string dir = tmpl;
  ManualClock clock;
  clock.Advance(std::chrono::seconds(1'700'000'000));
  {
    auto store = ha::StateStore::Open(dir + "/state.db", clock);
    ASSERT_TRUE(store.ok());
    SaOnSimulator t(Ft2(4), 0, &clock, store->get());
    ASSERT_TRUE(t.up());
    ASSERT_EQ(t.AskFor(mad::method::kSet, kSrKey, ServiceOn(t, t.client_port(), 1, "kept"))
                  .status,
              0);
    ASSERT_EQ(t.AskFor(mad::method::kSet, kSrKey | sr::kServiceLease,
                       ServiceOn(t, t.client_port(), 2, "brief", 60))
                  .status,
              0);
    ASSERT_EQ(t.AskFor(mad::method::kSet, kSrKey, ServiceOn(t, t.client_port(), 3, "deleted"))
                  .status,
              0);
    ASSERT_EQ(t.AskFor(mad::method::kDelete, kSrKey, ServiceOn(t, t.client_port(), 3, "deleted"))
                  .status,
              0);
  }
  clock.Advance(std::chrono::seconds(120));  // "brief" runs out while the SM is down
  {
    auto store = ha::StateStore::Open(dir + "/state.db", clock);
    ASSERT_TRUE(store.ok());
    SaOnSimulator t(Ft2(4), 0, &clock, store->get());
    ASSERT_TRUE(t.up());
    auto all = Decode<mad::ServiceRecord>(
        t.Ask(mad::method::kGetTable, mad::sa_attr::kServiceRecord, 0));
    ASSERT_EQ(all.size(), 1u);
    EXPECT_EQ(NameOf(all[0]), "kept");
    EXPECT_EQ((*store)->LoadServiceRecords()->size(), 1u);
  }
  std::filesystem::remove_all(dir);
}

// A Set names its registration by ServiceID and ServiceGID, and takes ServiceLease only from
// the mask: without the bit the lease is infinite, whatever the record's bytes say (OpenSM).
TEST(SaServerTest, ASetMustNameIdAndGidAndALeaseOutsideTheMaskIsInfinite) {
  ManualClock clock;
  SaOnSimulator t(Ft2(4), 0, &clock);
  ASSERT_TRUE(t.up());
  mad::ServiceRecord r = ServiceOn(t, t.client_port(), 0x61, "unnamed", 10);
  EXPECT_EQ(t.AskFor(mad::method::kSet, sr::kServiceGid | sr::kServicePKey, r).status,
            mad::sa_status::kReqInsufficientComponents);
  EXPECT_EQ(t.AskFor(mad::method::kSet, sr::kServiceId | sr::kServicePKey, r).status,
            mad::sa_status::kReqInsufficientComponents);
  EXPECT_TRUE(t.sm().sa().services().empty());
  Answer set = t.AskFor(mad::method::kSet, kSrKey, r);
  ASSERT_EQ(set.status, 0);
  auto echoed = Decode<mad::ServiceRecord>(set);
  ASSERT_EQ(echoed.size(), 1u);
  EXPECT_EQ(echoed[0].service_lease, mad::kServiceLeaseInfinite);
  clock.Advance(std::chrono::seconds(3600));
  EXPECT_EQ(Decode<mad::ServiceRecord>(
                t.Ask(mad::method::kGetTable, mad::sa_attr::kServiceRecord, 0))
                .size(),
            1u);
  EXPECT_EQ(t.sm().sa().counters().services_expired, 0u);
}

// One port may hold kServicesPerPort registrations and the SA kServicesTotal (lowered here):
// past either, a new registration is ERR_NO_RESOURCES and counted, a replacement still works,
// and another port registers while the total allows.
TEST(SaServerTest, ServiceRecordsAreCappedPerRequestingPortAndInAll) {
  SaOnSimulator t(Ft2(4));
  ASSERT_TRUE(t.up());
  RecordingTransport transport;
  ManualClock clock;
  SaServerOptions o;
  o.services_per_port = 3;
  o.services_total = 5;
  SaServer sa(transport, o, clock);
  sa.Publish(t.sm().sa().snapshot());
  const SaSnapshot& snap = *sa.snapshot();
  auto lid_of = [&](PortId p) {
    auto in_snap = snap.fabric().FindPort(t.fabric().port(p).guid);
    EXPECT_TRUE(in_snap);
    const Port& port = snap.fabric().port(*in_snap);
    return Lid{snap.RecordLid(port.node, port.num)};
  };
  auto set_from = [&](PortId from, const mad::ServiceRecord& r) {
    MadMessage msg = Request(mad::method::kSet, mad::sa_attr::kServiceRecord);
    SaMad m;
    EXPECT_TRUE(mad::DecodeSa(msg.bytes, &m).ok());
    m.comp_mask = kSrKey;
    mad::EncodeRecord(r, std::span<uint8_t>(m.data).first(mad::Layout<mad::ServiceRecord>::kSize));
    mad::EncodeSa(m, msg.bytes);
    msg.addr.lid = lid_of(from);
    auto out = sa.Answer(msg);
    EXPECT_TRUE(out);
    return out ? StatusOf(*out) : uint16_t{0xFFFF};
  };
  const PortId a = t.client_port(), b = t.sm_port();
  for (uint64_t id = 1; id <= 3; ++id) ASSERT_EQ(set_from(a, ServiceOn(t, a, id, "a")), 0);
  EXPECT_EQ(set_from(a, ServiceOn(t, a, 4, "a")), mad::sa_status::kNoResources);
  EXPECT_EQ(sa.counters().service_port_cap_refused, 1u);
  EXPECT_EQ(set_from(a, ServiceOn(t, a, 2, "a-v2")), 0);  // a replacement takes no place
  for (uint64_t id = 10; id <= 11; ++id) ASSERT_EQ(set_from(b, ServiceOn(t, b, id, "b")), 0);
  EXPECT_EQ(set_from(b, ServiceOn(t, b, 12, "b")), mad::sa_status::kNoResources);
  EXPECT_EQ(sa.counters().service_total_cap_refused, 1u);
  EXPECT_EQ(sa.services().size(), 5u);
  EXPECT_EQ(sa.counters().by_error.at(mad::sa_status::kNoResources), 2u);
}

// A burst of Sets costs the state file one transaction per flush, not one fsync each; the
// file then holds exactly the registrations the SA answered for.
TEST(SaServerTest, ABurstOfServiceSetsIsWrittenInFewTransactions) {
  char tmpl[] = "/tmp/ibsm_sa_burst_XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const std::string dir = tmpl;
  ManualClock clock;
  clock.Advance(std::chrono::seconds(1'700'000'000));
  {
    auto store = ha::StateStore::Open(dir + "/state.db", clock);
    ASSERT_TRUE(store.ok());
    SaOnSimulator t(Ft2(4), 0, &clock, store->get());
    ASSERT_TRUE(t.up());
    const uint64_t before = (*store)->transactions();
    constexpr uint64_t kSets = 30;
    for (uint64_t id = 1; id <= kSets; ++id) {
      ASSERT_EQ(t.AskFor(mad::method::kSet, kSrKey,
                         ServiceOn(t, id % 2 ? t.client_port() : t.sm_port(), id, "burst"))
                    .status,
                0);
    }
    ASSERT_EQ(t.AskFor(mad::method::kDelete, kSrKey, ServiceOn(t, t.client_port(), 1, "burst"))
                  .status,
              0);
    const uint64_t during = (*store)->transactions() - before;
    EXPECT_LT(during, kSets / 10) << during;
    t.sm().FlushState();
    EXPECT_LE((*store)->transactions() - before, during + 1);
    auto reader = ha::StateStore::OpenReadOnly(dir + "/state.db");
    ASSERT_TRUE(reader.ok());
    auto rows = (*reader)->LoadServiceRecords();
    ASSERT_TRUE(rows.ok());
    EXPECT_EQ(rows->size(), kSets - 1);
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace ibsm::sm
