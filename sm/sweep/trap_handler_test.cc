// TrapHandler without the sweep engine: traps handed to it as the engine's unsolicited
// handler does, and a host that records the sweeps and Reports it is asked for.
#include "sm/sweep/trap_handler.h"

#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include <boost/asio/io_context.hpp>

#include "fabric/generators.h"
#include "sim/sim_transport.h"
#include "sim/simulator.h"
#include "sm/sweep/subnet_manager.h"
#include "sm/testing/test_util.h"

namespace ibsm::sm {
namespace {

using testutil::CaPorts;

class RecordingTrapHost : public TrapHandler::Host {
 public:
  mad::SmState state = mad::SmState::kMaster;
  std::map<uint16_t, Guid> switches;  // LID of port 0 -> switch GUID
  std::vector<std::pair<Guid, bool>> reports;  // switch, repair
  std::vector<std::string> heavy_sweeps;
  std::vector<mad::Notice> published;
  DiscoveryResult model;  // empty: the switches above stand for it

  const DiscoveryResult* TrapDiscovered() const override { return &model; }
  mad::SmState TrapSmState() const override { return state; }
  Lid TrapSmLid() const override { return Lid{1}; }
  std::optional<Guid> TrapSwitchOfLid(uint16_t lid) const override {
    auto it = switches.find(lid);
    if (it == switches.end()) return std::nullopt;
    return it->second;
  }
  void TrapSwitchReported(Guid sw, bool repair, const std::string&) override {
    reports.emplace_back(sw, repair);
  }
  void TrapRequestHeavySweep(const std::string& why) override { heavy_sweeps.push_back(why); }
  DrPath TrapPortInfoPath(PortId) const override { return {}; }
  void TrapPublish(const mad::Notice& n) override { published.push_back(n); }
};

class TrapHandlerTest : public ::testing::Test {
 protected:
  TrapHandlerTest()
      : fabric_(*FatTree2(4)),
        sim_(fabric_),
        transport_(io_, sim_, CaPorts(fabric_)[0]),
        pipeline_(transport_, 16, options_.send, 0),
        handler_(transport_, pipeline_, clock_, options_, counters_, host_) {}

  // A trap as it comes in: `notice` from source LID `from`.
  void Deliver(mad::Notice notice, uint16_t from) {
    mad::Smp smp = mad::MakeLidSmp(mad::method::kTrap, mad::attr::kNotice, 0, 0);
    mad::EncodeSmpNotice(notice, smp.data);
    mad::MadMessage msg = mad::ToMessage(smp, Lid{1});
    msg.addr.lid = Lid{from};
    handler_.HandleTrap(smp, msg);
  }

  Fabric fabric_;
  boost::asio::io_context io_;
  sim::Simulator sim_;
  sim::SimTransport transport_;
  SubnetManagerOptions options_;
  SmpPipeline pipeline_;
  ManualClock clock_;
  SmCounters counters_;
  RecordingTrapHost host_;
  TrapHandler handler_;
};

TEST_F(TrapHandlerTest, ALinkTrapFromAKnownSwitchAsksForARepairAndItsRepeatsOnlyCountForDamping) {
  const Guid sw{0x1234};
  host_.switches[5] = sw;
  for (int i = 0; i < 15; ++i) Deliver(mad::MakeTrap128(5), 5);
  EXPECT_EQ(counters_.traps_received, 15u);
  EXPECT_EQ(counters_.traps_suppressed, 5u);
  ASSERT_EQ(host_.reports.size(), 15u);
  int repairs = 0;
  for (const auto& [g, repair] : host_.reports) {
    EXPECT_EQ(g, sw);
    repairs += repair;
  }
  EXPECT_EQ(repairs, 10);  // the 11th and later within 5 s: counted for damping, no repair
  EXPECT_TRUE(host_.heavy_sweeps.empty());
  EXPECT_EQ(host_.published.size(), 10u);

  // After a pause the trap counts again.
  clock_.Advance(std::chrono::seconds(6));
  Deliver(mad::MakeTrap128(5), 5);
  ASSERT_EQ(host_.reports.size(), 16u);
  EXPECT_TRUE(host_.reports.back().second);
}

TEST_F(TrapHandlerTest, TheSourceLidNamesTheIssuerAndOnlyTheMasterPublishes) {
  // From LID 7, no switch the host knows, claiming LID 9: a heavy sweep, published as LID 7's.
  mad::Notice n = mad::MakeTrap128(7);
  n.issuer_lid = 9;
  Deliver(n, 7);
  EXPECT_EQ(counters_.traps_issuer_mismatch, 1u);
  EXPECT_EQ(host_.heavy_sweeps.size(), 1u);
  EXPECT_TRUE(host_.reports.empty());
  ASSERT_EQ(host_.published.size(), 1u);
  EXPECT_EQ(host_.published[0].issuer_lid, 7);

  // A standby sweeps when asked (its engine decides what that means) but reports nothing.
  host_.state = mad::SmState::kStandby;
  Deliver(mad::MakeTrap128(8), 8);
  EXPECT_EQ(host_.heavy_sweeps.size(), 2u);
  EXPECT_EQ(host_.published.size(), 1u);

  // Trap 144 from the SM's own LID: its IsSM bit, nothing changed on the fabric.
  host_.state = mad::SmState::kMaster;
  mad::Trap144Details d;
  d.lid = 1;
  Deliver(mad::MakeTrap144(mad::producer::kCa, 1, d), 1);
  EXPECT_EQ(counters_.own_traps_ignored, 1u);
  EXPECT_EQ(host_.heavy_sweeps.size(), 2u);
}

}  // namespace
}  // namespace ibsm::sm
