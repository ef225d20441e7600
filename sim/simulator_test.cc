#include "sim/simulator.h"

#include <optional>
#include <vector>

#include <boost/asio.hpp>
#include <gtest/gtest.h>

#include "mad/attr/linear_forwarding_table.h"
#include "mad/attr/node_info.h"
#include "mad/attr/notice.h"
#include "mad/attr/port_info.h"
#include "mad/attr/sm_info.h"
#include "mad/attr/switch_info.h"
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

}  // namespace
}  // namespace ibsm::sim
