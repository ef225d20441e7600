#include "mad/rmpp.h"

#include <random>

#include <gtest/gtest.h>

namespace ibsm::mad {
namespace {

// An SA GetTableResp message: headers (56 bytes) then `payload_size` bytes of a counting
// pattern.
std::vector<uint8_t> MakeSaMessage(size_t payload_size) {
  SaMad sa;
  sa.hdr.mgmt_class = static_cast<uint8_t>(MgmtClass::kSubnAdm);
  sa.hdr.class_version = 2;
  sa.hdr.method = method::kGetTableResp;
  sa.hdr.tid = 0x1234567890;
  sa.hdr.attr_id = 0x0011;
  sa.attr_offset = 8;
  sa.comp_mask = 0xABCD;
  std::vector<uint8_t> msg(kMadSize);
  EncodeSa(sa, msg);
  msg.resize(kSaHeaderSize);
  for (size_t i = 0; i < payload_size; ++i) msg.push_back(static_cast<uint8_t>(i * 7 + 3));
  return msg;
}

std::vector<uint8_t> PayloadOf(const std::vector<uint8_t>& msg) {
  return {msg.begin() + kSaHeaderSize, msg.end()};
}

// Runs a whole transfer with no loss: every segment to the receiver, every ACK to the sender.
struct Transfer {
  std::vector<MadBytes> segments_sent;
  std::vector<uint8_t> received;
  int acks = 0;
};

Transfer RunLossless(const std::vector<uint8_t>& msg) {
  Transfer t;
  auto sender = RmppSender::Create(msg, kSaHeaderSize);
  EXPECT_TRUE(sender.ok()) << sender.status().ToString();
  RmppReceiver receiver(kSaHeaderSize, /*window=*/4);
  for (int rounds = 0; rounds < 10000 && !sender->done(); ++rounds) {
    auto segs = sender->NextSegments();
    if (segs.empty()) break;
    for (const auto& s : segs) {
      t.segments_sent.push_back(s);
      auto step = receiver.Feed(s);
      EXPECT_TRUE(step.status.ok()) << step.status.ToString();
      if (step.reply) {
        ++t.acks;
        EXPECT_TRUE(sender->OnReply(*step.reply).ok());
      }
    }
  }
  EXPECT_TRUE(sender->done());
  EXPECT_TRUE(receiver.complete());
  if (receiver.complete()) t.received = receiver.TakeMessage();
  return t;
}

class RmppSplitTest : public ::testing::TestWithParam<size_t> {};

TEST_P(RmppSplitTest, SplitThenReassembleGivesBackThePayload) {
  const size_t n = GetParam();
  auto msg = MakeSaMessage(n);
  Transfer t = RunLossless(msg);
  size_t want_segments = n == 0 ? 1 : (n + kSaDataSize - 1) / kSaDataSize;
  EXPECT_EQ(t.segments_sent.size(), want_segments);
  ASSERT_EQ(t.received.size(), kSaHeaderSize + n);
  EXPECT_EQ(PayloadOf(t.received), PayloadOf(msg));
  // The SA header (attribute offset, component mask) survives reassembly.
  SaMad sa;
  std::vector<uint8_t> first_mad = t.received;
  first_mad.resize(std::max(first_mad.size(), kMadSize));  // short messages: pad to one MAD
  ASSERT_TRUE(DecodeSa(first_mad, &sa).ok());
  EXPECT_EQ(sa.hdr.tid, 0x1234567890u);
  EXPECT_EQ(sa.attr_offset, 8);
  EXPECT_EQ(sa.comp_mask, 0xABCDu);
}

INSTANTIATE_TEST_SUITE_P(Sizes, RmppSplitTest, ::testing::Values(0, 1, 200, 201, 10000));

TEST(RmppSenderTest, SegmentsCarryFlagsNumbersAndKernelPayloadLengths) {
  auto sender = RmppSender::Create(MakeSaMessage(201), kSaHeaderSize);
  ASSERT_TRUE(sender.ok());
  ASSERT_EQ(sender->segment_count(), 2u);
  auto h1 = DecodeRmppHeader(sender->Segment(1));
  auto h2 = DecodeRmppHeader(sender->Segment(2));
  ASSERT_TRUE(h1.ok() && h2.ok());
  EXPECT_EQ(h1->version, rmpp::kVersion);
  EXPECT_EQ(h1->type, rmpp::kTypeData);
  EXPECT_EQ(h1->flags, rmpp::kFlagActive | rmpp::kFlagFirst);
  EXPECT_EQ(h1->data1, 1u);
  EXPECT_EQ(h1->data2, 2u * 20 + 201);  // both SA class headers plus the payload
  EXPECT_EQ(h2->flags, rmpp::kFlagActive | rmpp::kFlagLast);
  EXPECT_EQ(h2->data1, 2u);
  EXPECT_EQ(h2->data2, 20u + 1);
}

TEST(RmppSenderTest, EmptyMessageIsOneSegmentThatIsFirstAndLast) {
  auto sender = RmppSender::Create(MakeSaMessage(0), kSaHeaderSize);
  ASSERT_TRUE(sender.ok());
  auto h = DecodeRmppHeader(sender->Segment(1));
  ASSERT_TRUE(h.ok());
  EXPECT_EQ(h->flags, rmpp::kFlagActive | rmpp::kFlagFirst | rmpp::kFlagLast);
  EXPECT_EQ(h->data2, 20u);
}

TEST(RmppSenderTest, StartsWithAWindowOfOneSegment) {
  auto sender = RmppSender::Create(MakeSaMessage(1000), kSaHeaderSize);
  ASSERT_TRUE(sender.ok());
  EXPECT_EQ(sender->NextSegments().size(), 1u);
  EXPECT_TRUE(sender->NextSegments().empty());
}

TEST(RmppSenderTest, RejectsMessagesShorterThanTheirHeaders) {
  std::vector<uint8_t> tiny(10);
  EXPECT_EQ(RmppSender::Create(tiny, kSaHeaderSize).status().code(), StatusCode::kInvalidArgument);
}

TEST(RmppTransferTest, LostSegmentIsRecoveredByResendOnTimeout) {
  auto msg = MakeSaMessage(1000);  // 5 segments
  auto sender = RmppSender::Create(msg, kSaHeaderSize);
  ASSERT_TRUE(sender.ok());
  RmppReceiver receiver(kSaHeaderSize, 8);
  bool dropped = false;
  int timeouts = 0;
  std::vector<MadBytes> out = sender->NextSegments();
  while (!sender->done() && timeouts < 5) {
    if (out.empty()) {
      ++timeouts;
      out = sender->OnTimeout();
      continue;
    }
    std::vector<MadBytes> next;
    for (const auto& s : out) {
      auto h = DecodeRmppHeader(s);
      if (!dropped && h->data1 == 3) {  // segment 3 lost once
        dropped = true;
        continue;
      }
      auto step = receiver.Feed(s);
      EXPECT_TRUE(step.status.ok());
      if (step.reply) {
        ASSERT_TRUE(sender->OnReply(*step.reply).ok());
        for (auto& m : sender->NextSegments()) next.push_back(m);
      }
    }
    out = std::move(next);
  }
  EXPECT_TRUE(dropped);
  EXPECT_EQ(timeouts, 1);
  EXPECT_GE(receiver.counters().gaps, 1u);  // 4 and 5 arrived before 3
  ASSERT_TRUE(receiver.complete());
  EXPECT_EQ(PayloadOf(receiver.TakeMessage()), PayloadOf(msg));
}

TEST(RmppReceiverTest, DuplicateSegmentIsIgnoredAndReacknowledged) {
  auto sender = RmppSender::Create(MakeSaMessage(300), kSaHeaderSize);
  ASSERT_TRUE(sender.ok());
  RmppReceiver receiver(kSaHeaderSize);
  auto s1 = sender->Segment(1);
  auto first = receiver.Feed(s1);
  ASSERT_TRUE(first.status.ok());
  auto dup = receiver.Feed(s1);
  EXPECT_TRUE(dup.status.ok());
  EXPECT_EQ(receiver.counters().duplicates, 1u);
  ASSERT_TRUE(dup.reply.has_value());
  auto ack = DecodeRmppHeader(*dup.reply);
  EXPECT_EQ(ack->type, rmpp::kTypeAck);
  EXPECT_EQ(ack->data1, 1u);
  ASSERT_TRUE(receiver.Feed(sender->Segment(2)).status.ok());
  ASSERT_TRUE(receiver.complete());
  EXPECT_EQ(receiver.TakeMessage().size(), kSaHeaderSize + 300);
}

TEST(RmppReceiverTest, AckOfAResponseTravelsAsARequest) {
  auto sender = RmppSender::Create(MakeSaMessage(10), kSaHeaderSize);
  RmppReceiver receiver(kSaHeaderSize);
  auto step = receiver.Feed(sender->Segment(1));
  ASSERT_TRUE(step.reply.has_value());
  auto hdr = Decode<MadHeader>(*step.reply);
  EXPECT_EQ(hdr->method, method::kGetTable);
  EXPECT_EQ(hdr->tid, 0x1234567890u);
}

TEST(RmppReceiverTest, SegmentWithoutFirstFlagAbortsWithStatus120) {
  auto sender = RmppSender::Create(MakeSaMessage(500), kSaHeaderSize);
  RmppReceiver receiver(kSaHeaderSize);
  MadBytes bad = sender->Segment(1);
  auto h = DecodeRmppHeader(bad);
  h->flags = rmpp::kFlagActive;  // First cleared
  EncodeRmppHeader(*h, bad);
  auto step = receiver.Feed(bad);
  EXPECT_FALSE(step.status.ok());
  EXPECT_TRUE(receiver.failed());
  EXPECT_EQ(receiver.counters().errors, 1u);
  ASSERT_TRUE(step.reply.has_value());
  auto reply = DecodeRmppHeader(*step.reply);
  EXPECT_EQ(reply->type, rmpp::kTypeAbort);
  EXPECT_EQ(reply->status, rmpp::kStatusInconsistentFirstAndSegment);
}

TEST(RmppReceiverTest, LastPayloadLengthLargerThanASegmentAborts) {
  auto sender = RmppSender::Create(MakeSaMessage(10), kSaHeaderSize);
  RmppReceiver receiver(kSaHeaderSize);
  MadBytes bad = sender->Segment(1);
  auto h = DecodeRmppHeader(bad);
  h->data2 = 5000;
  EncodeRmppHeader(*h, bad);
  auto step = receiver.Feed(bad);
  EXPECT_EQ(step.status.code(), StatusCode::kCorrupt);
  ASSERT_TRUE(step.reply.has_value());
  EXPECT_EQ(DecodeRmppHeader(*step.reply)->status, rmpp::kStatusInconsistentLastAndLength);
}

TEST(RmppReceiverTest, TruncatedSegmentIsCorruptWithoutReply) {
  RmppReceiver receiver(kSaHeaderSize);
  std::vector<uint8_t> shorty(30, 0xFF);
  auto step = receiver.Feed(shorty);
  EXPECT_EQ(step.status.code(), StatusCode::kCorrupt);
  EXPECT_FALSE(step.reply.has_value());
  EXPECT_EQ(receiver.counters().errors, 1u);
}

TEST(RmppReceiverTest, TransferLongerThanTheLimitIsAbortedAsResourcesExhausted) {
  auto sender = RmppSender::Create(MakeSaMessage(1000), kSaHeaderSize);
  RmppReceiver receiver(kSaHeaderSize, 8, /*max_segments=*/2);
  EXPECT_TRUE(receiver.Feed(sender->Segment(1)).status.ok());
  EXPECT_TRUE(receiver.Feed(sender->Segment(2)).status.ok());
  auto step = receiver.Feed(sender->Segment(3));
  EXPECT_EQ(step.status.code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(DecodeRmppHeader(*step.reply)->status, rmpp::kStatusResourcesExhausted);
}

TEST(RmppSenderTest, AbortFromReceiverEndsTheTransfer) {
  auto sender = RmppSender::Create(MakeSaMessage(1000), kSaHeaderSize);
  auto seg = sender->NextSegments();
  MadBytes abort = MakeRmppReply(seg[0], kSaHeaderSize, rmpp::kTypeAbort,
                                 rmpp::kStatusResourcesExhausted, 0, 0);
  EXPECT_FALSE(sender->OnReply(abort).ok());
  EXPECT_TRUE(sender->aborted());
  EXPECT_EQ(sender->abort_status(), rmpp::kStatusResourcesExhausted);
  EXPECT_TRUE(sender->NextSegments().empty());
  EXPECT_TRUE(sender->OnTimeout().empty());
}

TEST(RmppSenderTest, AckOfASegmentNeverSentAborts) {
  auto sender = RmppSender::Create(MakeSaMessage(1000), kSaHeaderSize);
  auto seg = sender->NextSegments();
  MadBytes ack = MakeRmppReply(seg[0], kSaHeaderSize, rmpp::kTypeAck, 0, 4, 10);
  std::optional<MadBytes> reply;
  EXPECT_FALSE(sender->OnReply(ack, &reply).ok());
  ASSERT_TRUE(reply.has_value());
  EXPECT_EQ(DecodeRmppHeader(*reply)->status, rmpp::kStatusSegmentNumberTooBig);
}

TEST(RmppFuzzTest, RandomBytesNeverCrashAndAreCountedAsErrors) {
  std::mt19937 rng(20240611);
  std::uniform_int_distribution<int> byte(0, 255);
  std::uniform_int_distribution<size_t> len(0, 300);
  uint64_t errors = 0, statuses = 0;
  for (int i = 0; i < 5000; ++i) {
    RmppReceiver receiver(kSaHeaderSize, 4, 64);
    for (int j = 0; j < 4; ++j) {
      std::vector<uint8_t> junk(len(rng));
      for (auto& b : junk) b = static_cast<uint8_t>(byte(rng));
      auto step = receiver.Feed(junk);
      if (!step.status.ok()) ++statuses;
      if (receiver.complete()) (void)receiver.TakeMessage();
    }
    errors += receiver.counters().errors;
    auto sender = RmppSender::Create(MakeSaMessage(700), kSaHeaderSize);
    (void)sender->NextSegments();
    std::vector<uint8_t> junk(len(rng));
    for (auto& b : junk) b = static_cast<uint8_t>(byte(rng));
    (void)sender->OnReply(junk);
    (void)sender->OnTimeout();
  }
  EXPECT_GT(errors, 0u);
  EXPECT_EQ(errors, statuses);  // every rejected segment produced both a Status and a count
}

}  // namespace
}  // namespace ibsm::mad
