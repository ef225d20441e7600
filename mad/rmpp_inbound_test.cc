#include "mad/rmpp_inbound.h"

#include <gtest/gtest.h>

namespace ibsm::mad {
namespace {

using Clock = RmppInboundSessions::Clock;
using namespace std::chrono_literals;

// An SA Set of `payload_size` bytes with TID `tid`, as a peer would send it by RMPP.
std::vector<uint8_t> SaRequest(uint64_t tid, size_t payload_size) {
  SaMad sa;
  sa.hdr.mgmt_class = static_cast<uint8_t>(MgmtClass::kSubnAdm);
  sa.hdr.class_version = 2;
  sa.hdr.method = method::kSet;
  sa.hdr.tid = tid;
  sa.hdr.attr_id = 0x0031;
  std::vector<uint8_t> msg(kMadSize);
  EncodeSa(sa, msg);
  msg.resize(kSaHeaderSize);
  for (size_t i = 0; i < payload_size; ++i) msg.push_back(static_cast<uint8_t>(i));
  return msg;
}

// The first DATA segment of a multi-segment transfer: what a forger sends, once per TID.
MadBytes FirstSegment(uint64_t tid) {
  auto sender = RmppSender::Create(SaRequest(tid, 4000), kSaHeaderSize);
  EXPECT_TRUE(sender.ok());
  auto segs = sender->NextSegments();
  EXPECT_FALSE(segs.empty());
  return segs.front();
}

RmppInboundKey Key(uint32_t tid, uint16_t lid, uint32_t qpn = 1) {
  return {static_cast<uint8_t>(MgmtClass::kSubnAdm), tid, lid, qpn};
}

// The answer is an RMPP ABORT with status 1 (ResourcesExhausted).
void ExpectResourcesAbort(const RmppInboundSessions::Outcome& o) {
  ASSERT_TRUE(o.step.reply.has_value());
  auto rh = DecodeRmppHeader(*o.step.reply);
  ASSERT_TRUE(rh.ok());
  EXPECT_EQ(rh->type, rmpp::kTypeAbort);
  EXPECT_EQ(rh->status, rmpp::kStatusResourcesExhausted);
}

TEST(RmppInboundSessionsTest, OneSourceForgingManyTidsHoldsAtMostItsShare) {
  RmppInboundLimits l;
  l.per_source = 4;
  RmppInboundSessions s(l);
  auto now = Clock::now();
  size_t refused = 0;
  for (uint32_t tid = 1; tid <= 1000; ++tid) {
    auto o = s.Feed(Key(tid, 7), kSaHeaderSize, FirstSegment(tid), now);
    if (o.refused == RmppRefusal::kNone) continue;
    ++refused;
    EXPECT_EQ(o.refused, RmppRefusal::kPerSource);
    ExpectResourcesAbort(o);
  }
  EXPECT_EQ(s.size(), 4u);
  EXPECT_EQ(s.from_source(7, 1), 4u);
  EXPECT_EQ(refused, 996u);
  EXPECT_EQ(s.counters().refused_per_source, 996u);
  // Another source still gets its sessions.
  auto o = s.Feed(Key(1, 8), kSaHeaderSize, FirstSegment(1), now);
  EXPECT_EQ(o.refused, RmppRefusal::kNone);
  EXPECT_EQ(s.size(), 5u);
}

TEST(RmppInboundSessionsTest, ManySourcesTogetherHoldAtMostTheTotal) {
  RmppInboundLimits l;
  l.total = 32;
  RmppInboundSessions s(l);
  auto now = Clock::now();
  for (uint16_t lid = 1; lid <= 500; ++lid)
    for (uint32_t tid = 1; tid <= 3; ++tid)
      (void)s.Feed(Key(tid, lid), kSaHeaderSize, FirstSegment(tid), now);
  EXPECT_EQ(s.size(), 32u);
  EXPECT_EQ(s.counters().refused_total, 1500u - 32u);
}

TEST(RmppInboundSessionsTest, TheSessionThatPassesTheByteCapEndsAndTheOthersKeepTheirs) {
  RmppInboundLimits l;
  l.total_bytes = 5 * kMadSize;  // what five first segments hold (headers and data)
  RmppInboundSessions s(l);
  auto now = Clock::now();
  for (uint32_t tid = 1; tid <= 5; ++tid)
    EXPECT_EQ(s.Feed(Key(tid, tid), kSaHeaderSize, FirstSegment(tid), now).refused,
              RmppRefusal::kNone);
  EXPECT_EQ(s.bytes(), l.total_bytes);
  auto o = s.Feed(Key(6, 6), kSaHeaderSize, FirstSegment(6), now);
  EXPECT_EQ(o.refused, RmppRefusal::kBytes);
  ExpectResourcesAbort(o);
  EXPECT_EQ(s.size(), 5u);
  EXPECT_EQ(s.bytes(), l.total_bytes);
  EXPECT_EQ(s.counters().refused_bytes, 1u);
}

TEST(RmppInboundSessionsTest, StalledAndEndlesslyDrippingSessionsAreFreed) {
  RmppInboundLimits l;
  l.idle = 10s;
  l.lifetime = 60s;
  RmppInboundSessions s(l);
  auto t0 = Clock::now();
  // A stalled session: one segment, then nothing.
  (void)s.Feed(Key(1, 1), kSaHeaderSize, FirstSegment(1), t0);
  // A dripping one: a duplicate of its first segment every 5 s keeps it from being idle.
  (void)s.Feed(Key(2, 2), kSaHeaderSize, FirstSegment(2), t0);
  EXPECT_EQ(s.Expire(t0 + 9s), 0u);
  EXPECT_EQ(s.size(), 2u);
  for (auto t = t0 + 5s; t < t0 + 60s; t += 5s) {
    auto again = FirstSegment(2);
    (void)s.Feed(Key(2, 2), kSaHeaderSize, again, t);
    (void)s.Expire(t);
  }
  EXPECT_EQ(s.size(), 1u);  // the stalled one went at 10 s
  EXPECT_EQ(s.Expire(t0 + 60s), 1u);
  EXPECT_EQ(s.size(), 0u);
  EXPECT_EQ(s.bytes(), 0u);
  EXPECT_EQ(s.counters().expired, 2u);
}

TEST(RmppInboundSessionsTest, AWholeTransferIsDeliveredOnceAndHoldsNoBytesAfterwards) {
  RmppInboundSessions s;
  auto now = Clock::now();
  const auto msg = SaRequest(0x42, 3000);
  auto sender = RmppSender::Create(msg, kSaHeaderSize);
  ASSERT_TRUE(sender.ok());
  int delivered = 0;
  for (int round = 0; round < 1000 && !sender->done(); ++round) {
    for (const auto& seg : sender->NextSegments()) {
      auto o = s.Feed(Key(0x42, 3), kSaHeaderSize, seg, now);
      ASSERT_EQ(o.refused, RmppRefusal::kNone);
      if (o.message) {
        ++delivered;
        EXPECT_EQ(std::vector<uint8_t>(o.message->begin() + kSaHeaderSize, o.message->end()),
                  std::vector<uint8_t>(msg.begin() + kSaHeaderSize, msg.end()));
      }
      if (o.step.reply) {
        ASSERT_TRUE(sender->OnReply(*o.step.reply).ok());
      }
    }
  }
  EXPECT_TRUE(sender->done());
  EXPECT_EQ(delivered, 1);
  EXPECT_EQ(s.bytes(), 0u);
  EXPECT_EQ(s.size(), 1u);  // kept until idle, to answer a repeated last segment
}

}  // namespace
}  // namespace ibsm::mad
