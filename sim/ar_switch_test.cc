// The simulator's adaptive-routing agent seen from the wire: DR SMPs from a host, as the SM
// sends them.
#include "sim/ar_switch.h"

#include <fstream>
#include <optional>
#include <vector>

#include <boost/asio.hpp>
#include <gtest/gtest.h>

#include "mad/attr/general_info.h"
#include "mad/attr/linear_forwarding_table.h"
#include "sim/sim_transport.h"
#include "sim/simulator.h"

namespace ibsm::sim {
namespace {

using namespace std::chrono_literals;

// h0 - s0 (port 3) - s1 (s0 port 1 to s1 port 2); s0 is AR-capable, s1 is legacy.
struct ArFixture : ::testing::Test {
  Fabric f;
  NodeId s0, s1, h0;
  boost::asio::io_context io;
  std::unique_ptr<Simulator> sim;
  std::unique_ptr<SimTransport> t;
  mad::SendOptions fast{20ms, 1};

  void SetUp() override {
    s0 = *f.AddNode(NodeKind::kSwitch, Guid{0x100}, 8, "s0", "");
    s1 = *f.AddNode(NodeKind::kSwitch, Guid{0x101}, 8, "s1", "");
    h0 = *f.AddNode(NodeKind::kCa, Guid{0x200}, 1, "h0", "");
    ASSERT_TRUE(f.Connect(s0, PortNum{1}, s1, PortNum{2}).ok());
    ASSERT_TRUE(f.Connect(h0, PortNum{1}, s0, PortNum{3}).ok());
    sim = std::make_unique<Simulator>(f);
    ASSERT_TRUE(sim->SetArCapable(s0, true).ok());
    t = std::make_unique<SimTransport>(io, *sim, f.port_id(h0, PortNum{1}));
    ASSERT_TRUE(t->bind_status().ok());
  }

  Result<mad::Smp> Dr(uint8_t method, uint16_t attr, uint32_t mod, std::vector<uint8_t> path,
                      const std::array<uint8_t, 64>* data = nullptr) {
    mad::Smp s = mad::MakeDrSmp(method, attr, mod, path);
    if (data) s.data = *data;
    std::optional<Result<mad::MadMessage>> r;
    t->Send(mad::ToMessage(s), fast, [&](Result<mad::MadMessage> x) { r.emplace(std::move(x)); });
    auto end = std::chrono::steady_clock::now() + 5s;
    while (!r && std::chrono::steady_clock::now() < end) {
      io.restart();
      io.run_for(1ms);
    }
    if (!r) return Internal("no completion");
    if (!r->ok()) return r->status();
    return mad::Decode<mad::Smp>((*r)->bytes);
  }
  template <typename A>
  Result<mad::Smp> Set(uint16_t attr, uint32_t mod, std::vector<uint8_t> path, const A& a) {
    std::array<uint8_t, 64> d{};
    mad::EncodeTo(a, d);
    return Dr(mad::method::kSet, attr, mod, path, &d);
  }
};

TEST_F(ArFixture, CapableSwitchAnswersGeneralInfoAndLegacySwitchStaysSilent) {
  auto r = Dr(mad::method::kGet, mad::attr::kGeneralInfo, mad::kGeneralInfoCapabilityModifier, {1});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->status, 0);
  auto caps = mad::Decode<mad::GeneralInfoCapabilities>(r->data);
  ASSERT_TRUE(caps.ok());
  // SwitchX-style AR only: bit 2 (mask 4 of dword 0), never with the legacy bit 1.
  EXPECT_EQ(r->data[3], 0x04);
  EXPECT_TRUE(caps->Has(mad::general_cap::kAdaptiveRoutingRev1));
  EXPECT_FALSE(caps->Has(mad::general_cap::kAdaptiveRoutingLegacy));
  EXPECT_FALSE(caps->Has(mad::general_cap::kSharpAggregationNode));

  auto legacy = Dr(mad::method::kGet, mad::attr::kGeneralInfo, 4, {1, 1});
  ASSERT_FALSE(legacy.ok());
  EXPECT_EQ(legacy.status().code(), StatusCode::kTimeout);
  EXPECT_EQ(sim->counters().drops(DropReason::kVendorAttr), 2u);  // first try and one retry
  EXPECT_EQ(sim->ar_switch(s1), nullptr);
  auto info = Dr(mad::method::kGet, mad::attr::kArInfo, 0, {1, 1});
  EXPECT_FALSE(info.ok());
}

TEST_F(ArFixture, GroupTableAndArLftAreStoredAndReadBack) {
  mad::ArGroupTable gt;
  mad::ArPortMask m;
  m.Add(1);
  m.Add(2);
  gt.SetGroup(1, m);
  auto r = Set(mad::attr::kArGroupTable, mad::ArGroupTableAttrMod(5), {1}, gt);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->status, 0);
  EXPECT_EQ(sim->ar_switch(s0)->group(11), m);
  EXPECT_TRUE(sim->ar_switch(s0)->group(10).empty());
  auto back = Dr(mad::method::kGet, mad::attr::kArGroupTable, mad::ArGroupTableAttrMod(5), {1});
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(mad::Decode<mad::ArGroupTable>(back->data)->Group(1).Ports(),
            (std::vector<uint8_t>{1, 2}));

  mad::ArLinearForwardingTable lft;
  for (size_t i = 0; i < 16; ++i) lft.SetEntry(i, {2, 0, 3, 3});
  lft.SetEntry(4, {static_cast<uint8_t>(mad::ArLidState::kFree), 0, 1, 11});
  r = Set(mad::attr::kArLinearForwardingTable, mad::ArLftAttrMod(2), {1}, lft);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->status, 0);
  EXPECT_EQ(sim->ar_switch(s0)->lft_entry(Lid{36}),
            (mad::ArLftEntry{static_cast<uint8_t>(mad::ArLidState::kFree), 0, 1, 11}));
  EXPECT_EQ(sim->ar_switch(s0)->lft_entry(Lid{37}).group_number, 3);
  EXPECT_EQ(sim->ar_switch(s0)->lft_entry(Lid{100}).default_port, 0xFF);  // never written
}

TEST_F(ArFixture, BadPortsGroupsAndBlocksAreInvalidFieldAndChangeNothing) {
  mad::ArGroupTable gt;
  mad::ArPortMask bad;
  bad.Add(9);  // the switch has 8 ports
  gt.SetGroup(0, bad);
  auto r = Set(mad::attr::kArGroupTable, 0, {1}, gt);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->status, mad::mad_status::kInvalidField);
  EXPECT_TRUE(sim->ar_switch(s0)->group(0).empty());

  r = Set(mad::attr::kArGroupTable, mad::ArGroupTableAttrMod(5000), {1}, mad::ArGroupTable{});
  EXPECT_EQ(r->status, mad::mad_status::kInvalidField);

  mad::ArLinearForwardingTable lft;
  lft.SetEntry(0, {static_cast<uint8_t>(mad::ArLidState::kBounded), 0, 1, 4095});  // > GroupCap
  r = Set(mad::attr::kArLinearForwardingTable, 0, {1}, lft);
  EXPECT_EQ(r->status, mad::mad_status::kInvalidField);
  EXPECT_EQ(sim->ar_switch(s0)->lft_entry(Lid{0}).default_port, 0xFF);
  r = Set(mad::attr::kArLinearForwardingTable, mad::ArLftAttrMod(0xFFFF), {1},
          mad::ArLinearForwardingTable{});
  EXPECT_EQ(r->status, mad::mad_status::kInvalidField);

  mad::ArInfo info;
  info.group_top = 4000;
  r = Set(mad::attr::kArInfo, 0, {1}, info);
  EXPECT_EQ(r->status, mad::mad_status::kInvalidField);
}

TEST_F(ArFixture, APreSwitchXSwitchReportsOnlyTheLegacyBit) {
  sim::ArSwitchCaps caps;
  caps.legacy_format = true;
  ASSERT_TRUE(sim->SetArCapable(s1, true, caps).ok());
  auto r = Dr(mad::method::kGet, mad::attr::kGeneralInfo, mad::kGeneralInfoCapabilityModifier,
              {1, 1});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->data[3], 0x02);  // bit 1 only
}

// Capability Get (modifier bit 31, ibsm encoding v1) answers what the switch can do and no
// settings; the plain Get (modifier 0) answers the settings too.
TEST_F(ArFixture, CapabilityGetCarriesNoSettingsAndPlainGetCarriesThem) {
  mad::ArInfo info;
  info.e = 1;
  info.group_top = 3;
  info.unmanaged = sim::kSimArInfoUnmanaged;
  ASSERT_EQ(Set(mad::attr::kArInfo, 0, {1}, info)->status, 0);
  auto cap = Dr(mad::method::kGet, mad::attr::kArInfo, 0x80000000u, {1});
  ASSERT_TRUE(cap.ok());
  EXPECT_EQ(cap->data[3] & 0x01, 0);           // E not in a capability answer
  EXPECT_EQ(cap->data[0] & 0x20, 0x20);        // by-transport capable
  EXPECT_EQ(cap->data[6] << 8 | cap->data[7], 0x800);  // GroupCap 2048, GroupTop 0
  auto cur = Dr(mad::method::kGet, mad::attr::kArInfo, 0, {1});
  ASSERT_TRUE(cur.ok());
  EXPECT_EQ(cur->data[3] & 0x01, 0x01);
  EXPECT_EQ(cur->data[5], 0x00);
  EXPECT_EQ(cur->data[6], 0x38);  // GroupTop 3 in bits 23-12, GroupCap 0x800
  EXPECT_EQ(cur->data[20], 0x5A);  // bytes 20 on as the switch holds them
  EXPECT_EQ(cur->data[27], 0x34);
}

// byte 15 by_transport_disable means something only with byte 0 b5 (by-transport capable); a
// switch without it refuses a Set that changes the field and keeps it as it was.
TEST_F(ArFixture, ByTransportDisableIsRefusedWhenNotByTransportCapable) {
  sim::ArSwitchCaps caps;
  caps.by_transport_cap = 0;
  ASSERT_TRUE(sim->SetArCapable(s1, true, caps).ok());
  mad::ArInfo info;
  info.e = 1;
  info.by_transport_disable = mad::ar_transport::kUd | mad::ar_transport::kUc;
  EXPECT_EQ(Set(mad::attr::kArInfo, 0, {1, 1}, info)->status, mad::mad_status::kInvalidField);
  EXPECT_EQ(sim->ar_switch(s1)->info().e, 0);
  info.by_transport_disable = 0;
  EXPECT_EQ(Set(mad::attr::kArInfo, 0, {1, 1}, info)->status, 0);
  EXPECT_EQ(sim->ar_switch(s1)->info().e, 1);
}

// ARLFT LidState 3 is hash-based forwarding: accepted like bounded and free, group < GroupCap.
TEST_F(ArFixture, HashBasedLidStateIsAccepted) {
  mad::ArLinearForwardingTable blk;
  blk.SetEntry(4, {static_cast<uint8_t>(mad::ArLidState::kHashBased), 0, 1, 7});
  auto r = Set(mad::attr::kArLinearForwardingTable, mad::ArLftAttrMod(0), {1}, blk);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->status, 0);
  EXPECT_EQ(r->data[16], 0xC0);
  EXPECT_EQ(sim->ar_switch(s0)->lft_entry(Lid{4}).lid_state, 3);
  EXPECT_EQ(sim->ar_switch(s0)->lft_entry(Lid{4}).group_number, 7);
  blk.SetEntry(4, {static_cast<uint8_t>(mad::ArLidState::kHashBased), 0, 1, 4000});
  EXPECT_EQ(Set(mad::attr::kArLinearForwardingTable, mad::ArLftAttrMod(0), {1}, blk)->status,
            mad::mad_status::kInvalidField);
}

TEST_F(ArFixture, PlainLftSetTurnsArOffUnlessNoFallback) {
  mad::ArInfo info = *mad::Decode<mad::ArInfo>(
      Dr(mad::method::kGet, mad::attr::kArInfo, 0x80000000u, {1})->data);
  EXPECT_EQ(info.group_cap, 2048);
  EXPECT_EQ(info.e, 0);
  info.e = 1;
  info.by_sl_enabled = 1;
  info.enable_by_sl_mask = 0x0003;
  ASSERT_EQ(Set(mad::attr::kArInfo, 0, {1}, info)->status, 0);
  EXPECT_EQ(sim->ar_switch(s0)->info().e, 1);
  EXPECT_EQ(sim->ar_switch(s0)->info().enable_by_sl_mask, 0x0003);

  mad::LinearForwardingTable plain;
  plain.port.fill(3);
  ASSERT_EQ(Set(mad::attr::kLinearForwardingTable, 0, {1}, plain)->status, 0);
  EXPECT_EQ(sim->ar_switch(s0)->info().e, 0);

  info.no_fallback = 1;
  ASSERT_EQ(Set(mad::attr::kArInfo, 0, {1}, info)->status, 0);
  ASSERT_EQ(Set(mad::attr::kLinearForwardingTable, 0, {1}, plain)->status, 0);
  EXPECT_EQ(sim->ar_switch(s0)->info().e, 1);
}

TEST_F(ArFixture, GroupTableCopyFillsEveryRangeFromTheSourceGroup) {
  mad::ArGroupTable gt;
  mad::ArPortMask m;
  m.Add(1);
  m.Add(4);
  gt.SetGroup(0, m);
  ASSERT_EQ(Set(mad::attr::kArGroupTable, 0, {1}, gt)->status, 0);
  mad::ArGroupTableCopy c;
  c.SetRange(0, {.last = 9, .first = 5});
  c.SetRange(1, {.last = 20, .first = 20});
  ASSERT_EQ(Set(mad::attr::kArGroupTableCopy, mad::ArGroupTableCopyAttrMod(0), {1}, c)->status, 0);
  for (uint16_t g : {5, 7, 9, 20}) EXPECT_EQ(sim->ar_switch(s0)->group(g), m) << g;
  for (uint16_t g : {4, 10, 19}) EXPECT_TRUE(sim->ar_switch(s0)->group(g).empty()) << g;
  c.SetRange(2, {.last = 5000, .first = 30});
  EXPECT_EQ(Set(mad::attr::kArGroupTableCopy, 0, {1}, c)->status, mad::mad_status::kInvalidField);
  EXPECT_TRUE(sim->ar_switch(s0)->group(30).empty());
}

TEST_F(ArFixture, RebootClearsArTablesButKeepsTheCapability) {
  mad::ArInfo info;
  info.e = 1;
  ASSERT_EQ(Set(mad::attr::kArInfo, 0, {1}, info)->status, 0);
  ASSERT_TRUE(sim->RebootSwitch(s0).ok());
  ASSERT_NE(sim->ar_switch(s0), nullptr);
  EXPECT_EQ(sim->ar_switch(s0)->info().e, 0);
}

}  // namespace
}  // namespace ibsm::sim

namespace ibsm::sim {
namespace {

TEST(SelectSwitchesTest, AllNoneGuidListsAndFilesNameSwitchesOnly) {
  Fabric f;
  NodeId s0 = *f.AddNode(NodeKind::kSwitch, Guid{0x100}, 8, "s0", "");
  NodeId s1 = *f.AddNode(NodeKind::kSwitch, Guid{0x101}, 8, "s1", "");
  (void)*f.AddNode(NodeKind::kCa, Guid{0x200}, 1, "h0", "");
  EXPECT_EQ(*SelectSwitches(f, "all"), (std::vector<NodeId>{s0, s1}));
  EXPECT_TRUE(SelectSwitches(f, "none")->empty());
  EXPECT_TRUE(SelectSwitches(f, "")->empty());
  EXPECT_EQ(*SelectSwitches(f, "0x101, 0x101"), (std::vector<NodeId>{s1}));
  EXPECT_FALSE(SelectSwitches(f, "0x200").ok());  // a CA
  EXPECT_FALSE(SelectSwitches(f, "0x100,bogus").ok());
  const std::string path = ::testing::TempDir() + "/ar_switches.txt";
  {
    std::ofstream out(path);
    out << "# AR-capable\n0x100\n\n101  # the other one\n";
  }
  EXPECT_EQ(*SelectSwitches(f, path), (std::vector<NodeId>{s0, s1}));
  {
    std::ofstream out(path);
    out << "0x100\nnot-a-guid\n";
  }
  auto bad = SelectSwitches(f, path);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find(":2:"), std::string::npos);
}

}  // namespace
}  // namespace ibsm::sim
