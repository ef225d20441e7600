#include "sim/simulator.h"

#include <optional>
#include <vector>

#include <boost/asio.hpp>
#include <gtest/gtest.h>

#include "mad/attr/guid_info.h"
#include "mad/attr/linear_forwarding_table.h"
#include "mad/attr/multicast_forwarding_table.h"
#include "mad/attr/pkey_table.h"
#include "mad/attr/node_info.h"
#include "mad/attr/notice.h"
#include "mad/attr/port_info.h"
#include "mad/attr/sm_info.h"
#include "mad/attr/switch_info.h"
#include "mad/rmpp.h"
#include "sim/sim_transport.h"

namespace ibsm::sim {
namespace {

using namespace std::chrono_literals;

// A chain of switches s0 - s1 - s2 (port 1 of each to port 2 of the next), host h0 on
// s0 port 3, host h1 on s2 port 3, host h2 on s1 port 3. s0 port 4 is uncabled.
struct Chain {
  Fabric f;
  NodeId s[3], h[3];
  Chain() {
    for (int i = 0; i < 3; ++i) {
      s[i] = *f.AddNode(NodeKind::kSwitch, Guid{0x100u + i}, 8, "s" + std::to_string(i), "");
      h[i] = *f.AddNode(NodeKind::kCa, Guid{0x200u + 0x10u * i}, 1, "h" + std::to_string(i), "");
    }
    EXPECT_TRUE(f.Connect(s[0], PortNum{1}, s[1], PortNum{2}).ok());
    EXPECT_TRUE(f.Connect(s[1], PortNum{1}, s[2], PortNum{2}).ok());
    EXPECT_TRUE(f.Connect(h[0], PortNum{1}, s[0], PortNum{3}).ok());
    EXPECT_TRUE(f.Connect(h[1], PortNum{1}, s[2], PortNum{3}).ok());
    EXPECT_TRUE(f.Connect(h[2], PortNum{1}, s[1], PortNum{3}).ok());
  }
  PortId P(NodeId n, int num) const { return f.port_id(n, PortNum{static_cast<uint8_t>(num)}); }
};

// Runs the io_context until `done` or a bound on wall time.
template <typename Pred>
void RunUntil(boost::asio::io_context& io, Pred done) {
  auto end = std::chrono::steady_clock::now() + 5s;
  io.restart();
  while (!done() && std::chrono::steady_clock::now() < end) {
    io.run_for(1ms);
    io.restart();
  }
}

struct Fixture : ::testing::Test {
  Chain c;
  boost::asio::io_context io;
  std::unique_ptr<Simulator> sim;
  std::unique_ptr<SimTransport> sm;  // at h0
  mad::SendOptions fast{20ms, 2};

  void SetUp() override { Make(SimOptions{}); }
  void Make(SimOptions o) {
    sm.reset();
    sim = std::make_unique<Simulator>(c.f, o);
    sm = std::make_unique<SimTransport>(io, *sim, c.P(c.h[0], 1));
    ASSERT_TRUE(sm->bind_status().ok());
  }

  Result<mad::Smp> Call(SimTransport& t, const mad::MadMessage& m) {
    std::optional<Result<mad::MadMessage>> r;
    t.Send(m, fast, [&](Result<mad::MadMessage> x) { r.emplace(std::move(x)); });
    RunUntil(io, [&] { return r.has_value(); });
    if (!r) return Internal("no completion");
    if (!r->ok()) return r->status();
    return mad::Decode<mad::Smp>((*r)->bytes);
  }
  Result<mad::Smp> Dr(uint8_t method, uint16_t attr, uint32_t mod, std::vector<uint8_t> path,
                      const std::array<uint8_t, 64>* data = nullptr) {
    mad::Smp s = mad::MakeDrSmp(method, attr, mod, path);
    if (data) s.data = *data;
    return Call(*sm, mad::ToMessage(s));
  }
  Result<mad::Smp> LidSmp(uint8_t method, uint16_t attr, uint32_t mod, uint16_t dlid,
                          const std::array<uint8_t, 64>* data = nullptr) {
    mad::Smp s = mad::MakeLidSmp(method, attr, mod);
    if (data) s.data = *data;
    return Call(*sm, mad::ToMessage(s, Lid{dlid}));
  }
  template <typename A>
  Status SetDr(uint16_t attr, uint32_t mod, std::vector<uint8_t> path, const A& a) {
    std::array<uint8_t, 64> d{};
    mad::EncodeTo(a, d);
    auto r = Dr(mad::method::kSet, attr, mod, path, &d);
    if (!r.ok()) return r.status();
    if (r->status != 0) return InvalidArgument("status " + std::to_string(r->status));
    return Status::Ok();
  }
  // Gives host/switch end ports LIDs 1.. and the SM LID 1 (h0), by DR PortInfo Set.
  void AssignLids() {
    // h0 = 1, s0 = 2, s1 = 3, s2 = 4, h1 = 5, h2 = 6
    struct { std::vector<uint8_t> path; uint32_t mod; uint16_t lid; } e[] = {
        {{}, 1, 1}, {{1}, 0, 2}, {{1, 1}, 0, 3}, {{1, 1, 1}, 0, 4},
        {{1, 1, 1, 3}, 1, 5}, {{1, 1, 3}, 1, 6}};
    for (auto& x : e) {
      auto pi = Dr(mad::method::kGet, mad::attr::kPortInfo, x.mod, x.path);
      ASSERT_TRUE(pi.ok());
      mad::PortInfo p = *mad::Decode<mad::PortInfo>(pi->data);
      p.lid = x.lid;
      p.master_sm_base_lid = 1;
      p.port_state = 0;
      ASSERT_TRUE(SetDr(mad::attr::kPortInfo, x.mod, x.path, p).ok());
    }
  }
  // Programs LFT block 0 of a switch: lid -> port.
  void Lft(std::vector<uint8_t> path, std::vector<std::pair<uint16_t, uint8_t>> entries) {
    mad::LinearForwardingTable t;
    t.port.fill(mad::kLftDropPort);
    for (auto [l, p] : entries) t.port[l] = p;
    ASSERT_TRUE(SetDr(mad::attr::kLinearForwardingTable, 0, path, t).ok());
  }
  void ProgramAllLfts() {
    Lft({1}, {{1, 3}, {2, 0}, {3, 1}, {4, 1}, {5, 1}, {6, 1}});
    Lft({1, 1}, {{1, 2}, {2, 2}, {3, 0}, {4, 1}, {5, 1}, {6, 3}});
    Lft({1, 1, 1}, {{1, 2}, {2, 2}, {3, 2}, {4, 0}, {5, 3}, {6, 2}});
  }
};

using SimulatorTest = Fixture;

TEST_F(SimulatorTest, DrNodeInfoThreeHopsAwayReturnsItsNodeInfoWithTheEntryPort) {
  auto r = Dr(mad::method::kGet, mad::attr::kNodeInfo, 0, {1, 1, 1, 3});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->method, mad::method::kGetResp);
  EXPECT_EQ(r->status, 0);
  EXPECT_EQ(r->direction, 1);
  auto ni = mad::Decode<mad::NodeInfo>(r->data);
  ASSERT_TRUE(ni.ok());
  EXPECT_EQ(ni->node_guid, 0x210u);
  EXPECT_EQ(ni->node_type, mad::NodeType::kCa);
  EXPECT_EQ(ni->local_port_num, 1);
  EXPECT_EQ(ni->port_guid, 0x211u);

  auto sw = Dr(mad::method::kGet, mad::attr::kNodeInfo, 0, {1, 1});
  ASSERT_TRUE(sw.ok());
  auto sni = *mad::Decode<mad::NodeInfo>(sw->data);
  EXPECT_EQ(sni.node_guid, 0x101u);
  EXPECT_EQ(sni.local_port_num, 2);  // s1 was entered on port 2
  EXPECT_EQ(sni.num_ports, 8);
}

TEST_F(SimulatorTest, DrResponseCarriesTheFilledReturnPath) {
  auto r = Dr(mad::method::kGet, mad::attr::kNodeInfo, 0, {1, 1, 1, 3});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->hop_count, 4);
  EXPECT_EQ(r->hop_pointer, 0);
  // Ingress ports at s0, s1, s2, h1.
  EXPECT_EQ(r->return_path[1], 3);
  EXPECT_EQ(r->return_path[2], 2);
  EXPECT_EQ(r->return_path[3], 2);
  EXPECT_EQ(r->return_path[4], 1);
}

TEST_F(SimulatorTest, DrThroughAnUncabledPortTimesOutAfterRetries) {
  auto r = Dr(mad::method::kGet, mad::attr::kNodeInfo, 0, {1, 4});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kTimeout);
  EXPECT_EQ(sm->counters().timeouts, 1u);
  EXPECT_EQ(sm->counters().retries, 2u);
  EXPECT_EQ(sm->counters().sent, 3u);
  EXPECT_EQ(sim->counters().drops(DropReason::kLinkDown), 3u);
}

TEST_F(SimulatorTest, DrPathThroughAHostIsDropped) {
  auto r = Dr(mad::method::kGet, mad::attr::kNodeInfo, 0, {1, 1, 3, 1});
  EXPECT_EQ(r.status().code(), StatusCode::kTimeout);
  EXPECT_GT(sim->counters().drops(DropReason::kNotSwitch), 0u);
}

TEST_F(SimulatorTest, LftSetThenGetReturnsTheBlock) {
  mad::LinearForwardingTable t;
  for (size_t i = 0; i < t.port.size(); ++i) t.port[i] = static_cast<uint8_t>(i % 9);
  ASSERT_TRUE(SetDr(mad::attr::kLinearForwardingTable, 3, {1, 1}, t).ok());
  auto r = Dr(mad::method::kGet, mad::attr::kLinearForwardingTable, 3, {1, 1});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(mad::Decode<mad::LinearForwardingTable>(r->data)->port, t.port);
  EXPECT_EQ(sim->lft_entry(c.s[1], Lid{3 * 64 + 5}), 5);
  // An unset block reads all 255; a block past LinearFDBCap is an invalid field.
  auto u = Dr(mad::method::kGet, mad::attr::kLinearForwardingTable, 0, {1, 1});
  EXPECT_EQ(mad::Decode<mad::LinearForwardingTable>(u->data)->port[0], 255);
  auto bad = Dr(mad::method::kGet, mad::attr::kLinearForwardingTable, 49152 / 64, {1, 1});
  EXPECT_EQ(bad->status, mad::mad_status::kInvalidField);
}

TEST_F(SimulatorTest, LidRoutedSmpArrivesOnlyOnceTheLftsOnThePathAreProgrammed) {
  AssignLids();
  auto before = LidSmp(mad::method::kGet, mad::attr::kNodeInfo, 0, 5);
  EXPECT_EQ(before.status().code(), StatusCode::kTimeout);
  EXPECT_GT(sim->counters().drops(DropReason::kNoRoute), 0u);
  ProgramAllLfts();
  auto after = LidSmp(mad::method::kGet, mad::attr::kNodeInfo, 0, 5);
  ASSERT_TRUE(after.ok()) << after.status().ToString();
  EXPECT_EQ(mad::Decode<mad::NodeInfo>(after->data)->node_guid, 0x210u);
  // A wrong entry on s1 (LID 5 sent back towards s0) loops and is lost.
  Lft({1, 1}, {{1, 2}, {2, 2}, {3, 0}, {4, 1}, {5, 2}, {6, 3}});
  auto wrong = LidSmp(mad::method::kGet, mad::attr::kNodeInfo, 0, 5);
  EXPECT_EQ(wrong.status().code(), StatusCode::kTimeout);
  EXPECT_GT(sim->counters().drops(DropReason::kLoop), 0u);
}

TEST_F(SimulatorTest, IllegalPortStateTransitionIsRejectedAndChangesNothing) {
  auto g = Dr(mad::method::kGet, mad::attr::kPortInfo, 1, {1, 1});
  mad::PortInfo p = *mad::Decode<mad::PortInfo>(g->data);
  ASSERT_EQ(p.port_state, 2);
  p.port_state = 4;  // INIT -> ACTIVE skips ARMED
  p.lid = 77;
  std::array<uint8_t, 64> d{};
  mad::EncodeTo(p, d);
  auto r = Dr(mad::method::kSet, mad::attr::kPortInfo, 1, {1, 1}, &d);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->status, mad::mad_status::kInvalidField);
  const auto& now = sim->port_info(c.P(c.s[1], 1));
  EXPECT_EQ(now.port_state, 2);
  EXPECT_EQ(now.lid, 0);
}

TEST_F(SimulatorTest, PortGoesInitArmedActiveByLegalSets) {
  mad::PortInfo p = *mad::Decode<mad::PortInfo>(
      Dr(mad::method::kGet, mad::attr::kPortInfo, 1, {1, 1})->data);
  p.port_state = 3;
  ASSERT_TRUE(SetDr(mad::attr::kPortInfo, 1, {1, 1}, p).ok());
  EXPECT_EQ(sim->port_info(c.P(c.s[1], 1)).port_state, 3);
  p.port_state = 4;
  ASSERT_TRUE(SetDr(mad::attr::kPortInfo, 1, {1, 1}, p).ok());
  EXPECT_EQ(sim->port_info(c.P(c.s[1], 1)).port_state, 4);
  // A port without a link cannot be armed.
  p.port_state = 3;
  EXPECT_FALSE(SetDr(mad::attr::kPortInfo, 4, {1}, p).ok());
}

// An SM endpoint that records what arrives.
struct Probe {
  std::vector<mad::MadMessage> got;
};

TEST_F(SimulatorTest, Trap128ReachesTheBoundSmAfterLinkDownOnceSmLidIsSet) {
  SimOptions o;
  o.io = &io;
  o.trap_resend_interval = 5ms;
  o.trap_max_sends = 3;
  Make(o);
  std::vector<mad::MadMessage> traps;
  sm->SetUnsolicitedHandler([&](mad::MadMessage m) { traps.push_back(std::move(m)); });
  // No SM LID yet: a link change sends nothing.
  ASSERT_TRUE(sim->LinkDown(c.P(c.s[2], 3)).ok());
  ASSERT_TRUE(sim->LinkUp(c.P(c.s[2], 3)).ok());
  EXPECT_EQ(sim->counters().traps_sent, 0u);
  AssignLids();
  ProgramAllLfts();
  ASSERT_TRUE(sim->LinkDown(c.P(c.s[2], 3)).ok());
  RunUntil(io, [&] { return !traps.empty(); });
  ASSERT_FALSE(traps.empty());
  auto smp = *mad::Decode<mad::Smp>(traps[0].bytes);
  EXPECT_EQ(smp.method, mad::method::kTrap);
  EXPECT_EQ(smp.attr_id, mad::attr::kNotice);
  mad::Notice n;
  ASSERT_TRUE(mad::DecodeSmpNotice(smp.data, &n).ok());
  EXPECT_TRUE(mad::IsGenericTrap(n, 128));
  EXPECT_EQ(mad::Trap128Lid(n), 4);  // s2
  EXPECT_EQ(traps[0].addr.lid, Lid{4});
  EXPECT_EQ(sim->switch_info(c.s[2]).port_state_change, 1);
  // It repeats until repressed.
  RunUntil(io, [&] { return traps.size() >= 2; });
  EXPECT_GE(traps.size(), 2u);
  mad::Smp rep = smp;
  rep.method = mad::method::kTrapRepress;
  ASSERT_TRUE(sm->Post(mad::ToMessage(rep, Lid{4})).ok());
  EXPECT_EQ(sim->pending_traps(), 0u);
  // Writing 1 clears PortStateChange.
  mad::SwitchInfo si = sim->switch_info(c.s[2]);
  si.port_state_change = 1;
  ASSERT_TRUE(SetDr(mad::attr::kSwitchInfo, 0, {1, 1, 1}, si).ok());
  EXPECT_EQ(sim->switch_info(c.s[2]).port_state_change, 0);
}

TEST_F(SimulatorTest, TwoSmsAtDifferentPortsExchangeSmInfo) {
  SimTransport peer(io, *sim, c.P(c.h[1], 1));
  ASSERT_TRUE(peer.bind_status().ok());
  int asked = 0;
  peer.SetUnsolicitedHandler([&](mad::MadMessage m) {
    ++asked;
    auto req = *mad::Decode<mad::Smp>(m.bytes);
    mad::Smp resp = req;
    resp.method = mad::method::kGetResp;
    resp.direction = 1;
    mad::SmInfo info;
    info.guid = 0x221;
    info.priority = 7;
    info.sm_state = mad::SmState::kStandby;
    mad::EncodeTo(info, resp.data);
    mad::MadMessage out = mad::ToMessage(resp, m.addr.lid);
    ASSERT_TRUE(peer.Post(std::move(out)).ok());
  });
  auto r = Dr(mad::method::kGet, mad::attr::kSmInfo, 0, {1, 1, 1, 3});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(asked, 1);
  auto info = *mad::Decode<mad::SmInfo>(r->data);
  EXPECT_EQ(info.guid, 0x221u);
  EXPECT_EQ(info.priority, 7);
  EXPECT_EQ(info.sm_state, mad::SmState::kStandby);
  // A port with no SM answers SMInfo with "attribute unsupported".
  auto none = Dr(mad::method::kGet, mad::attr::kSmInfo, 0, {1, 1, 3});
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(none->status, mad::mad_status::kMethodAttrUnsupported);
}

TEST_F(SimulatorTest, FullLossOnOneSwitchTimesOutOnlyWhatCrossesIt) {
  ASSERT_TRUE(sim->SetNodeDropRate(c.s[1], 1.0).ok());
  EXPECT_TRUE(Dr(mad::method::kGet, mad::attr::kNodeInfo, 0, {1}).ok());
  EXPECT_TRUE(Dr(mad::method::kGet, mad::attr::kNodeInfo, 0, {1, 3}).ok());
  EXPECT_EQ(Dr(mad::method::kGet, mad::attr::kNodeInfo, 0, {1, 1}).status().code(),
            StatusCode::kTimeout);
  EXPECT_EQ(Dr(mad::method::kGet, mad::attr::kNodeInfo, 0, {1, 1, 1}).status().code(),
            StatusCode::kTimeout);
  EXPECT_GT(sim->counters().drops(DropReason::kNodeDrop), 0u);
}

std::vector<bool> DropPattern(uint64_t seed) {
  Chain c;
  boost::asio::io_context io;
  SimOptions o;
  o.seed = seed;
  Simulator sim(c.f, o);
  sim.SetDropRate(0.5);
  SimTransport t(io, sim, c.f.port_id(c.h[0], PortNum{1}));
  std::vector<std::optional<bool>> ok(64);
  std::vector<uint8_t> path = {1, 1};
  for (size_t i = 0; i < ok.size(); ++i) {
    t.Send(mad::ToMessage(mad::MakeDrSmp(mad::method::kGet, mad::attr::kNodeInfo, 0, path)),
           mad::SendOptions{5ms, 0}, [&ok, i](Result<mad::MadMessage> r) { ok[i] = r.ok(); });
  }
  RunUntil(io, [&] { return t.outstanding() == 0; });
  std::vector<bool> out;
  for (auto& x : ok) out.push_back(x.value_or(false));
  return out;
}

TEST(SimulatorDeterminismTest, SameSeedGivesTheSameDrops) {
  auto a = DropPattern(42), b = DropPattern(42), c = DropPattern(43);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  size_t lost = static_cast<size_t>(std::count(a.begin(), a.end(), false));
  EXPECT_GT(lost, 20u);  // request and response each lost half the time: ~75%
  EXPECT_LT(lost, 64u);
}

TEST_F(SimulatorTest, SwitchRebootClearsLftsAndLids) {
  AssignLids();
  ProgramAllLfts();
  EXPECT_EQ(sim->lft_entry(c.s[1], Lid{5}), 1);
  ASSERT_TRUE(sim->RebootSwitch(c.s[1]).ok());
  EXPECT_EQ(sim->lft_entry(c.s[1], Lid{5}), 255);
  EXPECT_EQ(sim->port_info(c.P(c.s[1], 0)).lid, 0);
  EXPECT_EQ(sim->port_info(c.P(c.s[1], 1)).port_state, 2);
  // The neighbours saw the link bounce.
  EXPECT_EQ(sim->switch_info(c.s[0]).port_state_change, 1);
  EXPECT_EQ(LidSmp(mad::method::kGet, mad::attr::kNodeInfo, 0, 5).status().code(),
            StatusCode::kTimeout);
}

// Two cables of s1 swap their far ends: what a DR path out of s1's port 1 reaches changes,
// and every end of both cables retrained to INIT with s1 flagging PortStateChange.
TEST_F(SimulatorTest, SwappedCablesLeadWhereTheyArePluggedAndRetrain) {
  auto ni = [&](std::vector<uint8_t> path) {
    auto r = Dr(mad::method::kGet, mad::attr::kNodeInfo, 0, std::move(path));
    EXPECT_TRUE(r.ok());
    return r.ok() ? *mad::Decode<mad::NodeInfo>(r->data) : mad::NodeInfo{};
  };
  EXPECT_EQ(ni({1, 1, 1}).node_guid, 0x102u);  // s1 port 1 -> s2
  ASSERT_TRUE(sim->SwapCables(c.P(c.s[1], 1), c.P(c.s[1], 3)).ok());
  EXPECT_EQ(sim->port_info(c.P(c.s[1], 1)).port_state, 2);
  EXPECT_EQ(sim->port_info(c.P(c.s[2], 2)).port_state, 2);
  EXPECT_EQ(sim->switch_info(c.s[1]).port_state_change, 1);
  const mad::NodeInfo h2 = ni({1, 1, 1});  // s1 port 1 -> h2 now
  EXPECT_EQ(h2.node_guid, 0x220u);
  EXPECT_EQ(h2.local_port_num, 1);
  const mad::NodeInfo s2 = ni({1, 1, 3});  // s1 port 3 -> s2, arriving on its port 2
  EXPECT_EQ(s2.node_guid, 0x102u);
  EXPECT_EQ(s2.local_port_num, 2);
  EXPECT_EQ(sim->SwapCables(c.P(c.s[1], 1), c.P(c.h[2], 1)).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(sim->SwapCables(c.P(c.s[1], 5), c.P(c.s[1], 1)).code(),
            StatusCode::kFailedPrecondition);
}

TEST_F(SimulatorTest, RemovedNodeIsUnreachableUntilAddedBack) {
  ASSERT_TRUE(sim->RemoveNode(c.s[2]).ok());
  EXPECT_EQ(Dr(mad::method::kGet, mad::attr::kNodeInfo, 0, {1, 1, 1}).status().code(),
            StatusCode::kTimeout);
  EXPECT_EQ(sim->port_info(c.P(c.s[1], 1)).port_state, 1);
  ASSERT_TRUE(sim->AddNode(c.s[2]).ok());
  EXPECT_TRUE(Dr(mad::method::kGet, mad::attr::kNodeInfo, 0, {1, 1, 1, 3}).ok());
}

TEST_F(SimulatorTest, SetWithAWrongMKeyIsDropped) {
  sim->SetMKey(c.P(c.s[0], 0), 0xABCD, 1);
  mad::SwitchInfo si = sim->switch_info(c.s[0]);
  EXPECT_EQ(SetDr(mad::attr::kSwitchInfo, 0, {1}, si).code(), StatusCode::kTimeout);
  EXPECT_EQ(sim->counters().drops(DropReason::kMKey), 3u);
  // Get at protect level 1 passes but hides the key.
  auto g = Dr(mad::method::kGet, mad::attr::kPortInfo, 0, {1});
  ASSERT_TRUE(g.ok());
  EXPECT_EQ(mad::Decode<mad::PortInfo>(g->data)->m_key, 0u);
}

TEST_F(SimulatorTest, GarbageBytesAreCountedNotFatal) {
  mad::MadMessage m;
  m.bytes.assign(100, 0xFF);
  EXPECT_FALSE(sm->Post(m).ok());
  m.bytes.assign(256, 0xFF);
  ASSERT_TRUE(sm->Post(m).ok());
  sim->Inject(c.P(c.h[0], 1), m);
  sim->Inject(999999, m);
  EXPECT_GE(sim->counters().dropped, 2u);
}

TEST_F(SimulatorTest, QueryLocalPortReadsTheAttachPort) {
  AssignLids();
  auto lp = sm->QueryLocalPort();
  ASSERT_TRUE(lp.ok());
  EXPECT_EQ(lp->lid, Lid{1});
  EXPECT_EQ(lp->sm_lid, Lid{1});
  EXPECT_EQ(lp->port_num, PortNum{1});
  EXPECT_EQ(lp->node_guid, Guid{0x200});
  EXPECT_EQ(lp->state, 2);
}

TEST_F(SimulatorTest, LatencyModelDelaysTheResponse) {
  sim->SetLatency(1ms, 0ns);
  auto start = std::chrono::steady_clock::now();
  auto r = Dr(mad::method::kGet, mad::attr::kNodeInfo, 0, {1, 1, 1});
  ASSERT_TRUE(r.ok());
  EXPECT_GE(std::chrono::steady_clock::now() - start, 6ms);  // 3 hops out, 3 back
}

// ---------------------------------------------------------------------------------------
// SMA tables: MFT, P_Key, SL-to-VL, VL arbitration, GUIDInfo.

// Get/Set of a table attribute by DR; returns the response SMP (its status included).
template <typename A>
Result<mad::Smp> SetTable(Fixture& f, uint16_t attr, uint32_t mod, std::vector<uint8_t> path,
                          const A& a) {
  std::array<uint8_t, 64> d{};
  mad::EncodeTo(a, d);
  return f.Dr(mad::method::kSet, attr, mod, std::move(path), &d);
}
template <typename A>
A DataOf(const mad::Smp& r) {
  return *mad::Decode<A>(r.data);
}

TEST_F(SimulatorTest, MftBlockSetThenGetReturnsItAndBadModifiersChangeNothing) {
  mad::MulticastForwardingTable t;
  for (size_t i = 0; i < t.port_mask.size(); ++i) t.port_mask[i] = static_cast<uint16_t>(0x10 + i);
  auto set = SetTable(*this, mad::attr::kMulticastForwardingTable, mad::MftAttrMod(0, 3), {1}, t);
  ASSERT_TRUE(set.ok());
  EXPECT_EQ(set->status, 0);
  auto get = Dr(mad::method::kGet, mad::attr::kMulticastForwardingTable, mad::MftAttrMod(0, 3), {1});
  ASSERT_TRUE(get.ok());
  EXPECT_EQ(DataOf<mad::MulticastForwardingTable>(*get).port_mask, t.port_mask);
  // Another block reads 0; an 8-port switch has one position; 1024 MLIDs are 32 blocks.
  EXPECT_EQ(DataOf<mad::MulticastForwardingTable>(
                *Dr(mad::method::kGet, mad::attr::kMulticastForwardingTable, 2, {1}))
                .port_mask[0], 0);
  mad::MulticastForwardingTable other;
  other.port_mask.fill(0xFFFF);
  EXPECT_EQ(SetTable(*this, mad::attr::kMulticastForwardingTable, mad::MftAttrMod(1, 3), {1}, other)
                ->status, mad::mad_status::kInvalidField);
  EXPECT_EQ(SetTable(*this, mad::attr::kMulticastForwardingTable, mad::MftAttrMod(0, 32), {1}, other)
                ->status, mad::mad_status::kInvalidField);
  get = Dr(mad::method::kGet, mad::attr::kMulticastForwardingTable, mad::MftAttrMod(0, 3), {1});
  EXPECT_EQ(DataOf<mad::MulticastForwardingTable>(*get).port_mask, t.port_mask);
  // A CA has no MFT.
  EXPECT_EQ(Dr(mad::method::kGet, mad::attr::kMulticastForwardingTable, 0, {})->status,
            mad::mad_status::kMethodAttrUnsupported);
}

TEST_F(SimulatorTest, CaPKeyTableStartsWithTheDefaultFullMemberAndHoldsWhatWasSet) {
  auto ni = DataOf<mad::NodeInfo>(*Dr(mad::method::kGet, mad::attr::kNodeInfo, 0, {}));
  EXPECT_EQ(ni.partition_cap, 64);  // ibsim's HCA PartitionCap
  auto b0 = DataOf<mad::PKeyTable>(*Dr(mad::method::kGet, mad::attr::kPKeyTable, 0, {}));
  EXPECT_EQ(b0.pkey[0], 0xFFFF);
  EXPECT_EQ(b0.pkey[1], 0);
  mad::PKeyTable t;
  t.pkey[0] = 0xFFFF;
  t.pkey[1] = 0x8001;
  t.pkey[31] = 0x0002;
  ASSERT_EQ(SetTable(*this, mad::attr::kPKeyTable, 1, {}, t)->status, 0);
  EXPECT_EQ(DataOf<mad::PKeyTable>(*Dr(mad::method::kGet, mad::attr::kPKeyTable, 1, {})).pkey,
            t.pkey);
  // 64 entries are blocks 0 and 1; block 2 is rejected and changes nothing.
  mad::PKeyTable junk;
  junk.pkey.fill(0x1234);
  EXPECT_EQ(SetTable(*this, mad::attr::kPKeyTable, 2, {}, junk)->status,
            mad::mad_status::kInvalidField);
  EXPECT_EQ(DataOf<mad::PKeyTable>(*Dr(mad::method::kGet, mad::attr::kPKeyTable, 0, {})).pkey,
            b0.pkey);
  EXPECT_EQ(DataOf<mad::PKeyTable>(*Dr(mad::method::kGet, mad::attr::kPKeyTable, 1, {})).pkey,
            t.pkey);
}

TEST_F(SimulatorTest, SwitchPKeyTableIsAddressedByPortInTheModifier) {
  mad::PKeyTable t;
  t.pkey.fill(0x8005);
  ASSERT_EQ(SetTable(*this, mad::attr::kPKeyTable, mad::PKeyAttrMod(1, 3), {1}, t)->status, 0);
  EXPECT_EQ(DataOf<mad::PKeyTable>(
                *Dr(mad::method::kGet, mad::attr::kPKeyTable, mad::PKeyAttrMod(1, 3), {1})).pkey,
            t.pkey);
  // Port 2's table is untouched; port 9 does not exist on an 8-port switch.
  EXPECT_EQ(DataOf<mad::PKeyTable>(
                *Dr(mad::method::kGet, mad::attr::kPKeyTable, mad::PKeyAttrMod(1, 2), {1})).pkey[0],
            0);
  EXPECT_EQ(SetTable(*this, mad::attr::kPKeyTable, mad::PKeyAttrMod(0, 9), {1}, t)->status,
            mad::mad_status::kInvalidField);
  // Port 0 has NodeInfo's PartitionCap (8): entries past it read 0 and block 1 is invalid.
  ASSERT_EQ(SetTable(*this, mad::attr::kPKeyTable, mad::PKeyAttrMod(0, 0), {1}, t)->status, 0);
  auto p0 = DataOf<mad::PKeyTable>(
      *Dr(mad::method::kGet, mad::attr::kPKeyTable, mad::PKeyAttrMod(0, 0), {1}));
  EXPECT_EQ(p0.pkey[7], 0x8005);
  EXPECT_EQ(p0.pkey[8], 0);
  EXPECT_EQ(Dr(mad::method::kGet, mad::attr::kPKeyTable, mad::PKeyAttrMod(1, 0), {1})->status,
            mad::mad_status::kInvalidField);
}

TEST_F(SimulatorTest, SlToVlSetOnOneSwitchPortPairLeavesTheOthersAtTheDefault) {
  mad::SlToVlTable t;
  for (size_t i = 0; i < 16; ++i) t.vl[i] = static_cast<uint8_t>(15 - i);
  ASSERT_EQ(SetTable(*this, mad::attr::kSlToVlTable, mad::SlToVlAttrMod(3, 1), {1}, t)->status, 0);
  EXPECT_EQ(DataOf<mad::SlToVlTable>(*Dr(mad::method::kGet, mad::attr::kSlToVlTable,
                                         mad::SlToVlAttrMod(3, 1), {1})).vl,
            t.vl);
  auto other = DataOf<mad::SlToVlTable>(
      *Dr(mad::method::kGet, mad::attr::kSlToVlTable, mad::SlToVlAttrMod(1, 3), {1}));
  EXPECT_EQ(other.vl[1], 1);
  mad::SlToVlTable zero;
  EXPECT_EQ(SetTable(*this, mad::attr::kSlToVlTable, mad::SlToVlAttrMod(9, 1), {1}, zero)->status,
            mad::mad_status::kInvalidField);
  EXPECT_EQ(SetTable(*this, mad::attr::kSlToVlTable, mad::SlToVlAttrMod(1, 9), {1}, zero)->status,
            mad::mad_status::kInvalidField);
  EXPECT_EQ(DataOf<mad::SlToVlTable>(*Dr(mad::method::kGet, mad::attr::kSlToVlTable,
                                         mad::SlToVlAttrMod(3, 1), {1})).vl,
            t.vl);
  // A CA ignores the modifier.
  ASSERT_EQ(SetTable(*this, mad::attr::kSlToVlTable, 0x0505, {}, t)->status, 0);
  EXPECT_EQ(DataOf<mad::SlToVlTable>(*Dr(mad::method::kGet, mad::attr::kSlToVlTable, 0, {})).vl,
            t.vl);
}

TEST_F(SimulatorTest, VlArbitrationBlocksFollowThePortsArbitrationCaps) {
  mad::VlArbitrationTable t;
  for (size_t i = 0; i < 32; ++i) {
    t.vl[i] = static_cast<uint8_t>(i % 8);
    t.weight[i] = static_cast<uint8_t>(i + 1);
  }
  auto mod = mad::VlArbAttrMod(mad::vlarb_block::kHighLower, 2);
  ASSERT_EQ(SetTable(*this, mad::attr::kVlArbitrationTable, mod, {1}, t)->status, 0);
  auto got = DataOf<mad::VlArbitrationTable>(
      *Dr(mad::method::kGet, mad::attr::kVlArbitrationTable, mod, {1}));
  // VLArbHighCap is 8: the first 8 entries hold, the rest read 0.
  EXPECT_EQ(got.weight[7], 8);
  EXPECT_EQ(got.vl[5], 5);
  EXPECT_EQ(got.weight[8], 0);
  // Blocks 2 and 4 lie past a cap of 8; 0 and 5 are not blocks; port 9 does not exist.
  for (uint32_t bad : {mad::VlArbAttrMod(2, 2), mad::VlArbAttrMod(4, 2), mad::VlArbAttrMod(0, 2),
                       mad::VlArbAttrMod(5, 2), mad::VlArbAttrMod(1, 9)}) {
    EXPECT_EQ(SetTable(*this, mad::attr::kVlArbitrationTable, bad, {1}, mad::VlArbitrationTable{})
                  ->status, mad::mad_status::kInvalidField) << std::hex << bad;
  }
  got = DataOf<mad::VlArbitrationTable>(
      *Dr(mad::method::kGet, mad::attr::kVlArbitrationTable, mod, {1}));
  EXPECT_EQ(got.weight[7], 8);
}

TEST_F(SimulatorTest, GuidInfoEntryZeroIsThePortGuidAndReadOnly) {
  auto g = DataOf<mad::GuidInfo>(*Dr(mad::method::kGet, mad::attr::kGuidInfo, 0, {}));
  EXPECT_EQ(g.guid[0], 0x201u);
  mad::GuidInfo set;
  set.guid[0] = 0x999;
  set.guid[1] = 0xABC;
  auto r = SetTable(*this, mad::attr::kGuidInfo, 0, {}, set);
  ASSERT_EQ(r->status, 0);
  EXPECT_EQ(DataOf<mad::GuidInfo>(*r).guid[0], 0x201u);
  g = DataOf<mad::GuidInfo>(*Dr(mad::method::kGet, mad::attr::kGuidInfo, 0, {}));
  EXPECT_EQ(g.guid[0], 0x201u);
  EXPECT_EQ(g.guid[1], 0xABCu);
  // GUIDCap 8 is one block.
  EXPECT_EQ(SetTable(*this, mad::attr::kGuidInfo, 1, {}, set)->status,
            mad::mad_status::kInvalidField);
  EXPECT_EQ(DataOf<mad::GuidInfo>(*Dr(mad::method::kGet, mad::attr::kGuidInfo, 0, {})).guid[1],
            0xABCu);
}

TEST_F(SimulatorTest, UnknownSmpAttributeIsAnsweredUnsupported) {
  EXPECT_EQ(Dr(mad::method::kGet, mad::attr::kLedInfo, 0, {1})->status,
            mad::mad_status::kMethodAttrUnsupported);
}

TEST_F(SimulatorTest, SwitchRebootClearsMftAndPKeyTables) {
  mad::PKeyTable t;
  t.pkey.fill(0x8007);
  ASSERT_EQ(SetTable(*this, mad::attr::kPKeyTable, mad::PKeyAttrMod(0, 1), {1}, t)->status, 0);
  mad::MulticastForwardingTable m;
  m.port_mask.fill(6);
  ASSERT_EQ(SetTable(*this, mad::attr::kMulticastForwardingTable, 0, {1}, m)->status, 0);
  ASSERT_TRUE(sim->RebootSwitch(c.s[0]).ok());
  EXPECT_EQ(DataOf<mad::PKeyTable>(
                *Dr(mad::method::kGet, mad::attr::kPKeyTable, mad::PKeyAttrMod(0, 1), {1})).pkey[1],
            0);
  EXPECT_EQ(DataOf<mad::MulticastForwardingTable>(
                *Dr(mad::method::kGet, mad::attr::kMulticastForwardingTable, 0, {1})).port_mask[0],
            0);
}

// ---------------------------------------------------------------------------------------
// The PMA and traffic counters.

struct ActiveFabric : Fixture {
  void SetUp() override {
    Fixture::SetUp();
    AssignLids();
    ProgramAllLfts();
    ActivateAll();
  }
  // Every cabled port ARMED, then ACTIVE, by DR PortInfo Set (as an SM brings a fabric up).
  void ActivateAll() {
    struct { std::vector<uint8_t> path; uint32_t mod; } ports[] = {
        {{}, 1},        {{1}, 3},     {{1}, 1},     {{1, 1}, 2}, {{1, 1}, 1}, {{1, 1}, 3},
        {{1, 1, 1}, 2}, {{1, 1, 1}, 3}, {{1, 1, 1, 3}, 1}, {{1, 1, 3}, 1}};
    for (uint8_t state : {3, 4}) {
      for (auto& x : ports) {
        auto pi = Dr(mad::method::kGet, mad::attr::kPortInfo, x.mod, x.path);
        ASSERT_TRUE(pi.ok());
        mad::PortInfo p = *mad::Decode<mad::PortInfo>(pi->data);
        p.port_state = state;
        ASSERT_TRUE(SetDr(mad::attr::kPortInfo, x.mod, x.path, p).ok());
      }
    }
  }
  // A PerfMgt request LID-routed to `dlid`.
  template <typename A>
  mad::MadMessage Perf(uint8_t method, uint16_t attr, const A& a, uint16_t dlid) {
    mad::MadMessage m;
    m.bytes.assign(mad::kMadSize, 0);
    mad::MadHeader h;
    h.mgmt_class = static_cast<uint8_t>(mad::MgmtClass::kPerfMgt);
    h.method = method;
    h.attr_id = attr;
    mad::EncodeTo(h, m.bytes);
    mad::EncodeTo(a, std::span<uint8_t>(m.bytes).subspan(mad::kPerfDataOffset));
    m.addr.lid = Lid{dlid};
    return m;
  }
  // Sends and returns {status, decoded attribute}.
  template <typename A>
  Result<std::pair<uint16_t, A>> Pma(uint8_t method, const A& a, uint16_t dlid) {
    std::optional<Result<mad::MadMessage>> r;
    sm->Send(Perf(method, A::kAttrId, a, dlid), fast,
             [&](Result<mad::MadMessage> x) { r.emplace(std::move(x)); });
    RunUntil(io, [&] { return r.has_value(); });
    if (!r) return Internal("no completion");
    if (!r->ok()) return r->status();
    auto h = (*r)->header();
    A out{};
    EXPECT_TRUE(mad::DecodeFrom(std::span<const uint8_t>((*r)->bytes).subspan(mad::kPerfDataOffset),
                                &out).ok());
    return std::make_pair(h->status, out);
  }
};

TEST_F(ActiveFabric, PmaAnswersPlantedCountersOfTheSelectedSwitchPort) {
  mad::PortCounters plant;
  plant.symbol_error_counter = 5;
  plant.link_downed_counter = 2;
  plant.port_rcv_errors = 9;
  plant.port_xmit_data = 1000;
  ASSERT_TRUE(sim->SetPortCounters(c.P(c.s[2], 3), plant).ok());
  mad::PortCounters q;
  q.port_select = 3;
  auto r = Pma(mad::method::kGet, q, 4);  // s2 has LID 4
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->first, 0);
  EXPECT_EQ(r->second.port_select, 3);
  EXPECT_EQ(r->second.symbol_error_counter, 5);
  EXPECT_EQ(r->second.link_downed_counter, 2);
  EXPECT_EQ(r->second.port_rcv_errors, 9);
  EXPECT_EQ(r->second.port_xmit_data, 1000u);  // the PMA's own MADs do not cross s2 port 3
  EXPECT_GT(sim->counters().pma_handled, 0u);
}

TEST_F(ActiveFabric, PmaSetWithCounterSelectClearsOnlyTheSelectedCounters) {
  mad::PortCounters plant;
  plant.symbol_error_counter = 7;
  plant.port_rcv_errors = 9;
  plant.port_xmit_pkts = 40;
  ASSERT_TRUE(sim->SetPortCounters(c.P(c.s[2], 3), plant).ok());
  mad::PortCounters q;
  q.port_select = 3;
  q.counter_select = mad::pc_select::kSymbolError | mad::pc_select::kPortXmitPkts;
  auto r = Pma(mad::method::kSet, q, 4);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->first, 0);
  auto now = sim->port_counters(c.P(c.s[2], 3));
  EXPECT_EQ(now.symbol_error_counter, 0);
  EXPECT_EQ(now.port_xmit_pkts, 0u);
  EXPECT_EQ(now.port_rcv_errors, 9);
}

TEST_F(ActiveFabric, PmaRejectsAPortSelectPastTheLastPortAndUnknownAttributes) {
  mad::PortCounters q;
  q.port_select = 9;
  auto r = Pma(mad::method::kGet, q, 4);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->first, mad::mad_status::kInvalidField);
  mad::MadMessage m = Perf(mad::method::kGet, 0x0033, q, 4);
  std::optional<Result<mad::MadMessage>> got;
  sm->Send(m, fast, [&](Result<mad::MadMessage> x) { got.emplace(std::move(x)); });
  RunUntil(io, [&] { return got.has_value(); });
  ASSERT_TRUE(got && got->ok());
  EXPECT_EQ((*got)->header()->status, mad::mad_status::kMethodAttrUnsupported);
}

TEST_F(ActiveFabric, AllPortSelectSumsThePortsAndExtendedCountersAreSixtyFourBit) {
  mad::PortCounters a, b;
  a.port_rcv_errors = 3;
  b.port_rcv_errors = 4;
  ASSERT_TRUE(sim->SetPortCounters(c.P(c.s[2], 3), a).ok());
  ASSERT_TRUE(sim->SetPortCounters(c.P(c.s[2], 5), b).ok());
  mad::PortCounters q;
  q.port_select = 0xFF;
  auto r = Pma(mad::method::kGet, q, 4);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->second.port_rcv_errors, 7);
  // PortXmitData saturates at 32 bits; the extended counter keeps counting.
  mad::PortCounters full;
  full.port_xmit_data = 0xFFFFFFF0u;
  ASSERT_TRUE(sim->SetPortCounters(c.P(c.s[1], 1), full).ok());
  mad::PortCountersExtended xq;
  xq.port_select = 1;
  auto before = Pma(mad::method::kGet, xq, 3);  // s1; the request crosses s1 port... not 1
  ASSERT_TRUE(before.ok());
  ASSERT_TRUE(Pma(mad::method::kGet, q, 4).ok());  // to s2: crosses s1 port 1 out and back in
  EXPECT_EQ(sim->port_counters(c.P(c.s[1], 1)).port_xmit_data, 0xFFFFFFFFu);
  auto after = Pma(mad::method::kGet, xq, 3);
  ASSERT_TRUE(after.ok());
  EXPECT_EQ(after->first, 0);
  EXPECT_EQ(after->second.port_xmit_data - before->second.port_xmit_data, 72u);
  EXPECT_EQ(after->second.port_xmit_pkts - before->second.port_xmit_pkts, 1u);
}

TEST_F(SimulatorTest, ForwardedMadsAreCountedOnEveryPortTheyCross) {
  for (int i = 0; i < 5; ++i) {
    ASSERT_TRUE(Dr(mad::method::kGet, mad::attr::kNodeInfo, 0, {1, 1, 1, 3}).ok());
  }
  auto s2p3 = sim->port_counters(c.P(c.s[2], 3));
  EXPECT_EQ(s2p3.port_xmit_pkts, 5u);
  EXPECT_EQ(s2p3.port_rcv_pkts, 5u);
  EXPECT_EQ(s2p3.port_xmit_data, 5u * 72);
  auto h1 = sim->port_counters_extended(c.P(c.h[1], 1));
  EXPECT_EQ(h1.port_rcv_pkts, 5u);
  EXPECT_EQ(h1.port_unicast_xmit_pkts, 5u);
  // A link that goes down counts in LinkDownedCounter at both ends.
  ASSERT_TRUE(sim->LinkDown(c.P(c.s[2], 3)).ok());
  EXPECT_EQ(sim->port_counters(c.P(c.h[1], 1)).link_downed_counter, 1);
  EXPECT_EQ(sim->port_counters(c.P(c.s[2], 3)).link_downed_counter, 1);
}

TEST_F(SimulatorTest, PmaGetOverLinksThatAreNotActiveIsLost) {
  AssignLids();
  ProgramAllLfts();
  mad::MadMessage m;
  m.bytes.assign(mad::kMadSize, 0);
  mad::MadHeader h;
  h.mgmt_class = static_cast<uint8_t>(mad::MgmtClass::kPerfMgt);
  h.method = mad::method::kGet;
  h.attr_id = mad::attr::kPortCounters;
  mad::EncodeTo(h, m.bytes);
  m.addr.lid = Lid{4};
  std::optional<Result<mad::MadMessage>> got;
  sm->Send(m, fast, [&](Result<mad::MadMessage> x) { got.emplace(std::move(x)); });
  RunUntil(io, [&] { return got.has_value(); });
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(got->status().code(), StatusCode::kTimeout);
  EXPECT_GT(sim->counters().drops(DropReason::kPortState), 0u);
}

// ---------------------------------------------------------------------------------------
// RMPP between SimTransports.

// An SA (class 0x03) message of `total` bytes: 56 bytes of headers, then a payload whose
// byte i is (i * 7 + 3) mod 256.
mad::MadMessage SaMessage(uint8_t method, size_t total, uint16_t dlid, uint64_t tid = 0) {
  mad::MadMessage m;
  m.bytes.assign(total, 0);
  mad::MadHeader h;
  h.mgmt_class = static_cast<uint8_t>(mad::MgmtClass::kSubnAdm);
  h.class_version = 2;
  h.method = method;
  h.attr_id = 0x0011;
  h.tid = tid;
  mad::EncodeTo(h, m.bytes);
  for (size_t i = mad::kSaHeaderSize; i < total; ++i) {
    m.bytes[i] = static_cast<uint8_t>(((i - mad::kSaHeaderSize) * 7 + 3) % 256);
  }
  m.addr.lid = Lid{dlid};
  return m;
}

bool PayloadIsWhole(const std::vector<uint8_t>& b, size_t total) {
  if (b.size() != total) return false;
  for (size_t i = mad::kSaHeaderSize; i < total; ++i) {
    if (b[i] != static_cast<uint8_t>(((i - mad::kSaHeaderSize) * 7 + 3) % 256)) return false;
  }
  return true;
}

struct RmppFixture : ActiveFabric {
  std::unique_ptr<SimTransport> peer;  // at h1, LID 5
  std::vector<mad::MadMessage> got;
  void SetUp() override {
    ActiveFabric::SetUp();
    SimTransportOptions o;
    o.rmpp_post = {std::chrono::milliseconds(20), 10};
    peer = std::make_unique<SimTransport>(io, *sim, c.P(c.h[1], 1), o);
    ASSERT_TRUE(peer->bind_status().ok());
    peer->SetUnsolicitedHandler([this](mad::MadMessage m) { got.push_back(std::move(m)); });
  }
};

TEST_F(RmppFixture, TenThousandByteSaMessagePostedToAnotherPortArrivesWhole) {
  ASSERT_TRUE(sm->Post(SaMessage(mad::method::kSet, 10000, 5, 0x77)).ok());
  RunUntil(io, [&] { return !got.empty() && sm->rmpp_posts() == 0; });
  ASSERT_EQ(got.size(), 1u);
  EXPECT_TRUE(PayloadIsWhole(got[0].bytes, 10000));
  EXPECT_EQ(got[0].addr.lid.value(), 1);  // from h0
  EXPECT_EQ(peer->counters().rmpp_reassembled, 1u);
  EXPECT_EQ(sm->rmpp_posts(), 0u);  // every segment ACKed
  EXPECT_GT(sm->counters().sent, 45u);  // 10000 bytes in 200-byte segments
}

// An ABORT naming a transfer's TID, but from another host than the one the transfer goes
// to, neither ends nor drives it: the transfer reaches its destination whole.
TEST_F(RmppFixture, AnAbortFromAnotherHostDoesNotEndSomeoneElsesTransfer) {
  SimTransport forger(io, *sim, c.P(c.h[2], 1));
  ASSERT_TRUE(forger.bind_status().ok());
  const mad::MadMessage msg = SaMessage(mad::method::kSet, 10000, 5, 0x77);
  // What the real receiver would send to abort it: an ABORT answering its first segment.
  auto copy = mad::RmppSender::Create(msg.bytes, mad::kSaHeaderSize);
  ASSERT_TRUE(copy.ok());
  auto abort = mad::RmppReceiver(mad::kSaHeaderSize).Refuse(copy->NextSegments().front());
  ASSERT_TRUE(abort.reply.has_value());
  const uint64_t unmatched_before = sm->counters().unmatched;
  ASSERT_TRUE(sm->Post(msg).ok());
  mad::MadMessage forged;
  forged.bytes.assign(abort.reply->begin(), abort.reply->end());
  forged.addr.lid = Lid{1};  // the SM at h0
  ASSERT_TRUE(forger.Post(forged).ok());
  RunUntil(io, [&] { return !got.empty() && sm->rmpp_posts() == 0; });
  ASSERT_EQ(got.size(), 1u);
  EXPECT_TRUE(PayloadIsWhole(got[0].bytes, 10000));
  EXPECT_EQ(sm->counters().rmpp_aborted, 0u);
  EXPECT_EQ(sm->counters().unmatched, unmatched_before + 1);
}

TEST_F(RmppFixture, MultiSegmentResponseToASendArrivesWhole) {
  peer->SetUnsolicitedHandler([this](mad::MadMessage req) {
    auto h = req.header();
    ASSERT_TRUE(h.ok());
    mad::MadMessage resp = SaMessage(mad::method::kGetTableResp, 5000, req.addr.lid.value(), h->tid);
    EXPECT_TRUE(peer->Post(std::move(resp)).ok());
  });
  std::optional<Result<mad::MadMessage>> r;
  sm->Send(SaMessage(mad::method::kGetTable, mad::kMadSize, 5), fast,
           [&](Result<mad::MadMessage> x) { r.emplace(std::move(x)); });
  RunUntil(io, [&] { return r.has_value(); });
  ASSERT_TRUE(r.has_value());
  ASSERT_TRUE(r->ok()) << r->status().ToString();
  EXPECT_TRUE(PayloadIsWhole((*r)->bytes, 5000));
  EXPECT_EQ(sm->counters().rmpp_reassembled, 1u);
}

TEST_F(RmppFixture, MultiSegmentRequestIsSegmentedAndItsResponseMatched) {
  peer->SetUnsolicitedHandler([this](mad::MadMessage req) {
    got.push_back(req);
    auto h = req.header();
    mad::MadMessage resp = SaMessage(mad::method::kGetResp, mad::kMadSize, req.addr.lid.value(), h->tid);
    EXPECT_TRUE(peer->Post(std::move(resp)).ok());
  });
  std::optional<Result<mad::MadMessage>> r;
  sm->Send(SaMessage(mad::method::kSet, 3000, 5), fast,
           [&](Result<mad::MadMessage> x) { r.emplace(std::move(x)); });
  RunUntil(io, [&] { return r.has_value(); });
  ASSERT_TRUE(r.has_value() && r->ok());
  ASSERT_EQ(got.size(), 1u);
  EXPECT_TRUE(PayloadIsWhole(got[0].bytes, 3000));
}

TEST_F(RmppFixture, WithTwentyPercentLossTransfersFinishOrFailClearlyNeverHang) {
  peer->SetUnsolicitedHandler([this](mad::MadMessage req) {
    auto h = req.header();
    if (h->method != mad::method::kGetTable) {
      got.push_back(std::move(req));
      return;
    }
    (void)peer->Post(SaMessage(mad::method::kGetTableResp, 4000, req.addr.lid.value(), h->tid));
  });
  sim->SetDropRate(0.2);
  int ok = 0, failed = 0;
  for (int i = 0; i < 5; ++i) {
    std::optional<Result<mad::MadMessage>> r;
    // 200 ms: the timeout must outlast a loaded machine's scheduling, so that what fails is
    // the loss this test plants, not the CPU it shares (20 ms failed every Send under ASan).
    sm->Send(SaMessage(mad::method::kGetTable, mad::kMadSize, 5), {200ms, 8},
             [&](Result<mad::MadMessage> x) { r.emplace(std::move(x)); });
    RunUntil(io, [&] { return r.has_value(); });
    ASSERT_TRUE(r.has_value()) << "Send " << i << " never completed";
    if (r->ok()) {
      EXPECT_TRUE(PayloadIsWhole((*r)->bytes, 4000));
      ++ok;
    } else {
      EXPECT_EQ(r->status().code(), StatusCode::kTimeout) << r->status().ToString();
      ++failed;
    }
  }
  EXPECT_GT(ok, 0);
  // A Post either arrives whole or is aborted after its resends, counted.
  SimTransportOptions o;
  o.rmpp_post = {std::chrono::milliseconds(20), 10};
  sm.reset();
  sm = std::make_unique<SimTransport>(io, *sim, c.P(c.h[0], 1), o);
  ASSERT_TRUE(sm->Post(SaMessage(mad::method::kSet, 10000, 5, 0x99)).ok());
  RunUntil(io, [&] { return sm->rmpp_posts() == 0; });
  EXPECT_EQ(sm->rmpp_posts(), 0u);
  if (got.empty()) {
    EXPECT_EQ(sm->counters().rmpp_aborted, 1u);
  } else {
    EXPECT_TRUE(PayloadIsWhole(got.back().bytes, 10000));
  }
}

TEST_F(RmppFixture, OversizedMessageOfAClassWithoutRmppIsRejected) {
  mad::MadMessage m = SaMessage(mad::method::kGet, 600, 5);
  mad::MadHeader h = *m.header();
  h.mgmt_class = static_cast<uint8_t>(mad::MgmtClass::kPerfMgt);
  mad::EncodeTo(h, m.bytes);
  EXPECT_EQ(sm->Post(m).code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace ibsm::sim
