// Event subscriptions end to end on the in-process simulator: a client port subscribes
// through the SA (SubnAdmSet InformInfo), reads its InformInfoRecords back, and receives
// Reports when a link goes down (trap 128 forwarded from the switch, trap 65 issued by the
// SM after the heavy sweep), answering each with a ReportResponse.
#include <gtest/gtest.h>

#include <chrono>
#include <optional>

#include <boost/asio/io_context.hpp>

#include "base/clock.h"
#include "fabric/generators.h"
#include "mad/attr/class_port_info.h"
#include "mad/attr/inform_info.h"
#include "mad/attr/notice.h"
#include "sim/sim_transport.h"
#include "sim/simulator.h"
#include "sm/sweep/subnet_manager.h"
#include "sm/testing/test_util.h"

namespace ibsm::sm {
namespace {

using testutil::CaPorts;
using testutil::GidOf;

using mad::MadMessage;
using mad::SaMad;

mad::InformInfo WantsTrap(uint16_t trap, uint8_t subscribe = 1) {
  mad::InformInfo ii;
  ii.lid_range_begin = mad::kInformAllLids;
  ii.is_generic = 1;
  ii.subscribe = subscribe;
  ii.type = mad::kInformAnyType;
  ii.trap_number_or_device_id = trap;
  ii.producer_type_or_vendor_id = mad::kInformAnyProducer;
  return ii;
}

// The SM on the first CA of a 2-level fat tree, a subscriber on the second.
class InformOnSimulator : public ::testing::Test {
 protected:
  void SetUp() override {
    auto f = FatTree2(4);
    ASSERT_TRUE(f.ok());
    fabric_ = *f;
    sim::SimOptions so;
    so.io = &io_;
    sim_ = std::make_unique<sim::Simulator>(fabric_, so);
    cas_ = CaPorts(fabric_);
    sm_transport_ = std::make_unique<sim::SimTransport>(io_, *sim_, cas_.at(0));
    client_ = std::make_unique<sim::SimTransport>(io_, *sim_, cas_.at(1));
    client_->SetUnsolicitedHandler([this](MadMessage m) { OnUnsolicited(std::move(m)); });
    SubnetManagerOptions o;
    o.send.timeout = std::chrono::milliseconds(20);
    o.sweep_interval = std::chrono::seconds(0);  // only traps start sweeps
    sm_ = std::make_unique<SubnetManager>(io_, *sm_transport_, clock_, nullptr, o);
    sm_->Start([this](const SweepStats& s) {
      ++sweeps_;
      last_ = s;
    });
    ASSERT_TRUE(RunUntil([&] { return sweeps_ >= 1; }));
    ASSERT_TRUE(last_.subnet_up);
  }
  void TearDown() override {
    if (sm_) sm_->Stop();
    if (client_) client_->Close();
    if (sm_transport_) sm_transport_->Close();
    sm_.reset();
  }

  // Runs the io_context until `done` holds; false if it did not within 20 s.
  bool RunUntil(const std::function<bool()>& done) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (!done()) {
      if (std::chrono::steady_clock::now() > deadline) return false;
      io_.restart();
      io_.run_for(std::chrono::milliseconds(5));
    }
    return true;
  }

  // The subscriber answers every Report with a ReportResponse (13.4.9) and keeps the notice.
  void OnUnsolicited(MadMessage m) {
    SaMad sa;
    if (!mad::DecodeSa(m.bytes, &sa).ok() || sa.hdr.method != mad::method::kReport) return;
    auto n = mad::Decode<mad::Notice>(std::span<const uint8_t>(sa.data));
    ASSERT_TRUE(n.ok());
    reports_.push_back(*n);
    if (!answer_reports_) return;
    MadMessage resp = m;
    SaMad r = sa;
    r.hdr.method = mad::method::kReportResp;
    mad::EncodeSa(r, resp.bytes);
    ASSERT_TRUE(client_->Post(std::move(resp)).ok());
  }

  // An SA request from the subscriber; the answer's header and data.
  std::optional<SaMad> Ask(uint8_t method, uint16_t attr, std::span<const uint8_t> data,
                           uint64_t comp_mask = 0, std::vector<uint8_t>* bytes = nullptr) {
    SaMad m;
    m.hdr.mgmt_class = static_cast<uint8_t>(mad::MgmtClass::kSubnAdm);
    m.hdr.class_version = mad::kSaClassVersion;
    m.hdr.method = method;
    m.hdr.attr_id = attr;
    m.comp_mask = comp_mask;
    std::copy(data.begin(), data.end(), m.data.begin());
    MadMessage msg;
    msg.bytes.resize(mad::kMadSize);
    mad::EncodeSa(m, msg.bytes);
    msg.addr.lid = sm_->sm_lid();
    std::optional<Result<MadMessage>> got;
    client_->Send(std::move(msg), mad::SendOptions{std::chrono::milliseconds(500), 2},
                  [&](Result<MadMessage> r) { got = std::move(r); });
    if (!RunUntil([&] { return got.has_value(); }) || !got->ok()) return std::nullopt;
    std::vector<uint8_t> b = (*got)->bytes;
    if (bytes) *bytes = b;
    b.resize(std::max(b.size(), mad::kMadSize), 0);
    SaMad resp;
    if (!mad::DecodeSa(b, &resp).ok()) return std::nullopt;
    return resp;
  }

  std::optional<SaMad> Subscribe(const mad::InformInfo& ii) {
    std::array<uint8_t, mad::Layout<mad::InformInfo>::kSize> buf{};
    mad::EncodeTo(ii, buf);
    return Ask(mad::method::kSet, mad::sa_attr::kInformInfo, buf);
  }

  const InformManager& inform() { return sm_->inform(); }

  boost::asio::io_context io_;
  Fabric fabric_;
  std::unique_ptr<sim::Simulator> sim_;
  std::vector<PortId> cas_;
  std::unique_ptr<sim::SimTransport> sm_transport_;
  std::unique_ptr<sim::SimTransport> client_;
  SystemClock clock_;
  std::unique_ptr<SubnetManager> sm_;
  int sweeps_ = 0;
  SweepStats last_;
  std::vector<mad::Notice> reports_;
  bool answer_reports_ = true;
};

TEST_F(InformOnSimulator, ASubscriptionThroughTheSaIsEchoedAndListedAsARecord) {
  auto a = Subscribe(WantsTrap(128));
  ASSERT_TRUE(a);
  EXPECT_EQ(a->hdr.method, mad::method::kGetResp);
  EXPECT_EQ(a->hdr.status, 0);
  auto echo = mad::Decode<mad::InformInfo>(std::span<const uint8_t>(a->data));
  ASSERT_TRUE(echo.ok());
  EXPECT_EQ(*echo, WantsTrap(128));
  ASSERT_TRUE(Subscribe(WantsTrap(65)));

  // GetTable by SubscriberGID: both, each naming the client's port.
  mad::InformInfoRecord want;
  want.subscriber_gid = GidOf(fabric_.port(cas_[1]).guid);
  std::array<uint8_t, mad::Layout<mad::InformInfoRecord>::kSize> buf{};
  mad::EncodeRecord(want, buf);
  std::vector<uint8_t> bytes;
  auto t = Ask(mad::method::kGetTable, mad::sa_attr::kInformInfoRecord, buf,
               mad::iir_comp::kSubscriberGid, &bytes);
  ASSERT_TRUE(t);
  EXPECT_EQ(t->hdr.status, 0);
  EXPECT_EQ(t->attr_offset, 8);
  std::vector<mad::InformInfoRecord> got;
  for (size_t at = mad::kSaHeaderSize; at + 64 <= bytes.size(); at += 64) {
    auto r = mad::DecodeRecord<mad::InformInfoRecord>(std::span<const uint8_t>(bytes).subspan(at));
    ASSERT_TRUE(r.ok());
    got.push_back(*r);
  }
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].subscriber_gid, want.subscriber_gid);
  EXPECT_EQ(got[0].inform_info.trap_number_or_device_id, 128);
  EXPECT_EQ(got[1].inform_info.trap_number_or_device_id, 65);
  EXPECT_EQ(got[0].inform_info.qpn, 0u);  // untrusted requester: QPN hidden

  // Another subscriber's GID: no records, and a Get says so.
  want.subscriber_gid = GidOf(fabric_.port(cas_[2]).guid);
  mad::EncodeRecord(want, buf);
  auto none = Ask(mad::method::kGet, mad::sa_attr::kInformInfoRecord, buf,
                  mad::iir_comp::kSubscriberGid);
  ASSERT_TRUE(none);
  EXPECT_EQ(none->hdr.status, mad::sa_status::kNoRecords);
}

TEST_F(InformOnSimulator, ClassPortInfoSaysTheSaTakesSubscriptions) {
  auto cpi = Ask(mad::method::kGet, mad::sa_attr::kClassPortInfo, {});
  ASSERT_TRUE(cpi);
  ASSERT_EQ(cpi->hdr.status, 0);
  auto c = mad::Decode<mad::ClassPortInfo>(std::span<const uint8_t>(cpi->data));
  ASSERT_TRUE(c.ok());
  EXPECT_TRUE(c->capability_mask & mad::sa_cap::kIsSubnGetSetNoticeSupported);
}

TEST_F(InformOnSimulator, BadSetsGetAnSaStatusAndTheRequestBackWithSubscribeCleared) {
  mad::InformInfo bad = WantsTrap(128);
  bad.gid = GidOf(Guid{0x1234});
  auto a = Subscribe(bad);
  ASSERT_TRUE(a);
  EXPECT_EQ(a->hdr.method, mad::method::kGetResp);
  EXPECT_EQ(a->hdr.status, mad::sa_status::kReqInvalidGid);
  auto echo = mad::Decode<mad::InformInfo>(std::span<const uint8_t>(a->data));
  ASSERT_TRUE(echo.ok());
  EXPECT_EQ(echo->subscribe, 0);
  EXPECT_EQ(echo->gid, bad.gid);
  auto un = Subscribe(WantsTrap(128, 0));
  ASSERT_TRUE(un);
  EXPECT_EQ(un->hdr.status, mad::sa_status::kReqInvalid);
  // InformInfo is only Set (13.4.8.3).
  std::array<uint8_t, 36> buf{};
  auto get = Ask(mad::method::kGet, mad::sa_attr::kInformInfo, buf);
  ASSERT_TRUE(get);
  EXPECT_EQ(get->hdr.status, mad::mad_status::kMethodAttrUnsupported);
  EXPECT_TRUE(inform().subscriptions().empty());
  EXPECT_EQ(inform().counters().rejected, 2u);
}

TEST_F(InformOnSimulator, ALinkGoingDownIsReportedAsTrap128AndTheLostPortAsTrap65) {
  ASSERT_TRUE(Subscribe(WantsTrap(mad::trap::kLinkStateChanged)));
  ASSERT_TRUE(Subscribe(WantsTrap(mad::trap::kGidOutOfService)));
  ASSERT_EQ(inform().subscriptions().size(), 2u);
  // The third CA loses its cable: its leaf switch traps 128, the SM sweeps and finds the
  // CA gone.
  const PortId victim = cas_.at(2);
  const Guid victim_guid = fabric_.port(victim).guid;
  const PortId leaf_port = fabric_.port(victim).peer;
  const NodeId leaf = fabric_.port(leaf_port).node;
  const Guid leaf_guid = fabric_.port(fabric_.port_id(leaf, PortNum{0})).guid;
  ASSERT_TRUE(sim_->LinkDown(victim).ok());
  auto has = [&](uint16_t trap) {
    return std::any_of(reports_.begin(), reports_.end(),
                       [&](const mad::Notice& n) { return n.trap_number_or_device_id == trap; });
  };
  ASSERT_TRUE(RunUntil([&] { return has(128) && has(65) && sweeps_ >= 2; }));
  for (const mad::Notice& n : reports_) {
    if (n.trap_number_or_device_id == 128) {
      EXPECT_EQ(n.producer_type_or_vendor_id, mad::producer::kSwitch);
      EXPECT_EQ(n.issuer_gid, GidOf(leaf_guid));  // filled in by the SM
    } else if (n.trap_number_or_device_id == 65) {
      EXPECT_EQ(mad::Trap64Gid(n), GidOf(victim_guid));
      EXPECT_EQ(n.issuer_lid, sm_->sm_lid().value());
      EXPECT_EQ(n.producer_type_or_vendor_id, mad::producer::kClassManager);
    } else {
      ADD_FAILURE() << "unexpected Report of trap " << n.trap_number_or_device_id;
    }
  }
  ASSERT_TRUE(RunUntil([&] { return inform().reports_in_flight() == 0; }));
  EXPECT_EQ(inform().counters().reports_acked, reports_.size());
  EXPECT_EQ(inform().counters().reports_unacked, 0u);
}

TEST_F(InformOnSimulator, AReportNobodyAnswersIsRetriedThenGivenUp) {
  answer_reports_ = false;
  ASSERT_TRUE(Subscribe(WantsTrap(mad::trap::kGidOutOfService)));
  ASSERT_TRUE(sim_->LinkDown(cas_.at(2)).ok());
  ASSERT_TRUE(RunUntil([&] { return inform().counters().reports_unacked >= 1; }));
  // The subscriber saw the first attempt and every retry (20 ms timeout, 3 retries).
  EXPECT_EQ(reports_.size(), 4u);
  EXPECT_EQ(inform().counters().reports_sent, 1u);
  EXPECT_EQ(inform().counters().report_retries, 3u);
  EXPECT_EQ(inform().counters().reports_acked, 0u);
}

TEST_F(InformOnSimulator, ASubscriberWhoseLinkGoesDownIsDroppedAfterTheSweep) {
  ASSERT_TRUE(Subscribe(WantsTrap(mad::trap::kLinkStateChanged)));
  ASSERT_EQ(inform().subscriptions().size(), 1u);
  answer_reports_ = false;
  ASSERT_TRUE(sim_->LinkDown(cas_.at(1)).ok());  // the subscriber itself
  ASSERT_TRUE(RunUntil([&] { return sweeps_ >= 2; }));
  EXPECT_TRUE(inform().subscriptions().empty());
  EXPECT_EQ(inform().counters().subscribers_dropped, 1u);
}

}  // namespace
}  // namespace ibsm::sm
