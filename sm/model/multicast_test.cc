#include "sm/model/multicast.h"
#include "sm/testing/test_util.h"

#include <gtest/gtest.h>

#include <vector>

#include "mad/attr/notice.h"

namespace ibsm::sm {
namespace {

using mad::McMemberRecord;
namespace comp = mad::mcr_comp;

constexpr uint64_t kCreateMask = comp::kCreate;

McPortCaps Caps(uint64_t guid, uint8_t mtu = mad::mtu::k2048, uint8_t rate = mad::rate::k10) {
  return McPortCaps{Guid{guid}, mtu, rate, {}};
}

McMemberRecord Req(mad::Gid mgid, uint64_t port_guid, uint8_t join = mad::join_state::kFull) {
  McMemberRecord r;
  r.set_mgid(mgid);
  r.set_port_gid(mad::Gid{testutil::kDefaultPrefix, port_guid});
  r.q_key = 0x11;
  r.p_key = 0xffff;
  r.sl = 1;
  r.flow_label = 0;
  r.tclass = 0;
  r.join_state = join;
  return r;
}

const mad::Gid kGroupA{0xff12123400000000ull, 0x0000000000000101ull};

struct Events {
  std::vector<std::pair<uint16_t, mad::Gid>> seen;
  void Attach(MulticastManager& m) {
    m.set_on_event([this](uint16_t trap, const mad::Gid& g) { seen.emplace_back(trap, g); });
  }
};

TEST(MulticastManagerTest, IpoibBroadcastGroupOfTheDefaultPartitionExistsFromTheStart) {
  MulticastManager m;
  m.CreateDefaultGroups();
  m.CreateDefaultGroups();  // idempotent
  ASSERT_EQ(m.groups().size(), 1u);
  const McGroup* g = m.Find(mad::Gid{0xff12401bffff0000ull, 0x00000000ffffffffull});
  ASSERT_NE(g, nullptr);
  EXPECT_EQ(g->mlid, 0xC000);
  EXPECT_EQ(g->p_key, 0xffff);
  EXPECT_EQ(g->q_key, 0x0B1Bu);
  EXPECT_EQ(g->mtu, mad::mtu::k2048);
  EXPECT_EQ(g->rate, mad::rate::k10);
  EXPECT_EQ(g->scope, mad::mc_scope::kLinkLocal);
  EXPECT_TRUE(g->permanent);
}

TEST(MulticastManagerTest, CreatingJoinTakesTheNextMlidAndReportsTrap66) {
  MulticastManager m;
  Events ev;
  ev.Attach(m);
  m.CreateDefaultGroups();
  McAnswer a = m.Join(Req(kGroupA, 0x11), kCreateMask, Caps(0x11), Guid{0x11});
  ASSERT_TRUE(a.ok()) << a.why;
  EXPECT_EQ(a.record.mlid, 0xC001);
  EXPECT_EQ(a.record.mgid(), kGroupA);
  EXPECT_EQ(a.record.join_state, mad::join_state::kFull);
  EXPECT_EQ(a.record.mtu, mad::mtu::k2048);  // the port's link when no MTU is asked
  EXPECT_EQ(a.record.mtu_selector, mad::selector::kExactly);
  ASSERT_EQ(ev.seen.size(), 2u);
  EXPECT_EQ(ev.seen[1].first, mad::trap::kMcastGroupCreated);
  EXPECT_EQ(ev.seen[1].second, kGroupA);
  EXPECT_EQ(m.counters().groups_created, 2u);
}

TEST(MulticastManagerTest, JoinWithoutMgidPortGidOrJoinStateIsInsufficient) {
  MulticastManager m;
  McAnswer a = m.Join(Req(kGroupA, 0x11), kCreateMask & ~comp::kJoinState, Caps(0x11), Guid{0x11});
  EXPECT_EQ(a.status, mad::sa_status::kReqInsufficientComponents);
  EXPECT_EQ(m.counters().joins_rejected, 1u);
  EXPECT_EQ(m.counters().rejected_by_id.at("SA-MC-001"), 1u);
}

TEST(MulticastManagerTest, CreateWithoutQKeyIsInsufficientButJoiningAnExistingGroupIsNot) {
  MulticastManager m;
  McAnswer a = m.Join(Req(kGroupA, 0x11), comp::kJoin, Caps(0x11), Guid{0x11});
  EXPECT_EQ(a.status, mad::sa_status::kReqInsufficientComponents);
  EXPECT_TRUE(m.groups().empty());
  ASSERT_TRUE(m.Join(Req(kGroupA, 0x11), kCreateMask, Caps(0x11), Guid{0x11}).ok());
  McAnswer b =
      m.Join(Req(kGroupA, 0x12, mad::join_state::kNon), comp::kJoin, Caps(0x12), Guid{0x12});
  ASSERT_TRUE(b.ok()) << b.why;
  EXPECT_EQ(m.Find(kGroupA)->members.size(), 2u);
}

TEST(MulticastManagerTest, OnlyAFullMemberMayCreate) {
  MulticastManager m;
  McAnswer a =
      m.Join(Req(kGroupA, 0x11, mad::join_state::kNon), kCreateMask, Caps(0x11), Guid{0x11});
  EXPECT_EQ(a.status, mad::sa_status::kReqInvalid);
  EXPECT_TRUE(m.groups().empty());
}

TEST(MulticastManagerTest, ZeroMgidGetsAnSaAssignedMgidOnTheSubnetPrefix) {
  MulticastOptions o;
  o.subnet_prefix = 0xfe80000000001234ull;
  o.ipoib_broadcast = false;
  MulticastManager m(o);
  McAnswer a = m.Join(Req(mad::Gid{}, 0x11), kCreateMask, Caps(0x11), Guid{0x11});
  McAnswer b = m.Join(Req(mad::Gid{}, 0x11), kCreateMask, Caps(0x11), Guid{0x11});
  ASSERT_TRUE(a.ok() && b.ok());
  // ff12:a01b, then the prefix's first six bytes, a counter, zero.
  EXPECT_EQ(a.record.mgid().prefix, 0xff12a01bfe800000ull);
  EXPECT_EQ(a.record.mgid().guid >> 48, 0u);
  EXPECT_NE(a.record.mgid(), b.record.mgid());
  EXPECT_EQ(a.record.mlid, 0xC000);
  EXPECT_EQ(b.record.mlid, 0xC001);
  // A requested scope goes into the MGID.
  McMemberRecord r = Req(mad::Gid{}, 0x11);
  r.scope = mad::mc_scope::kSiteLocal;
  McAnswer c = m.Join(r, kCreateMask | comp::kScope, Caps(0x11), Guid{0x11});
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c.record.mgid().prefix >> 48, 0xff15u);
  EXPECT_EQ(c.record.scope, mad::mc_scope::kSiteLocal);
}

TEST(MulticastManagerTest, ClientMayNotCreateAnSaSignedLinkLocalOrNonMulticastMgid) {
  MulticastManager m;
  // ff12:a01b:... is what the SA itself assigns (OpenSM's validate_requested_mgid).
  EXPECT_EQ(m.Join(Req(mad::Gid{0xff12a01bfe800000ull, 1}, 0x11), kCreateMask, Caps(0x11),
                   Guid{0x11}).status,
            mad::sa_status::kReqInvalid);
  EXPECT_EQ(m.Join(Req(mad::Gid{0xfe80000000000000ull, 1}, 0x11), kCreateMask, Caps(0x11),
                   Guid{0x11}).status,
            mad::sa_status::kReqInvalid);
  EXPECT_EQ(m.counters().rejected_by_id.at("SA-MC-013"), 2u);
  EXPECT_TRUE(m.groups().empty());
  // The same signature with site-local scope is fine.
  EXPECT_TRUE(m.Join(Req(mad::Gid{0xff15a01bfe800000ull, 1}, 0x11), kCreateMask, Caps(0x11),
                     Guid{0x11}).ok());
}

TEST(MulticastManagerTest, CreateMtuAndRateSelectorsMustFitTheRequestersLink) {
  MulticastManager m;
  McMemberRecord r = Req(kGroupA, 0x11);
  r.mtu_selector = mad::selector::kExactly;
  r.mtu = mad::mtu::k4096;
  McAnswer a = m.Join(r, kCreateMask | comp::kMtu | comp::kMtuSelector,
                      Caps(0x11, mad::mtu::k2048), Guid{0x11});
  EXPECT_EQ(a.status, mad::sa_status::kReqInvalid);
  EXPECT_EQ(m.counters().rejected_by_id.at("SA-MC-015"), 1u);
  r.mtu_selector = mad::selector::kGreaterThan;
  r.mtu = mad::mtu::k1024;
  McAnswer b = m.Join(r, kCreateMask | comp::kMtu | comp::kMtuSelector,
                      Caps(0x11, mad::mtu::k2048), Guid{0x11});
  ASSERT_TRUE(b.ok()) << b.why;
  EXPECT_EQ(b.record.mtu, mad::mtu::k2048);
  McMemberRecord s = Req(mad::Gid{0xff12123400000000ull, 0x202}, 0x11);
  s.rate_selector = mad::selector::kGreaterThan;
  s.rate = mad::rate::k10;
  McAnswer c = m.Join(s, kCreateMask | comp::kRate | comp::kRateSelector,
                      Caps(0x11, mad::mtu::k2048, mad::rate::k10), Guid{0x11});
  EXPECT_EQ(c.status, mad::sa_status::kReqInvalid);
}

TEST(MulticastManagerTest, JoinMustAgreeWithTheGroupAndItsLinkMustCarryIt) {
  MulticastManager m;
  ASSERT_TRUE(
      m.Join(Req(kGroupA, 0x11), kCreateMask, Caps(0x11, mad::mtu::k4096), Guid{0x11}).ok());
  McMemberRecord wrong_qkey = Req(kGroupA, 0x12);
  wrong_qkey.q_key = 0x99;
  EXPECT_EQ(m.Join(wrong_qkey, comp::kJoin | comp::kQKey, Caps(0x12), Guid{0x12}).status,
            mad::sa_status::kReqInvalid);
  // The group took 4096 from its creator's link; a 2048 port cannot join.
  EXPECT_EQ(m.Join(Req(kGroupA, 0x13), comp::kJoin, Caps(0x13, mad::mtu::k2048), Guid{0x13}).status,
            mad::sa_status::kReqInvalid);
  EXPECT_EQ(m.counters().rejected_by_id.at("SA-MC-008"), 1u);
  EXPECT_EQ(m.Find(kGroupA)->members.size(), 1u);
}

TEST(MulticastManagerTest, LeaveClearsBitsAndTheLastFullMemberDeletesTheGroup) {
  MulticastManager m;
  Events ev;
  ev.Attach(m);
  ASSERT_TRUE(m.Join(Req(kGroupA, 0x11, mad::join_state::kFull | mad::join_state::kNon),
                     kCreateMask, Caps(0x11), Guid{0x11}).ok());
  ASSERT_TRUE(m.Join(Req(kGroupA, 0x12, mad::join_state::kSendOnlyNon), comp::kJoin, Caps(0x12),
                     Guid{0x12}).ok());
  McAnswer a = m.Leave(Req(kGroupA, 0x11, mad::join_state::kNon), comp::kJoin, Guid{0x11});
  ASSERT_TRUE(a.ok()) << a.why;
  EXPECT_EQ(a.record.join_state, mad::join_state::kFull);
  ASSERT_NE(m.Find(kGroupA), nullptr);
  McAnswer b = m.Leave(Req(kGroupA, 0x11, mad::join_state::kFull), comp::kJoin, Guid{0x11});
  ASSERT_TRUE(b.ok()) << b.why;
  // Only a send-only member is left: the group goes.
  EXPECT_EQ(m.Find(kGroupA), nullptr);
  ASSERT_EQ(ev.seen.size(), 2u);
  EXPECT_EQ(ev.seen[1].first, mad::trap::kMcastGroupDeleted);
  EXPECT_EQ(ev.seen[1].second, kGroupA);
  // Its MLID is free again.
  EXPECT_EQ(m.Join(Req(kGroupA, 0x11), kCreateMask, Caps(0x11), Guid{0x11}).record.mlid, 0xC000);
}

TEST(MulticastManagerTest, BadLeavesAreRefusedAndChangeNothing) {
  MulticastManager m;
  ASSERT_TRUE(m.Join(Req(kGroupA, 0x11), kCreateMask, Caps(0x11), Guid{0x11}).ok());
  EXPECT_EQ(m.Leave(Req(kGroupA, 0x99), comp::kJoin, Guid{0x99}).status,
            mad::sa_status::kReqInvalid);
  EXPECT_EQ(m.Leave(Req(kGroupA, 0x11, mad::join_state::kNon), comp::kJoin, Guid{0x11}).status,
            mad::sa_status::kReqInvalid);  // a bit it does not hold
  EXPECT_EQ(m.Leave(Req(mad::Gid{0xff12123400000000ull, 7}, 0x11), comp::kJoin, Guid{0x11}).status,
            mad::sa_status::kReqInvalid);  // no such group
  EXPECT_EQ(m.Leave(Req(kGroupA, 0x11), comp::kMgid, Guid{0x11}).status,
            mad::sa_status::kReqInsufficientComponents);
  // Another port may not end a membership that was not a proxy join.
  EXPECT_EQ(m.Leave(Req(kGroupA, 0x11), comp::kJoin, Guid{0x12}).status,
            mad::sa_status::kReqInvalid);
  EXPECT_EQ(m.counters().leaves_rejected, 5u);
  ASSERT_NE(m.Find(kGroupA), nullptr);
  EXPECT_EQ(m.Find(kGroupA)->members.at(Guid{0x11}).join_state, mad::join_state::kFull);
}

// o15-0.2.1 lets only the port itself, or a proxy for a ProxyJoin membership, change a
// membership; a requester the SA cannot name (Guid 0: its LID is not in the snapshot) is
// neither, so it is refused outright rather than taken for the port.
TEST(MulticastManagerTest, AnUnknownRequesterIsRefusedAsAStrangerNotTakenForTheOwner) {
  MulticastManager m;
  ASSERT_TRUE(m.Join(Req(kGroupA, 0x11), kCreateMask, Caps(0x11), Guid{0x11}).ok());
  const Guid unknown{0};
  McAnswer leave = m.Leave(Req(kGroupA, 0x11), comp::kJoin, unknown);
  EXPECT_EQ(leave.status, mad::sa_status::kReqInvalid);
  EXPECT_EQ(leave.id, "SA-MC-021");
  McAnswer change = m.Join(Req(kGroupA, 0x11, mad::join_state::kNon), comp::kJoin, Caps(0x11),
                           unknown);
  EXPECT_EQ(change.status, mad::sa_status::kReqInvalid);
  McAnswer add = m.Join(Req(kGroupA, 0x12), comp::kJoin, Caps(0x12), unknown);
  EXPECT_EQ(add.status, mad::sa_status::kReqInvalid);
  const mad::Gid other{0xff12123400000000ull, 0x202};
  McAnswer create = m.Join(Req(other, 0x12), kCreateMask, Caps(0x12), unknown);
  EXPECT_EQ(create.status, mad::sa_status::kReqInvalid);
  EXPECT_EQ(m.counters().rejected_by_id.at("SA-MC-021"), 4u);
  EXPECT_EQ(m.counters().joins_rejected, 3u);
  EXPECT_EQ(m.counters().leaves_rejected, 1u);
  ASSERT_EQ(m.groups().size(), 1u);
  ASSERT_EQ(m.Find(kGroupA)->members.size(), 1u);
  EXPECT_EQ(m.Find(kGroupA)->members.at(Guid{0x11}).join_state, mad::join_state::kFull);
}

TEST(MulticastManagerTest, BroadcastGroupOutlivesItsLastMember) {
  MulticastManager m;
  m.CreateDefaultGroups();
  mad::Gid bcast = IpoibBroadcastMgid(0xffff);
  McMemberRecord r = Req(bcast, 0x11);
  r.q_key = 0x0B1B;
  ASSERT_TRUE(m.Join(r, comp::kJoin | comp::kQKey, Caps(0x11), Guid{0x11}).ok());
  ASSERT_TRUE(m.Leave(r, comp::kJoin, Guid{0x11}).ok());
  ASSERT_NE(m.Find(bcast), nullptr);
  EXPECT_TRUE(m.Find(bcast)->members.empty());
  EXPECT_EQ(m.counters().groups_deleted, 0u);
}

TEST(MulticastManagerTest, PruneDropsMembersWhosePortsAreGone) {
  MulticastManager m;
  Events ev;
  ev.Attach(m);
  ASSERT_TRUE(m.Join(Req(kGroupA, 0x11), kCreateMask, Caps(0x11), Guid{0x11}).ok());
  ASSERT_TRUE(m.Join(Req(kGroupA, 0x12), comp::kJoin, Caps(0x12), Guid{0x12}).ok());
  uint64_t gen = m.generation();
  EXPECT_EQ(m.Prune([](Guid g) { return g != Guid{0x11}; }), 1u);
  EXPECT_GT(m.generation(), gen);
  ASSERT_NE(m.Find(kGroupA), nullptr);
  EXPECT_EQ(m.Prune([](Guid) { return false; }), 1u);
  EXPECT_EQ(m.Find(kGroupA), nullptr);
  EXPECT_EQ(m.counters().members_pruned, 2u);
  EXPECT_EQ(ev.seen.back().first, mad::trap::kMcastGroupDeleted);
}

TEST(MulticastManagerTest, NoFreeMlidIsNoResources) {
  MulticastOptions o;
  o.ipoib_broadcast = false;
  o.max_mlid = 0xC001;
  MulticastManager m(o);
  for (uint64_t i = 1; i <= 2; ++i)
    ASSERT_TRUE(m.Join(Req(mad::Gid{0xff12123400000000ull, i}, 0x11), kCreateMask, Caps(0x11),
                       Guid{0x11}).ok());
  McAnswer a = m.Join(Req(mad::Gid{0xff12123400000000ull, 3}, 0x11), kCreateMask, Caps(0x11),
                      Guid{0x11});
  EXPECT_EQ(a.status, mad::sa_status::kNoResources);
  EXPECT_EQ(m.counters().mlids_exhausted, 1u);
}

// One port cannot take every MLID: past its cap its creates are refused, while another port
// still creates, and a group it ends frees a place.
TEST(MulticastManagerTest, ARequesterOverItsGroupCapGetsNoResourcesWhileAnotherStillCreates) {
  MulticastOptions o;
  o.ipoib_broadcast = false;
  o.max_groups_per_requester = 3;
  MulticastManager m(o);
  auto group = [](uint64_t i) { return mad::Gid{0xff12123400000000ull, i}; };
  for (uint64_t i = 1; i <= 3; ++i)
    ASSERT_TRUE(m.Join(Req(group(i), 0x11), kCreateMask, Caps(0x11), Guid{0x11}).ok());
  McAnswer over = m.Join(Req(group(4), 0x11), kCreateMask, Caps(0x11), Guid{0x11});
  EXPECT_EQ(over.status, mad::sa_status::kNoResources);
  EXPECT_EQ(over.id, "SA-MC-022");
  EXPECT_EQ(m.counters().creates_over_requester_cap, 1u);
  EXPECT_EQ(m.counters().rejected_by_id.at("SA-MC-022"), 1u);
  EXPECT_EQ(m.Find(group(4)), nullptr);
  // Joining an existing group is not creating one.
  EXPECT_TRUE(m.Join(Req(group(1), 0x11, mad::join_state::kNon), comp::kJoin, Caps(0x11),
                     Guid{0x11}).ok());
  EXPECT_TRUE(m.Join(Req(group(4), 0x12), kCreateMask, Caps(0x12), Guid{0x12}).ok());
  ASSERT_TRUE(m.Leave(Req(group(2), 0x11), comp::kJoin, Guid{0x11}).ok());
  EXPECT_TRUE(m.Join(Req(group(5), 0x11), kCreateMask, Caps(0x11), Guid{0x11}).ok());
}

TEST(MulticastManagerTest, UntrustedQueriesSeeGroupsTrustedOnesSeeMembers) {
  MulticastManager m;
  m.CreateDefaultGroups();
  ASSERT_TRUE(m.Join(Req(kGroupA, 0x11), kCreateMask, Caps(0x11), Guid{0x11}).ok());
  ASSERT_TRUE(m.Join(Req(kGroupA, 0x12, mad::join_state::kNon), comp::kJoin, Caps(0x12),
                     Guid{0x12}).ok());
  McMemberRecord any;
  auto groups = m.Query(any, 0, false);
  ASSERT_EQ(groups.size(), 2u);
  for (const auto& r : groups) EXPECT_EQ(r.port_gid_guid, 0u);
  EXPECT_EQ(m.Query(any, 0, true).size(), 2u);  // the two members of group A
  McMemberRecord mine = Req(kGroupA, 0x12);
  auto one = m.Query(mine, comp::kMgid | comp::kPortGid, false);
  ASSERT_EQ(one.size(), 1u);
  EXPECT_EQ(one[0].join_state, mad::join_state::kNon);
  McMemberRecord by_mlid;
  by_mlid.mlid = 0xC000;
  auto b = m.Query(by_mlid, comp::kMlid, false);
  ASSERT_EQ(b.size(), 1u);
  EXPECT_EQ(b[0].mgid(), IpoibBroadcastMgid(0xffff));
}

TEST(MulticastManagerTest, RestoreKeepsMlidsAndSkipsDuplicates) {
  MulticastManager m;
  McGroup g;
  g.mgid = kGroupA;
  g.mlid = 0xC005;
  g.members[Guid{0x11}] =
      McMember{mad::Gid{testutil::kDefaultPrefix, 0x11}, mad::join_state::kFull, false};
  McGroup dup = g;
  dup.mgid = mad::Gid{0xff12123400000000ull, 9};  // same MLID
  EXPECT_EQ(m.Restore({g, dup}), 1u);
  ASSERT_NE(m.Find(kGroupA), nullptr);
  EXPECT_EQ(m.Find(kGroupA)->mlid, 0xC005);
  m.CreateDefaultGroups();
  EXPECT_EQ(m.Find(IpoibBroadcastMgid(0xffff))->mlid, 0xC000);
}

}  // namespace
}  // namespace ibsm::sm
