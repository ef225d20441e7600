// The InformManager alone: subscription validation and identity, the IBA 13.4.8.3 matching
// rules, Reports with their retries, dropping subscribers that left, and the state file.
#include "sm/sa/inform.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "base/clock.h"
#include "fabric/generators.h"
#include "ha/state_store.h"
#include "mad/attr/sa_records.h"
#include "mad/testing/fake_transport.h"
#include "sm/sa/sa_server.h"
#include "sm/testing/test_util.h"

namespace ibsm::sm {
namespace {

using testutil::GidOf;

using mad::InformInfo;
using mad::MadMessage;

// Every Send kept; the test answers or fails each one through its handler.
using ScriptTransport = mad::FakeTransport;

// Answers Send `i` as the subscriber would: ReportResponse, same TID.
void Ack(ScriptTransport& t, size_t i) {
  MadMessage resp = t.sent[i].msg;
  resp.bytes[3] = mad::method::kReportResp;
  t.Answer(i, resp);
}
void TimeOut(ScriptTransport& t, size_t i) { t.Answer(i, Timeout("no answer")); }

// A small fat tree with LIDs: switches' port 0 and every CA port get one, in node order.
Fabric FabricWithLids() {
  auto f = FatTree2(4);
  EXPECT_TRUE(f.ok());
  uint16_t next = 1;
  for (NodeId n = 0; n < f->node_count(); ++n) {
    const Node& node = f->node(n);
    if (node.is_switch()) {
      f->mutable_port(f->port_id(n, PortNum{0})).lid = Lid{next++};
    } else {
      for (uint8_t p = 1; p <= node.num_ports; ++p)
        f->mutable_port(f->port_id(n, PortNum{p})).lid = Lid{next++};
    }
  }
  f->IndexLids();
  return *f;
}

// The LIDs of the CA ports, in node order.
std::vector<Lid> CaLids(const Fabric& f) {
  std::vector<Lid> out;
  for (NodeId n = 0; n < f.node_count(); ++n)
    if (!f.node(n).is_switch()) out.push_back(f.port(n, PortNum{1}).lid);
  return out;
}

mad::MadAddress From(Lid lid, uint32_t qpn = 1) {
  mad::MadAddress a;
  a.lid = lid;
  a.qpn = qpn;
  return a;
}

// Generic, every issuer, trap `trap`, any type and producer.
InformInfo Wants(uint16_t trap, uint8_t subscribe = 1) {
  InformInfo ii;
  ii.lid_range_begin = mad::kInformAllLids;
  ii.is_generic = 1;
  ii.subscribe = subscribe;
  ii.type = mad::kInformAnyType;
  ii.trap_number_or_device_id = trap;
  ii.producer_type_or_vendor_id = mad::kInformAnyProducer;
  ii.resp_time_value = 18;
  return ii;
}

mad::Notice Trap128From(uint16_t lid) {
  mad::Notice n = mad::MakeTrap128(lid);
  return n;
}

class InformManagerTest : public ::testing::Test {
 protected:
  Fabric fabric_ = FabricWithLids();
  std::vector<Lid> cas_ = CaLids(fabric_);
  ScriptTransport transport_;
  InformManager m_{transport_, InformOptions{}, nullptr};

  InformSetAnswer Set(const InformInfo& ii, Lid from, bool trusted = false) {
    return m_.Set(fabric_, testutil::kDefaultPrefix, ii, From(from), trusted);
  }
};

TEST_F(InformManagerTest, ASubscriptionIsEchoedAndKeptWithTheSubscribersGidAndAddress) {
  InformSetAnswer a = Set(Wants(128), cas_[0]);
  EXPECT_EQ(a.status, 0);
  EXPECT_EQ(a.info, Wants(128));  // o13-12.1.1: a copy of the request
  ASSERT_EQ(m_.subscriptions().size(), 1u);
  const Subscription& s = m_.subscriptions()[0];
  EXPECT_EQ(s.record.subscriber_gid, GidOf(fabric_.port(*fabric_.FindPortByLid(cas_[0])).guid));
  EXPECT_EQ(s.report_to.lid, cas_[0]);
  EXPECT_EQ(s.report_to.qpn, 1u);
  EXPECT_EQ(s.report_to.qkey, 0x80010000u);
  EXPECT_EQ(s.record.inform_info.qpn, 1u);
  EXPECT_EQ(m_.counters().subscribed, 1u);
}

TEST_F(InformManagerTest, SubscribingTwiceReplacesAndUnsubscribeRemovesOnlyThatOne) {
  ASSERT_EQ(Set(Wants(128), cas_[0]).status, 0);
  InformInfo again = Wants(128);
  again.resp_time_value = 5;  // not part of the identity
  ASSERT_EQ(Set(again, cas_[0]).status, 0);
  ASSERT_EQ(Set(Wants(64), cas_[0]).status, 0);
  ASSERT_EQ(Set(Wants(128), cas_[1]).status, 0);
  EXPECT_EQ(m_.subscriptions().size(), 3u);
  EXPECT_EQ(Set(Wants(128, 0), cas_[0]).status, 0);
  ASSERT_EQ(m_.subscriptions().size(), 2u);
  EXPECT_EQ(m_.subscriptions()[0].record.inform_info.trap_number_or_device_id, 64);
  EXPECT_EQ(m_.subscriptions()[1].report_to.lid, cas_[1]);
  EXPECT_EQ(m_.counters().unsubscribed, 1u);
}

TEST_F(InformManagerTest, UnsubscribingWhatWasNeverSubscribedIsAnInvalidRequest) {
  InformSetAnswer a = Set(Wants(128, 0), cas_[0]);
  EXPECT_EQ(a.status, mad::sa_status::kReqInvalid);
  EXPECT_EQ(a.info.subscribe, 0);
  EXPECT_EQ(m_.counters().rejected, 1u);
}

TEST_F(InformManagerTest, BadRequestsGetTheirSaStatusAndChangeNothing) {
  InformInfo bad_subscribe = Wants(128, 2);
  EXPECT_EQ(Set(bad_subscribe, cas_[0]).status, mad::sa_status::kReqInvalid);
  InformInfo bad_gid = Wants(128);
  bad_gid.gid = GidOf(Guid{0x1234});  // no such port
  EXPECT_EQ(Set(bad_gid, cas_[0]).status, mad::sa_status::kReqInvalidGid);
  InformInfo bad_range = Wants(128);
  bad_range.lid_range_begin = 10;
  bad_range.lid_range_end = 5;
  EXPECT_EQ(Set(bad_range, cas_[0]).status, mad::sa_status::kReqInvalid);
  InformInfo mcast_range = Wants(128);
  mcast_range.lid_range_begin = 0xC000;
  EXPECT_EQ(Set(mcast_range, cas_[0]).status, mad::sa_status::kReqInvalid);
  InformInfo bad_type = Wants(128);
  bad_type.type = 9;
  EXPECT_EQ(Set(bad_type, cas_[0]).status, mad::sa_status::kReqInvalid);
  InformInfo bad_producer = Wants(128);
  bad_producer.producer_type_or_vendor_id = 7;
  EXPECT_EQ(Set(bad_producer, cas_[0]).status, mad::sa_status::kReqInvalid);
  InformInfo bad_generic = Wants(128);
  bad_generic.is_generic = 3;
  EXPECT_EQ(Set(bad_generic, cas_[0]).status, mad::sa_status::kReqInvalid);
  // The requester must be a port of the fabric.
  EXPECT_EQ(Set(Wants(128), Lid{4000}).status, mad::sa_status::kReqInvalid);
  EXPECT_TRUE(m_.subscriptions().empty());
  EXPECT_EQ(m_.counters().rejected, 8u);
}

TEST_F(InformManagerTest, ARequestFromQpZeroHasItsReportsSentToQpOne) {
  // ibsim's preload reports the source QP of a GSI request as 0.
  ASSERT_EQ(m_.Set(fabric_, testutil::kDefaultPrefix, Wants(128), From(cas_[0], 0), false).status, 0);
  EXPECT_EQ(m_.subscriptions().at(0).report_to.qpn, 1u);
}

TEST_F(InformManagerTest, SecurityTrapsNeedTheSaKey) {
  EXPECT_EQ(Set(Wants(mad::trap::kBadMKey), cas_[0], false).status, mad::sa_status::kReqInvalid);
  EXPECT_EQ(Set(Wants(mad::trap::kBadMKey), cas_[0], true).status, 0);
  // A wildcard subscriber without the key subscribes, but gets no security trap.
  ASSERT_EQ(Set(Wants(mad::kInformAnyTrap), cas_[1], false).status, 0);
  mad::Notice bad_mkey = mad::MakeGenericNotice(mad::NoticeType::kSecurity,
                                                mad::producer::kCa, mad::trap::kBadMKey, 7);
  EXPECT_EQ(m_.Publish(bad_mkey), 1u);
  ASSERT_EQ(transport_.sent.size(), 1u);
  EXPECT_EQ(transport_.sent[0].msg.addr.lid, cas_[0]);
}

TEST_F(InformManagerTest, SubscriptionsPerPortAreBounded) {
  ScriptTransport t;
  InformOptions o;
  o.max_per_subscriber = 2;
  InformManager m(t, o, nullptr);
  EXPECT_EQ(m.Set(fabric_, testutil::kDefaultPrefix, Wants(1), From(cas_[0]), false).status, 0);
  EXPECT_EQ(m.Set(fabric_, testutil::kDefaultPrefix, Wants(2), From(cas_[0]), false).status, 0);
  EXPECT_EQ(m.Set(fabric_, testutil::kDefaultPrefix, Wants(3), From(cas_[0]), false).status,
            mad::sa_status::kNoResources);
  EXPECT_EQ(m.Set(fabric_, testutil::kDefaultPrefix, Wants(2), From(cas_[0]), false).status, 0);  // a replacement
  EXPECT_EQ(m.Set(fabric_, testutil::kDefaultPrefix, Wants(3), From(cas_[1]), false).status, 0);
}

TEST(InformMatchTest, FollowsTheIbaMatchingRules) {
  mad::Notice n = Trap128From(20);
  n.issuer_gid = GidOf(Guid{0xAA});
  InformInfo ii = Wants(128);
  EXPECT_TRUE(InformManager::Matches(ii, n));
  ii.trap_number_or_device_id = 129;
  EXPECT_FALSE(InformManager::Matches(ii, n));
  ii.trap_number_or_device_id = mad::kInformAnyTrap;
  EXPECT_TRUE(InformManager::Matches(ii, n));
  // Type: trap 128 is Urgent (1).
  ii.type = 1;
  EXPECT_TRUE(InformManager::Matches(ii, n));
  ii.type = 4;
  EXPECT_FALSE(InformManager::Matches(ii, n));
  ii.type = mad::kInformAnyType;
  // ProducerType: a switch issues trap 128.
  ii.producer_type_or_vendor_id = mad::producer::kCa;
  EXPECT_FALSE(InformManager::Matches(ii, n));
  ii.producer_type_or_vendor_id = mad::producer::kSwitch;
  EXPECT_TRUE(InformManager::Matches(ii, n));
  // IsGeneric must agree.
  ii.is_generic = 0;
  EXPECT_FALSE(InformManager::Matches(ii, n));
  ii.is_generic = 1;
  // LID range, when the GID is zero.
  ii.lid_range_begin = 10;
  ii.lid_range_end = 19;
  EXPECT_FALSE(InformManager::Matches(ii, n));
  ii.lid_range_end = 20;
  EXPECT_TRUE(InformManager::Matches(ii, n));
  // A GID, when given, decides alone.
  ii.gid = GidOf(Guid{0xBB});
  EXPECT_FALSE(InformManager::Matches(ii, n));
  ii.gid = GidOf(Guid{0xAA});
  ii.lid_range_begin = 1;
  ii.lid_range_end = 1;
  EXPECT_TRUE(InformManager::Matches(ii, n));
}

TEST(InformMatchTest, VendorSubscriptionsMatchVendorNoticesByDeviceAndVendor) {
  mad::Notice n;
  n.is_generic = 0;
  n.type = 4;
  n.producer_type_or_vendor_id = 0x0002C9;
  n.trap_number_or_device_id = 0x1003;
  InformInfo ii = Wants(0x1003);
  ii.is_generic = 0;
  ii.producer_type_or_vendor_id = 0x0002C9;
  EXPECT_TRUE(InformManager::Matches(ii, n));
  ii.producer_type_or_vendor_id = 0x0002CA;
  EXPECT_FALSE(InformManager::Matches(ii, n));
  n.is_generic = 1;
  ii.producer_type_or_vendor_id = mad::kInformAnyProducer;
  EXPECT_FALSE(InformManager::Matches(ii, n));
}

TEST_F(InformManagerTest, AReportCarriesTheNoticeToTheSubscribersAddress) {
  ASSERT_EQ(Set(Wants(128), cas_[0]).status, 0);
  ASSERT_EQ(Set(Wants(64), cas_[1]).status, 0);
  mad::Notice n = Trap128From(3);
  EXPECT_EQ(m_.Publish(n), 1u);
  ASSERT_EQ(transport_.sent.size(), 1u);
  const MadMessage& r = transport_.sent[0].msg;
  EXPECT_EQ(r.addr.lid, cas_[0]);
  EXPECT_EQ(r.addr.qpn, 1u);
  EXPECT_EQ(r.addr.qkey, 0x80010000u);
  mad::SaMad sa;
  ASSERT_TRUE(mad::DecodeSa(r.bytes, &sa).ok());
  EXPECT_EQ(sa.hdr.mgmt_class, 0x03);
  EXPECT_EQ(sa.hdr.class_version, 2);
  EXPECT_EQ(sa.hdr.method, mad::method::kReport);
  EXPECT_EQ(sa.hdr.attr_id, mad::attr::kNotice);
  auto got = mad::Decode<mad::Notice>(std::span<const uint8_t>(sa.data));
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->trap_number_or_device_id, 128);
  EXPECT_EQ(mad::Trap128Lid(*got), 3);
  Ack(transport_, 0);
  EXPECT_EQ(m_.counters().reports_sent, 1u);
  EXPECT_EQ(m_.counters().reports_acked, 1u);
  EXPECT_EQ(m_.reports_in_flight(), 0u);
}

// A subscriber that never answers (or a flood of traps it subscribed to) must not pile up
// Reports and their timers without end: beyond the cap per subscriber they are dropped and
// counted; other subscribers still get theirs.
TEST_F(InformManagerTest, ReportsWaitingForOneSubscriberAreCapped) {
  ASSERT_EQ(Set(Wants(128), cas_[0]).status, 0);
  for (int i = 0; i < 100; ++i) m_.Publish(Trap128From(3));
  const size_t cap = InformOptions{}.max_reports_per_subscriber;
  EXPECT_EQ(transport_.sent.size(), cap);
  EXPECT_EQ(m_.reports_in_flight(), cap);
  EXPECT_EQ(m_.counters().reports_dropped, 100 - cap);
  ASSERT_EQ(Set(Wants(128), cas_[1]).status, 0);
  EXPECT_EQ(m_.Publish(Trap128From(3)), 1u) << "the other subscriber is still served";
  // Once one is answered the first subscriber has room again.
  Ack(transport_, 0);
  EXPECT_EQ(m_.Publish(Trap128From(3)), 2u);
}

TEST_F(InformManagerTest, AnUnansweredReportIsResentThenGivenUp) {
  ASSERT_EQ(Set(Wants(128), cas_[0]).status, 0);
  m_.Publish(Trap128From(3));
  // First attempt and three resends (InformOptions::report.retries), then given up.
  for (size_t i = 0; i < 4; ++i) {
    ASSERT_EQ(transport_.sent.size(), i + 1);
    EXPECT_EQ(transport_.sent[i].options.retries, 0);
    TimeOut(transport_, i);
  }
  EXPECT_EQ(transport_.sent.size(), 4u);
  EXPECT_EQ(m_.counters().reports_sent, 1u);
  EXPECT_EQ(m_.counters().report_retries, 3u);
  EXPECT_EQ(m_.counters().reports_unacked, 1u);
  EXPECT_EQ(m_.counters().reports_acked, 0u);
  EXPECT_EQ(m_.reports_in_flight(), 0u);
}

TEST_F(InformManagerTest, AReportAnsweredOnARetryCountsAsAcked) {
  ASSERT_EQ(Set(Wants(128), cas_[0]).status, 0);
  m_.Publish(Trap128From(3));
  TimeOut(transport_, 0);
  ASSERT_EQ(transport_.sent.size(), 2u);
  Ack(transport_, 1);
  EXPECT_EQ(m_.counters().report_retries, 1u);
  EXPECT_EQ(m_.counters().reports_acked, 1u);
  EXPECT_EQ(m_.counters().reports_unacked, 0u);
}

TEST_F(InformManagerTest, SubscribersThatLeftTheFabricAreDropped) {
  ASSERT_EQ(Set(Wants(128), cas_[0]).status, 0);
  ASSERT_EQ(Set(Wants(128), cas_[1]).status, 0);
  // A fabric that still has the second CA's port but not the first's.
  Fabric g;
  auto ca = g.AddNode(NodeKind::kCa, Guid{0xC0FFEE}, 1, "ca", "ca");
  ASSERT_TRUE(ca.ok());
  Guid kept = fabric_.port(*fabric_.FindPortByLid(cas_[1])).guid;
  ASSERT_TRUE(g.SetPortGuid(g.port_id(*ca, PortNum{1}), kept).ok());
  EXPECT_EQ(m_.DropGone(fabric_), 0u);
  EXPECT_EQ(m_.DropGone(g), 1u);
  ASSERT_EQ(m_.subscriptions().size(), 1u);
  EXPECT_EQ(m_.subscriptions()[0].report_to.lid, cas_[1]);
  EXPECT_EQ(m_.counters().subscribers_dropped, 1u);
}

TEST_F(InformManagerTest, RecordsHideTheQpnFromUntrustedRequesters) {
  ASSERT_EQ(m_.Set(fabric_, testutil::kDefaultPrefix, Wants(128), From(cas_[0], 0x42), false).status, 0);
  EXPECT_EQ(m_.Records(true).at(0).inform_info.qpn, 0x42u);
  EXPECT_EQ(m_.Records(false).at(0).inform_info.qpn, 0u);
}

TEST(InformSaTest, ALateReportResponseReachesTheManagerNotTheIgnoredResponses) {
  ScriptTransport t;
  SystemClock clock;
  SaServer sa(t, SaServerOptions{}, clock);
  mad::SaMad m;
  m.hdr.mgmt_class = static_cast<uint8_t>(mad::MgmtClass::kSubnAdm);
  m.hdr.class_version = mad::kSaClassVersion;
  m.hdr.method = mad::method::kReportResp;
  m.hdr.attr_id = mad::attr::kNotice;
  MadMessage msg;
  msg.bytes.resize(mad::kMadSize);
  mad::EncodeSa(m, msg.bytes);
  EXPECT_FALSE(sa.Answer(msg).has_value());
  EXPECT_EQ(sa.inform().counters().report_responses_late, 1u);
  EXPECT_EQ(sa.counters().responses_ignored, 0u);
  // Any other response is still dropped as before.
  m.hdr.method = mad::method::kGetResp;
  mad::EncodeSa(m, msg.bytes);
  EXPECT_FALSE(sa.Answer(msg).has_value());
  EXPECT_EQ(sa.counters().responses_ignored, 1u);
}

TEST(InformPersistenceTest, SubscriptionsOutliveARestartThroughTheStateFile) {
  auto dir = std::filesystem::temp_directory_path() /
             ("ibsm_inform_" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) +
              "_" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  SystemClock clock;
  Fabric f = FabricWithLids();
  std::vector<Lid> cas = CaLids(f);
  std::vector<Subscription> before;
  {
    auto store = ha::StateStore::Open((dir / "state.db").string(), clock);
    ASSERT_TRUE(store.ok());
    ScriptTransport t;
    InformManager m(t, {}, store->get());
    ASSERT_EQ(m.Set(f, testutil::kDefaultPrefix, Wants(128), From(cas[0], 0x42), true).status, 0);
    InformInfo ranged = Wants(64);
    ranged.lid_range_begin = 2;
    ranged.lid_range_end = 0;  // one LID
    ASSERT_EQ(m.Set(f, testutil::kDefaultPrefix, ranged, From(cas[1]), false).status, 0);
    ASSERT_EQ(m.Set(f, testutil::kDefaultPrefix, Wants(65), From(cas[2]), false).status, 0);
    ASSERT_EQ(m.Set(f, testutil::kDefaultPrefix, Wants(65, 0), From(cas[2]), false).status, 0);
    before = m.subscriptions();
  }
  auto store = ha::StateStore::Open((dir / "state.db").string(), clock);
  ASSERT_TRUE(store.ok());
  ScriptTransport t;
  InformManager m(t, {}, store->get());
  ASSERT_TRUE(m.Load().ok());
  ASSERT_EQ(m.subscriptions().size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(SubscriptionKey(m.subscriptions()[i]), SubscriptionKey(before[i]));
    EXPECT_EQ(m.subscriptions()[i].report_to.lid, before[i].report_to.lid);
    EXPECT_EQ(m.subscriptions()[i].report_to.qpn, before[i].report_to.qpn);
    EXPECT_EQ(m.subscriptions()[i].trusted, before[i].trusted);
  }
  EXPECT_EQ(m.subscriptions()[1].record.inform_info.lid_range_end, 2);
  // The restored subscriptions work: a Report goes out, and the unsubscribe finds them.
  EXPECT_EQ(m.Publish(Trap128From(9)), 1u);
  EXPECT_EQ(t.sent.at(0).msg.addr.qpn, 0x42u);
  ASSERT_EQ(m.Set(f, testutil::kDefaultPrefix, Wants(128, 0), From(cas[0], 0x42), true).status, 0);
  EXPECT_EQ(store->get()->LoadInformSubscriptions()->size(), 1u);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace ibsm::sm
