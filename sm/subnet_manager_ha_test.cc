// The daemon's side of the SMInfo protocol on the in-process simulator: what another SM
// (a second transport bound at another host) gets back from a running master.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <string>

#include <boost/asio/io_context.hpp>

#include "base/log.h"
#include "fabric/generators.h"
#include "sim/sim_transport.h"
#include "sim/simulator.h"
#include "sm/subnet_manager.h"
#include "sm/test_util.h"

namespace ibsm::sm {
namespace {

using testutil::CaPorts;

struct SmInfoReply {
  bool answered = false;
  uint16_t status = 0xFFFF;
  mad::SmInfo info;
};

// A second "SM" at another host sending SMInfo requests to the master's LID.
class PeerSm {
 public:
  PeerSm(boost::asio::io_context& io, sim::Simulator& sim, PortId at, Guid guid)
      : transport_(io, sim, at), guid_(guid) {}

  // `payload_state`/`key`: what the peer claims in its own SMInfo.
  void Ask(const std::string& name, uint8_t method, uint32_t mod, mad::SmState payload_state,
           uint64_t key, Lid to, std::map<std::string, SmInfoReply>* out, std::function<void()> done,
           uint64_t m_key = 0) {
    mad::Smp smp = mad::MakeLidSmp(method, mad::attr::kSmInfo, mod, m_key);
    mad::SmInfo mine;
    mine.guid = guid_.value();
    mine.sm_key = key;
    mine.priority = 1;
    mine.sm_state = payload_state;
    mad::EncodeTo(mine, smp.data);
    mad::SendOptions so;
    so.timeout = std::chrono::milliseconds(50);
    so.retries = 2;
    transport_.Send(mad::ToMessage(smp, to), so, [=](Result<mad::MadMessage> r) {
      SmInfoReply& reply = (*out)[name];
      if (r.ok()) {
        mad::Smp resp;
        if (mad::DecodeFrom(r->bytes, &resp).ok()) {
          reply.answered = true;
          reply.status = resp.status;
          auto info = mad::Decode<mad::SmInfo>(resp.data);
          if (info.ok()) reply.info = *info;
        }
      }
      done();
    });
  }
  void Close() { transport_.Close(); }

 private:
  sim::SimTransport transport_;
  Guid guid_;
};

SubnetManagerOptions Daemon() {
  SubnetManagerOptions o;
  o.send.timeout = std::chrono::milliseconds(20);
  o.send.retries = 4;
  o.sweep_interval = std::chrono::seconds(0);
  o.sm_priority = 4;
  o.sm_key = 0x77;
  return o;
}

// Runs an SM at the first host until SUBNET UP, then `ask` (which calls `finish` when its
// answers are in), then a further `extra_sweeps` heavy sweeps, then stops.
void RunAndAsk(const Fabric& f, SubnetManagerOptions o,
               std::function<void(SubnetManager&, PeerSm&, std::function<void()>)> ask,
               std::function<void(SubnetManager&)> check, int extra_sweeps = 0) {
  boost::asio::io_context io;
  sim::Simulator sim(f);
  auto cas = CaPorts(f);
  sim::SimTransport t(io, sim, cas[0]);
  ASSERT_TRUE(t.bind_status().ok());
  PeerSm peer(io, sim, cas.back(), f.port(cas.back()).guid);
  SystemClock clock;
  SubnetManager sm(io, t, clock, nullptr, o);
  bool asked = false, answered = false;
  int sweeps_after = 0;
  auto stop = [&] {
    check(sm);
    sm.Stop();
    t.Close();
    peer.Close();
    io.stop();
  };
  sm.Start([&](const SweepStats& s) {
    if (answered && ++sweeps_after >= extra_sweeps) stop();
    if (!s.subnet_up || asked) return;
    asked = true;
    ask(sm, peer, [&] {
      answered = true;
      if (extra_sweeps == 0) stop();
    });
  });
  io.run();
  EXPECT_TRUE(answered);
}

TEST(SubnetManagerHaTest, SetsThatAreIllegalForAMasterGetStatus7AndChangeNothing) {
  auto f = FatTree2(4);
  ASSERT_TRUE(f.ok());
  std::map<std::string, SmInfoReply> replies;
  RunAndAsk(
      *f, Daemon(),
      [&](SubnetManager& sm, PeerSm& peer, std::function<void()> finish) {
        auto left = std::make_shared<int>(4);
        auto one = [left, finish] {
          if (--*left == 0) finish();
        };
        using mad::SmState;
        peer.Ask("discover", mad::method::kSet, mad::sminfo_mod::kDiscover, SmState::kMaster,
                 0x77, sm.sm_lid(), &replies, one);
        peer.Ask("standby", mad::method::kSet, mad::sminfo_mod::kStandby, SmState::kMaster,
                 0x77, sm.sm_lid(), &replies, one);
        // HANDOVER comes from a master only.
        peer.Ask("handover_from_standby", mad::method::kSet, mad::sminfo_mod::kHandover,
                 SmState::kStandby, 0x77, sm.sm_lid(), &replies, one);
        peer.Ask("bad_modifier", mad::method::kSet, 9, SmState::kMaster, 0x77, sm.sm_lid(),
                 &replies, one);
      },
      [&](SubnetManager& sm) {
        EXPECT_EQ(sm.state(), mad::SmState::kMaster);
        EXPECT_EQ(sm.counters().sminfo_sets_refused, 4u);
      });
  for (const char* name : {"discover", "standby", "handover_from_standby", "bad_modifier"}) {
    SCOPED_TRACE(name);
    ASSERT_TRUE(replies[name].answered);
    EXPECT_EQ(replies[name].status, 7);
    EXPECT_EQ(replies[name].info.sm_state, mad::SmState::kMaster);
    EXPECT_EQ(replies[name].info.priority, 4);
  }
}

TEST(SubnetManagerHaTest, HandoverToAMasterIsAcceptedAndForcesAHeavySweep) {
  auto f = FatTree2(4);
  ASSERT_TRUE(f.ok());
  std::map<std::string, SmInfoReply> replies;
  RunAndAsk(
      *f, Daemon(),
      [&](SubnetManager& sm, PeerSm& peer, std::function<void()> finish) {
        peer.Ask("handover", mad::method::kSet, mad::sminfo_mod::kHandover, mad::SmState::kMaster,
                 0x77, sm.sm_lid(), &replies, finish);
      },
      [&](SubnetManager& sm) {
        EXPECT_EQ(sm.state(), mad::SmState::kMaster);
        EXPECT_EQ(sm.counters().handovers_received, 1u);
        EXPECT_GE(sm.counters().heavy_sweeps, 2u);
        // NOTACTIVE -> DISCOVERING -> MASTER; a HANDOVER to a master changes no state.
        EXPECT_EQ(sm.counters().state_changes, 2u);
        EXPECT_EQ(sm.counters().takeovers, 0u);
        EXPECT_NE(HaCounterSummary(sm.counters())
                      .find("state changes 2, takeovers 0, handovers sent 0 received 1,"),
                  std::string::npos)
            << HaCounterSummary(sm.counters());
      },
      /*extra_sweeps=*/1);
  ASSERT_TRUE(replies["handover"].answered);
  EXPECT_EQ(replies["handover"].status, 0);
}

TEST(SubnetManagerHaTest, ASetFromAnSmWithAnotherKeyIsRefusedAndCounted) {
  auto f = FatTree2(4);
  ASSERT_TRUE(f.ok());
  std::map<std::string, SmInfoReply> replies;
  RunAndAsk(
      *f, Daemon(),
      [&](SubnetManager& sm, PeerSm& peer, std::function<void()> finish) {
        peer.Ask("handover", mad::method::kSet, mad::sminfo_mod::kHandover, mad::SmState::kMaster,
                 0x78, sm.sm_lid(), &replies, finish);
      },
      [&](SubnetManager& sm) {
        EXPECT_EQ(sm.counters().sm_key_mismatches, 1u);
        EXPECT_EQ(sm.counters().handovers_received, 0u);
      });
  EXPECT_EQ(replies["handover"].status, 7);
}

// Anyone can send one SMInfo Set with a wrong key: the log line it causes must not carry the
// SM's own key (log readers are not key holders). With an M_Key set, OpenSM's public default
// SA key is an error at start.
TEST(SubnetManagerHaTest, TheSmsOwnKeyNeverReachesTheLog) {
  auto f = FatTree2(4);
  ASSERT_TRUE(f.ok());
  const std::string log = (std::filesystem::temp_directory_path() /
                           ("ibsm-ha-key-" + std::to_string(getpid()) + ".log"))
                              .string();
  ASSERT_TRUE(ConfigureLogging(log, spdlog::level::info));
  SubnetManagerOptions o = Daemon();
  o.sm_key = 0x5ec4e75ec4e7ull;
  o.m_key = 0x42;  // sa_key stays OpenSM's default 1
  std::map<std::string, SmInfoReply> replies;
  RunAndAsk(
      *f, o,
      [&](SubnetManager& sm, PeerSm& peer, std::function<void()> finish) {
        peer.Ask("handover", mad::method::kSet, mad::sminfo_mod::kHandover, mad::SmState::kMaster,
                 0x78, sm.sm_lid(), &replies, finish);
      },
      [&](SubnetManager& sm) {
        EXPECT_EQ(sm.counters().sm_key_mismatches, 1u);
        EXPECT_EQ(sm.counters().issues_by_id.count("CONF-103"), 1u);
      });
  ConfigureLogging("", spdlog::level::info);
  std::ifstream in(log);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::filesystem::remove(log);
  EXPECT_NE(text.find("SM-HA-003"), std::string::npos) << text;
  EXPECT_NE(text.find("CONF-103"), std::string::npos) << text;
  EXPECT_EQ(text.find("5ec4e7"), std::string::npos) << text;
}

TEST(SubnetManagerHaTest, TheKeyIsShownOnlyToRequestersThatPassTheMKeyOrPresentTheKey) {
  auto f = FatTree2(4);
  ASSERT_TRUE(f.ok());
  SubnetManagerOptions o = Daemon();
  o.m_key = 0x1234;
  std::map<std::string, SmInfoReply> replies;
  RunAndAsk(
      *f, o,
      [&](SubnetManager& sm, PeerSm& peer, std::function<void()> finish) {
        auto left = std::make_shared<int>(3);
        auto one = [left, finish] {
          if (--*left == 0) finish();
        };
        using mad::SmState;
        peer.Ask("stranger", mad::method::kGet, 0, SmState::kNotActive, 0, sm.sm_lid(), &replies,
                 one);
        peer.Ask("with_m_key", mad::method::kGet, 0, SmState::kNotActive, 0, sm.sm_lid(),
                 &replies, one, /*m_key=*/0x1234);
        peer.Ask("with_sm_key", mad::method::kGet, 0, SmState::kNotActive, 0x77, sm.sm_lid(),
                 &replies, one);
      },
      [](SubnetManager&) {});
  EXPECT_EQ(replies["stranger"].info.sm_key, 0u);
  EXPECT_EQ(replies["stranger"].info.sm_state, mad::SmState::kMaster);
  EXPECT_EQ(replies["with_m_key"].info.sm_key, 0x77u);
  EXPECT_EQ(replies["with_sm_key"].info.sm_key, 0x77u);
}

}  // namespace
}  // namespace ibsm::sm
