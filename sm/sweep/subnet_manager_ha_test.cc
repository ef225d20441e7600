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
#include <boost/asio/steady_timer.hpp>

#include "base/log.h"
#include "fabric/generators.h"
#include "sim/sim_transport.h"
#include "sim/simulator.h"
#include "ha/state_store.h"
#include "sm/record/control_answers.h"
#include "sm/sweep/subnet_manager.h"
#include "sm/testing/test_util.h"

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

// A standby whose master stops answering shows it as not answering (with when it was last
// seen) from the first missed poll on, in `ibsmctl ha`'s answer and in its state file, and
// after it took over: never as MASTER.
TEST(SubnetManagerHaTest, AMasterThatStopsAnsweringIsShownSoFromTheFirstMissedPoll) {
  auto f = FatTree2(4);
  ASSERT_TRUE(f.ok());
  boost::asio::io_context io;
  sim::Simulator sim(*f);
  auto cas = CaPorts(*f);
  sim::SimTransport ta(io, sim, cas[0]), tb(io, sim, cas.back());
  ASSERT_TRUE(ta.bind_status().ok() && tb.bind_status().ok());
  ASSERT_TRUE(sim.SetIsSm(cas[0], true).ok());
  ASSERT_TRUE(sim.SetIsSm(cas.back(), true).ok());
  char tmpl[] = "/tmp/ibsm-ha-peers-XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  SystemClock clock;
  auto store = ha::StateStore::Open(std::string(tmpl) + "/b.db", clock);
  ASSERT_TRUE(store.ok());
  SubnetManagerOptions oa = Daemon(), ob = Daemon();
  oa.sm_priority = 5;
  ob.sm_priority = 3;
  ob.sminfo_polling_timeout = std::chrono::milliseconds(150);
  ob.polling_retry_number = 3;
  SubnetManager a(io, ta, clock, nullptr, oa);
  SubnetManager b(io, tb, clock, store->get(), ob);
  const Guid a_guid = f->port(cas[0]).guid;
  auto peers = [&] {
    auto rows = (*store)->Peers();
    EXPECT_TRUE(rows.ok());
    return PeersJson(rows.ok() ? *rows : std::vector<ha::PeerRow>{},
                     PeersNotAnsweringJson(b.peer_liveness()));
  };
  nlohmann::json answering, first_miss, after_takeover;
  boost::asio::steady_timer tick(io);
  int phase = 0;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  std::function<void()> step = [&] {
    if (std::chrono::steady_clock::now() > deadline) {
      io.stop();
      return;
    }
    if (phase == 0 && b.state() == mad::SmState::kStandby && b.counters().polls_sent >= 2 &&
        b.counters().polls_missed == 0) {
      answering = peers();
      a.Stop();
      ta.Close();
      phase = 1;
    } else if (phase == 1 && b.counters().polls_missed >= 1) {
      first_miss = peers();
      phase = 2;
    } else if (phase == 2 && b.state() == mad::SmState::kMaster && b.counters().takeovers >= 1 &&
               b.last_sweep().subnet_up) {
      after_takeover = peers();
      phase = 3;
      b.Stop();
      tb.Close();
      io.stop();
      return;
    }
    tick.expires_after(std::chrono::milliseconds(phase == 1 ? 5 : 20));
    tick.async_wait([&](boost::system::error_code ec) {
      if (!ec) step();
    });
  };
  a.Start([&](const SweepStats& s) {
    if (s.subnet_up && phase == 0 && b.state() == mad::SmState::kNotActive) b.Start(nullptr);
  });
  step();
  io.run();
  std::filesystem::remove_all(tmpl);
  ASSERT_EQ(phase, 3) << "the standby took over";
  ASSERT_EQ(answering.size(), 1u) << answering.dump(2);
  EXPECT_EQ(answering[0]["guid"], GuidText(a_guid));
  EXPECT_EQ(answering[0]["state"], "MASTER");
  EXPECT_FALSE(answering[0].contains("not_answering_since_us"));
  EXPECT_GT(b.peer_liveness().at(a_guid).last_answer_us, answering[0]["last_seen_us"].get<int64_t>())
      << "the polls answered after the sweep that found the master";
  ASSERT_EQ(first_miss.size(), 1u);
  EXPECT_EQ(first_miss[0]["state"], "NOT ANSWERING") << first_miss.dump(2);
  EXPECT_EQ(first_miss[0]["last_state"], "MASTER");
  EXPECT_EQ(first_miss[0]["missed"], 1);
  EXPECT_GT(first_miss[0]["not_answering_since_us"].get<int64_t>(),
            first_miss[0]["last_seen_us"].get<int64_t>());
  ASSERT_EQ(after_takeover.size(), 1u);
  EXPECT_EQ(after_takeover[0]["state"], "NOT ANSWERING") << after_takeover.dump(2);
  EXPECT_EQ(after_takeover[0]["not_answering_since_us"], first_miss[0]["not_answering_since_us"]);
  EXPECT_EQ(after_takeover[0]["last_seen_us"], first_miss[0]["last_seen_us"]);
  // The same in the state file, for ibsmctl --state-db ha.
  auto kept = (*store)->GetValue(kPeersNotAnsweringKey);
  ASSERT_TRUE(kept.ok() && kept->has_value());
  EXPECT_TRUE(nlohmann::json::parse(**kept).contains(GuidText(a_guid))) << **kept;
}

}  // namespace
}  // namespace ibsm::sm
