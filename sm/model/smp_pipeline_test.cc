// SmpPipeline alone, on the fake transport: the window, and a group abandoned while its
// requests are queued and in flight.
#include "sm/model/smp_pipeline.h"

#include <gtest/gtest.h>

#include "mad/mad.h"
#include "mad/testing/fake_transport.h"

namespace ibsm::sm {
namespace {

// The answer a device gives to request `i` of `t`.
Result<mad::MadMessage> AnswerTo(const mad::FakeTransport& t, size_t i) {
  mad::Smp smp;
  EXPECT_TRUE(mad::DecodeFrom(t.sent.at(i).msg.bytes, &smp).ok());
  smp.method = mad::method::kGetResp;
  return mad::ToMessage(smp);
}

// Four reads of a switch whose path is cut, two in flight (window 3) and two queued, beside
// one other read: Abandon takes the queued two back at once (their callbacks see
// kUnavailable), the pipeline stops waiting for the two in flight (it is idle once the other
// read is answered, and their late answers run nothing), and the window they held is free.
TEST(SmpPipelineTest, AnAbandonedGroupIsNotWaitedForAndItsLateAnswersRunNothing) {
  mad::FakeTransport t;
  SmpPipeline pipeline(t, 3, mad::SendOptions{}, 0);
  int dead_called = 0, dropped = 0, other_called = 0;
  const int group = 0;
  pipeline.Get({1}, mad::attr::kNodeInfo, 0, [&](Result<mad::Smp>) { ++other_called; });
  for (int i = 0; i < 4; ++i) {
    pipeline.Get(
        {2, 3}, mad::attr::kPortInfo, static_cast<uint32_t>(i),
        [&](Result<mad::Smp> r) {
          ++dead_called;
          if (!r.ok() && r.status().code() == StatusCode::kUnavailable) ++dropped;
        },
        &group, /*abandonable=*/true);
  }
  ASSERT_EQ(t.sent.size(), 3u);  // the other read and two of the group
  bool idle_ran = false;
  pipeline.WhenIdle([&] { idle_ran = true; });
  EXPECT_EQ(pipeline.Abandon(&group), 2u);
  EXPECT_EQ(dropped, 2);  // the queued two, at once
  EXPECT_EQ(pipeline.counters().abandoned, 2u);
  EXPECT_FALSE(idle_ran);  // the other read is still out
  // A new request takes the window the abandoned ones held.
  pipeline.Get({4}, mad::attr::kNodeInfo, 0, [&](Result<mad::Smp>) { ++other_called; });
  EXPECT_EQ(t.sent.size(), 4u);
  t.Answer(0, AnswerTo(t, 0));
  t.Answer(3, AnswerTo(t, 3));
  EXPECT_EQ(other_called, 2);
  EXPECT_TRUE(idle_ran);
  EXPECT_TRUE(pipeline.idle());
  // The abandoned answers and timeouts come late and run nothing.
  t.Answer(1, AnswerTo(t, 1));
  t.Answer(2, Status(StatusCode::kTimeout, "no answer"));
  EXPECT_EQ(dead_called, 2);
  EXPECT_TRUE(pipeline.idle());
  EXPECT_EQ(pipeline.counters().failed, 0u);
  EXPECT_EQ(pipeline.counters().resent, 0u);
  // The same group, used again, is waited for as usual.
  int again = 0;
  pipeline.Get({2, 3}, mad::attr::kPortInfo, 0, [&](Result<mad::Smp> r) { again += r.ok(); },
               &group, /*abandonable=*/true);
  EXPECT_FALSE(pipeline.idle());
  t.Answer(4, AnswerTo(t, 4));
  EXPECT_EQ(again, 1);
  EXPECT_TRUE(pipeline.idle());
}

// Held, a pipeline sends nothing queued or fed; what is in flight completes; released, the
// window fills again from the queue and the feeder (the SL2VL and VLArb reads while a repair
// pushes its blocks).
TEST(SmpPipelineTest, HeldItSendsNothingNewUntilReleased) {
  mad::FakeTransport t;
  SmpPipeline pipeline(t, 2, mad::SendOptions{}, 0);
  int answered = 0;
  pipeline.Get({1}, mad::attr::kNodeInfo, 0, [&](Result<mad::Smp> r) { answered += r.ok(); });
  ASSERT_EQ(t.sent.size(), 1u);
  pipeline.set_held(true);
  EXPECT_TRUE(pipeline.held());
  pipeline.Get({2}, mad::attr::kNodeInfo, 0, [&](Result<mad::Smp> r) { answered += r.ok(); });
  int fed = 0;
  pipeline.Feed([&] {
    pipeline.Get({3}, mad::attr::kNodeInfo, static_cast<uint32_t>(fed),
                 [&](Result<mad::Smp> r) { answered += r.ok(); });
    return ++fed < 3;
  });
  EXPECT_EQ(t.sent.size(), 1u);  // nothing new while held
  EXPECT_EQ(fed, 0);
  t.Answer(0, AnswerTo(t, 0));  // the one in flight completes
  EXPECT_EQ(answered, 1);
  EXPECT_EQ(t.sent.size(), 1u);  // and its freed slot stays free
  EXPECT_FALSE(pipeline.idle());
  pipeline.set_held(false);
  EXPECT_EQ(t.sent.size(), 3u);  // the queued one, then the feeder, up to the window
  for (size_t i = 1; i < 5; ++i) {
    ASSERT_LT(i, t.sent.size());
    t.Answer(i, AnswerTo(t, i));
  }
  EXPECT_EQ(fed, 3);
  EXPECT_EQ(answered, 5);
  EXPECT_TRUE(pipeline.idle());
}

// A group queued without `abandonable` (discovery's, which only DropQueued takes back) is not
// tracked in flight: Abandon takes back what is queued and still waits for what is out.
TEST(SmpPipelineTest, AGroupNotQueuedAbandonableIsStillWaitedFor) {
  mad::FakeTransport t;
  SmpPipeline pipeline(t, 1, mad::SendOptions{}, 0);
  const int group = 0;
  int answered = 0, dropped = 0;
  for (int i = 0; i < 2; ++i) {
    pipeline.Get(
        {1}, mad::attr::kPortInfo, static_cast<uint32_t>(i),
        [&](Result<mad::Smp> r) {
          if (r.ok()) ++answered;
          if (!r.ok() && r.status().code() == StatusCode::kUnavailable) ++dropped;
        },
        &group);
  }
  ASSERT_EQ(t.sent.size(), 1u);
  EXPECT_EQ(pipeline.Abandon(&group), 0u);
  EXPECT_EQ(dropped, 1);  // the queued one
  EXPECT_FALSE(pipeline.idle());
  EXPECT_EQ(pipeline.counters().abandoned, 0u);
  t.Answer(0, AnswerTo(t, 0));
  EXPECT_EQ(answered, 1);
  EXPECT_TRUE(pipeline.idle());
}

}  // namespace
}  // namespace ibsm::sm
