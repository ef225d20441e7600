// Multicast end to end on the in-process simulator: a host joins and leaves through the
// SA (MCMemberRecord Set/Delete over the simulated fabric), and the MFTs the simulator's
// switches hold follow the group's tree; a port that disappears is pruned by the next
// heavy sweep.
#include <gtest/gtest.h>

#include <filesystem>
#include <optional>
#include <set>

#include <boost/asio/io_context.hpp>

#include "fabric/generators.h"
#include "mad/attr/mc_member_record.h"
#include "mad/attr/notice.h"
#include "sim/sim_transport.h"
#include "sim/simulator.h"
#include "ha/state_store.h"
#include "sm/record/multicast_state.h"
#include "sm/sa/sa_server.h"
#include "sm/sweep/subnet_manager.h"
#include "sm/testing/test_util.h"

namespace ibsm::sm {
namespace {

using mad::MadMessage;
using mad::McMemberRecord;
using mad::SaMad;
namespace comp = mad::mcr_comp;

const mad::Gid kGroup{0xff12123400000000ull, 0x0000000000004242ull};

struct SaReply {
  uint8_t method = 0;
  uint16_t status = 0;
  std::vector<McMemberRecord> records;
  std::vector<std::vector<uint8_t>> raw;
};

// The SM on the first host of a 2-level fat tree (k=4: 4 leaves of 2 hosts, 2 spines), a
// client on the last host.
class McastOnSimulator : public ::testing::Test {
 protected:
  explicit McastOnSimulator(ha::StateStore* store = nullptr)
      : fabric_(*FatTree2(4)), sim_(fabric_), cas_(CaPorts(fabric_)),
        sm_transport_(io_, sim_, cas_.front()), client_(io_, sim_, cas_.back()) {
    SubnetManagerOptions o;
    o.once = true;
    o.send.timeout = std::chrono::milliseconds(20);
    o.send.retries = 4;
    sm_ = std::make_unique<SubnetManager>(io_, sm_transport_, clock_, store, o);
    sm_->multicast().set_on_event(
        [this](uint16_t trap, const mad::Gid& g) { events_.emplace_back(trap, g); });
    sm_->Start([this](const SweepStats& s) {
      up_ = s.subnet_up;
      io_.stop();
    });
    io_.run();
  }

  static std::vector<PortId> CaPorts(const Fabric& f) {
    std::vector<PortId> out;
    for (NodeId n = 0; n < f.node_count(); ++n)
      if (f.node(n).kind == NodeKind::kCa) out.push_back(f.port_id(n, PortNum{1}));
    return out;
  }

  Guid GuidOf(PortId p) const { return fabric_.port(p).guid; }
  // The leaf switch a host port hangs off, and the leaf's port number toward it.
  NodeId LeafOf(PortId host) const { return fabric_.port(fabric_.port(host).peer).node; }
  uint8_t LeafPortOf(PortId host) const {
    return static_cast<uint8_t>(fabric_.port(fabric_.port(host).peer).num.value());
  }

  SaReply Ask(uint8_t method, uint16_t attr, uint64_t mask, std::span<const uint8_t> rec) {
    SaMad m;
    m.hdr.mgmt_class = static_cast<uint8_t>(mad::MgmtClass::kSubnAdm);
    m.hdr.class_version = mad::kSaClassVersion;
    m.hdr.method = method;
    m.hdr.attr_id = attr;
    m.comp_mask = mask;
    std::copy(rec.begin(), rec.end(), m.data.begin());
    MadMessage msg;
    msg.bytes.resize(mad::kMadSize);
    mad::EncodeSa(m, msg.bytes);
    msg.addr.lid = sm_->sm_lid();
    std::optional<Result<MadMessage>> got;
    client_.Send(std::move(msg), mad::SendOptions{std::chrono::milliseconds(500), 2},
                 [&](Result<MadMessage> r) { got = std::move(r); });
    // Run until the answer is in and every SMP the change caused (MFT Sets) is answered.
    io_.restart();
    for (int i = 0; i < 10000 && (!got || io_.poll() > 0); ++i) {
      if (!got) io_.run_one();
    }
    SaReply r;
    EXPECT_TRUE(got && got->ok());
    if (!got || !got->ok()) return r;
    std::vector<uint8_t> bytes = (*got)->bytes;
    if (bytes.size() < mad::kMadSize) bytes.resize(mad::kMadSize, 0);
    SaMad resp;
    EXPECT_TRUE(mad::DecodeSa(bytes, &resp).ok());
    r.method = resp.hdr.method;
    r.status = resp.hdr.status;
    size_t stride = size_t{resp.attr_offset} * 8;
    if (r.status == 0 && stride > 0) {
      size_t end = r.method == mad::method::kGetResp || r.method == mad::method::kDeleteResp
                       ? mad::kSaHeaderSize + stride
                       : (*got)->bytes.size();
      for (size_t at = mad::kSaHeaderSize; at + stride <= end; at += stride) {
        r.raw.emplace_back(bytes.begin() + at, bytes.begin() + at + stride);
        if (attr == mad::sa_attr::kMcMemberRecord)
          r.records.push_back(*mad::DecodeRecord<McMemberRecord>(r.raw.back()));
      }
    }
    return r;
  }

  SaReply Mc(uint8_t method, const McMemberRecord& rec, uint64_t mask) {
    std::array<uint8_t, 56> buf{};
    mad::EncodeRecord(rec, buf);
    return Ask(method, mad::sa_attr::kMcMemberRecord, mask, buf);
  }

  McMemberRecord JoinReq(PortId host, uint8_t js = mad::join_state::kFull) {
    McMemberRecord r;
    r.set_mgid(kGroup);
    r.set_port_gid(mad::Gid{testutil::kDefaultPrefix, GuidOf(host).value()});
    r.q_key = 0x1234;
    r.p_key = 0xffff;
    r.join_state = js;
    return r;
  }

  std::vector<uint8_t> Held(NodeId sw, uint16_t mlid) const {
    return sim_.mft_ports(sw, Lid{mlid});
  }
  // Every switch that forwards `mlid` anywhere.
  std::vector<NodeId> Forwarding(uint16_t mlid) const {
    std::vector<NodeId> out;
    for (NodeId n = 0; n < fabric_.node_count(); ++n)
      if (fabric_.node(n).is_switch() && !Held(n, mlid).empty()) out.push_back(n);
    return out;
  }

  boost::asio::io_context io_;
  SystemClock clock_;
  Fabric fabric_;
  sim::Simulator sim_;
  std::vector<PortId> cas_;
  sim::SimTransport sm_transport_;
  sim::SimTransport client_;
  std::unique_ptr<SubnetManager> sm_;
  bool up_ = false;
  std::vector<std::pair<uint16_t, mad::Gid>> events_;
};

TEST_F(McastOnSimulator, BroadcastGroupIsServedWithMlidC000) {
  ASSERT_TRUE(up_);
  McMemberRecord q;
  q.set_mgid(mad::Gid{0xff12401bffff0000ull, 0x00000000ffffffffull});
  SaReply r = Mc(mad::method::kGet, q, comp::kMgid);
  ASSERT_EQ(r.status, 0);
  ASSERT_EQ(r.records.size(), 1u);
  EXPECT_EQ(r.records[0].mlid, 0xC000);
  EXPECT_EQ(r.records[0].p_key, 0xffff);
  EXPECT_EQ(r.records[0].q_key, 0x0B1Bu);
}

TEST_F(McastOnSimulator, JoinProgramsTheTreeAndLeaveClearsIt) {
  ASSERT_TRUE(up_);
  PortId me = cas_.back(), far = cas_.front();
  ASSERT_NE(LeafOf(me), LeafOf(far));
  // Create and join from the client's own port.
  SaReply c = Mc(mad::method::kSet, JoinReq(me), comp::kCreate);
  ASSERT_EQ(c.status, 0);
  ASSERT_EQ(c.method, mad::method::kGetResp);
  ASSERT_EQ(c.records.size(), 1u);
  const uint16_t mlid = c.records[0].mlid;
  EXPECT_EQ(mlid, 0xC001);
  EXPECT_EQ(events_.back().first, mad::trap::kMcastGroupCreated);
  // One member: only its leaf forwards, to the host.
  EXPECT_EQ(Held(LeafOf(me), mlid), std::vector<uint8_t>{LeafPortOf(me)});
  EXPECT_EQ(Forwarding(mlid), std::vector<NodeId>{LeafOf(me)});

  // A proxy join of a host on another leaf: the tree now crosses one spine.
  SaReply j = Mc(mad::method::kSet, JoinReq(far), comp::kJoin);
  ASSERT_EQ(j.status, 0);
  EXPECT_EQ(j.records.at(0).proxy_join, 1);
  std::vector<NodeId> fwd = Forwarding(mlid);
  ASSERT_EQ(fwd.size(), 3u);  // two leaves and one spine
  for (PortId h : {me, far}) {
    std::vector<uint8_t> ports = Held(LeafOf(h), mlid);
    ASSERT_EQ(ports.size(), 2u);  // the host and the uplink to the root spine
    EXPECT_TRUE(std::count(ports.begin(), ports.end(), LeafPortOf(h)));
  }
  // The MFTRecords the SA serves say the same for the client's leaf.
  std::array<uint8_t, 72> mq{};
  mad::MftRecord want;
  want.lid = sim_.port_info(fabric_.port_id(LeafOf(me), PortNum{0})).lid;
  mad::EncodeRecord(want, mq);
  SaReply m = Ask(mad::method::kGetTable, mad::sa_attr::kMftRecord, mad::mftr_comp::kLid, mq);
  ASSERT_EQ(m.status, 0);
  ASSERT_FALSE(m.raw.empty());
  auto rec = mad::DecodeRecord<mad::MftRecord>(m.raw[0]);
  ASSERT_TRUE(rec.ok());
  EXPECT_EQ(rec->lid, want.lid);
  EXPECT_NE(rec->mft.port_mask[1] & (1u << LeafPortOf(me)), 0);

  // Leaves: the far host goes, then the client; the group is deleted and nothing forwards.
  SaReply l1 = Mc(mad::method::kDelete, JoinReq(far), comp::kJoin);
  ASSERT_EQ(l1.status, 0);
  EXPECT_EQ(l1.method, mad::method::kDeleteResp);
  EXPECT_EQ(Forwarding(mlid), std::vector<NodeId>{LeafOf(me)});
  SaReply l2 = Mc(mad::method::kDelete, JoinReq(me), comp::kJoin);
  ASSERT_EQ(l2.status, 0);
  EXPECT_TRUE(Forwarding(mlid).empty());
  EXPECT_EQ(events_.back().first, mad::trap::kMcastGroupDeleted);
  EXPECT_EQ(sm_->multicast().Find(kGroup), nullptr);
  // A second leave of the same port is refused and counted.
  SaReply l3 = Mc(mad::method::kDelete, JoinReq(me), comp::kJoin);
  EXPECT_EQ(l3.status, mad::sa_status::kReqInvalid);
  EXPECT_GE(sm_->sa().counters().by_error.at(mad::sa_status::kReqInvalid), 1u);
}

TEST_F(McastOnSimulator, BadJoinsGetSaStatusesAndProgramNothing) {
  ASSERT_TRUE(up_);
  PortId me = cas_.back();
  SaReply a = Mc(mad::method::kSet, JoinReq(me), comp::kJoin);  // create without Q_Key etc.
  EXPECT_EQ(a.status, mad::sa_status::kReqInsufficientComponents);
  McMemberRecord stranger = JoinReq(me);
  stranger.port_gid_guid = 0x0badbadbadbadbadull;
  SaReply b = Mc(mad::method::kSet, stranger, comp::kCreate);
  EXPECT_EQ(b.status, mad::sa_status::kReqInvalid);
  EXPECT_TRUE(Forwarding(0xC001).empty());
  EXPECT_EQ(sm_->multicast().counters().joins_rejected, 2u);
}

// A request whose source LID names no port of the snapshot (a port that set its own LID to
// an unused value) is a stranger: it may not create, join for, or end anyone's membership.
TEST_F(McastOnSimulator, ARequesterWhoseLidIsUnknownMayNotJoinLeaveOrCreate) {
  ASSERT_TRUE(up_);
  PortId me = cas_.back();
  ASSERT_EQ(Mc(mad::method::kSet, JoinReq(me), comp::kCreate).status, 0);
  // The same SA on the same snapshot, asked directly with a source LID nobody holds.
  mad::Transport& unused = client_;
  SaServer sa(unused, {}, clock_);
  sa.Publish(sm_->sa().snapshot());
  sa.AttachMulticast(&sm_->multicast());
  auto from_nowhere = [&](uint8_t method, const McMemberRecord& rec, uint64_t mask) {
    SaMad m;
    m.hdr.mgmt_class = static_cast<uint8_t>(mad::MgmtClass::kSubnAdm);
    m.hdr.class_version = mad::kSaClassVersion;
    m.hdr.method = method;
    m.hdr.attr_id = mad::sa_attr::kMcMemberRecord;
    m.comp_mask = mask;
    mad::EncodeRecord(rec, std::span<uint8_t>(m.data).first(56));
    MadMessage msg;
    msg.bytes.resize(mad::kMadSize);
    mad::EncodeSa(m, msg.bytes);
    msg.addr.lid = Lid{0xBEEF};
    auto out = sa.Answer(msg);
    EXPECT_TRUE(out);
    return out ? out->header()->status : uint16_t{0xFFFF};
  };
  EXPECT_EQ(from_nowhere(mad::method::kDelete, JoinReq(me), comp::kJoin),
            mad::sa_status::kReqInvalid);
  EXPECT_EQ(from_nowhere(mad::method::kSet, JoinReq(cas_.front()), comp::kJoin),
            mad::sa_status::kReqInvalid);
  McMemberRecord other = JoinReq(me);
  other.set_mgid(mad::Gid{0xff12123400000000ull, 0x77});
  EXPECT_EQ(from_nowhere(mad::method::kSet, other, comp::kCreate), mad::sa_status::kReqInvalid);
  ASSERT_NE(sm_->multicast().Find(kGroup), nullptr);
  EXPECT_EQ(sm_->multicast().Find(kGroup)->members.size(), 1u);
  EXPECT_EQ(sm_->multicast().groups().size(), 2u);  // the broadcast group and kGroup
  EXPECT_EQ(sm_->multicast().counters().rejected_by_id.at("SA-MC-021"), 3u);
}

// MFTRecords come from one plan per multicast generation: asking twice computes it once and
// answers the same bytes; a join (a new generation) computes it again.
TEST_F(McastOnSimulator, MftRecordsArePlannedOncePerMulticastGeneration) {
  ASSERT_TRUE(up_);
  ASSERT_EQ(Mc(mad::method::kSet, JoinReq(cas_.back()), comp::kCreate).status, 0);
  const uint64_t before = sm_->sa().counters().mft_plans_computed;
  SaReply a = Ask(mad::method::kGetTable, mad::sa_attr::kMftRecord, 0, {});
  SaReply b = Ask(mad::method::kGetTable, mad::sa_attr::kMftRecord, 0, {});
  ASSERT_EQ(a.status, 0);
  ASSERT_FALSE(a.raw.empty());
  EXPECT_EQ(a.raw, b.raw);
  EXPECT_EQ(sm_->sa().counters().mft_plans_computed, before + 1);
  ASSERT_EQ(Mc(mad::method::kSet, JoinReq(cas_[1]), comp::kJoin).status, 0);
  SaReply c = Ask(mad::method::kGetTable, mad::sa_attr::kMftRecord, 0, {});
  EXPECT_EQ(sm_->sa().counters().mft_plans_computed, before + 2);
  EXPECT_NE(c.raw, a.raw);  // the new member's leaf forwards the group now
}

// The SM with a state file in a fresh directory (removed afterwards).
struct StateDir {
  StateDir() {
    char tmpl[] = "/tmp/ibsm_mc_state_XXXXXX";
    EXPECT_NE(mkdtemp(tmpl), nullptr);
    dir = tmpl;
    path = dir + "/state.db";
    auto s = ha::StateStore::Open(path, clock);
    EXPECT_TRUE(s.ok()) << s.status().ToString();
    if (s.ok()) store = std::move(s).value();
  }
  ~StateDir() { std::filesystem::remove_all(dir); }
  SystemClock clock;
  std::string dir, path;
  std::unique_ptr<ha::StateStore> store;
};

class McastWithStateFile : public StateDir, public McastOnSimulator {
 protected:
  McastWithStateFile() : McastOnSimulator(store.get()) {}
};

// A join/leave storm costs a bounded number of transactions (the SM saves at most once per
// kStateFlushInterval, only the groups that changed), and what the file holds afterwards is
// exactly the groups the SM holds.
TEST_F(McastWithStateFile, AJoinAndLeaveStormCostsFewTransactionsAndTheFileEndsExact) {
  ASSERT_TRUE(up_);
  const PortId me = cas_.back();
  // The run's first save writes every group; the storm's saves are then row by row.
  ASSERT_EQ(Mc(mad::method::kSet, JoinReq(me), comp::kCreate).status, 0);
  sm_->FlushState();
  const uint64_t before = store->transactions();
  constexpr int kGroups = 40;
  int requests = 0;
  for (int i = 0; i < kGroups; ++i) {
    McMemberRecord r = JoinReq(me);
    r.set_mgid(mad::Gid{0xff12123400000000ull, 0x9000u + static_cast<uint64_t>(i)});
    ASSERT_EQ(Mc(mad::method::kSet, r, comp::kCreate).status, 0);
    McMemberRecord other = r;
    other.set_port_gid(mad::Gid{testutil::kDefaultPrefix, GuidOf(cas_[1]).value()});
    ASSERT_EQ(Mc(mad::method::kSet, other, comp::kJoin).status, 0);
    requests += 2;
    if (i % 2 == 0) {  // every other group ends: its creator leaves, then the other member
      ASSERT_EQ(Mc(mad::method::kDelete, r, comp::kJoin).status, 0);
      ASSERT_EQ(Mc(mad::method::kDelete, other, comp::kJoin).status, 0);
      requests += 2;
    }
  }
  const uint64_t during = store->transactions() - before;
  EXPECT_LT(during, static_cast<uint64_t>(requests) / 10) << during << " for " << requests;
  sm_->FlushState();
  EXPECT_LE(store->transactions() - before, during + 1);
  // Another reader of the file sees exactly the groups (and members) the SM holds.
  auto reader = ha::StateStore::OpenReadOnly(path);
  ASSERT_TRUE(reader.ok()) << reader.status().ToString();
  auto rows = (*reader)->LoadMulticastGroups();
  ASSERT_TRUE(rows.ok());
  auto key = [](const ha::McGroupRow& r) { return r.mgid; };
  std::map<std::array<uint8_t, 16>, ha::McGroupRow> in_file, held;
  for (const auto& r : *rows) in_file.emplace(key(r), r);
  for (const auto& r : ToRows(sm_->multicast().groups())) held.emplace(key(r), r);
  EXPECT_EQ(in_file.size(), 2u + kGroups / 2);  // the broadcast group, kGroup, the odd ones
  EXPECT_TRUE(in_file == held);
}

TEST_F(McastWithStateFile, AJoinIsInTheFileWhenTheSmStopsBeforeItsFlushTimer) {
  ASSERT_TRUE(up_);
  ASSERT_EQ(Mc(mad::method::kSet, JoinReq(cas_.back()), comp::kCreate).status, 0);
  sm_->Stop();
  auto reader = ha::StateStore::OpenReadOnly(path);
  ASSERT_TRUE(reader.ok());
  auto rows = (*reader)->LoadMulticastGroups();
  ASSERT_TRUE(rows.ok());
  std::set<std::array<uint8_t, 16>> mgids;
  for (const auto& r : *rows) mgids.insert(r.mgid);
  EXPECT_TRUE(mgids.count(mad::ToGidBytes(kGroup)));
}

TEST_F(McastOnSimulator, HeavySweepPrunesAMemberWhosePortWentAway) {
  ASSERT_TRUE(up_);
  PortId me = cas_.back(), far = cas_.front() + 0;
  // A member on a third leaf, whose link will fail.
  PortId gone = kNoPort;
  for (PortId h : cas_)
    if (LeafOf(h) != LeafOf(me) && LeafOf(h) != LeafOf(far)) gone = h;
  ASSERT_NE(gone, kNoPort);
  ASSERT_EQ(Mc(mad::method::kSet, JoinReq(me), comp::kCreate).status, 0);
  ASSERT_EQ(Mc(mad::method::kSet, JoinReq(gone), comp::kJoin).status, 0);
  ASSERT_FALSE(Held(LeafOf(gone), 0xC001).empty());
  ASSERT_TRUE(sim_.LinkDown(fabric_.port(gone).peer).ok());
  sm_->RequestHeavySweep("test: a host left");
  io_.restart();
  io_.run();
  EXPECT_TRUE(Held(LeafOf(gone), 0xC001).empty());
  EXPECT_EQ(Held(LeafOf(me), 0xC001), std::vector<uint8_t>{LeafPortOf(me)});
  ASSERT_NE(sm_->multicast().Find(kGroup), nullptr);
  EXPECT_EQ(sm_->multicast().Find(kGroup)->members.size(), 1u);
  EXPECT_EQ(sm_->multicast().counters().members_pruned, 1u);
}

}  // namespace
}  // namespace ibsm::sm
