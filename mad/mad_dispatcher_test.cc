// MadDispatcher over a fake medium: matching by class and low TID bits or by the whole TID,
// retries and timeouts on the one deadline timer, the in-flight budget by class, a send the
// medium returns, Posted RMPP transfers keyed by destination, and Close.
#include "mad/mad_dispatcher.h"

#include <optional>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <gtest/gtest.h>

#include "mad/attr/node_info.h"
#include "mad/rmpp.h"

namespace ibsm::mad {
namespace {

using namespace std::chrono_literals;

// Records what the dispatcher writes; `refuse` makes every write fail.
class DispWire : public MadWire {
 public:
  Status WriteMad(MadMessage mad, std::chrono::milliseconds kernel_timeout) override {
    if (!refuse.ok()) return refuse;
    ++counters->sent;
    written.push_back(std::move(mad));
    kernel_timeouts.push_back(kernel_timeout);
    return Status::Ok();
  }
  TransportCounters* counters = nullptr;
  std::vector<MadMessage> written;
  std::vector<std::chrono::milliseconds> kernel_timeouts;
  Status refuse;
};

struct DispFixture : ::testing::Test {
  boost::asio::io_context io;
  DispWire wire;
  std::optional<MadDispatcher> d;

  void Make(const DispatcherOptions& o) {
    d.emplace(io, wire, o);
    wire.counters = &d->counters();
  }
  // Runs the io_context until `done` or a second passes.
  template <typename F>
  void RunUntil(F done) {
    auto end = std::chrono::steady_clock::now() + 1s;
    while (!done() && std::chrono::steady_clock::now() < end) {
      io.restart();
      io.run_one_for(10ms);
    }
  }
};

MadMessage DispSmp() { return ToMessage(MakeLidSmp(method::kGet, attr::kNodeInfo, 0), Lid{7}); }

MadMessage DispPerf() {
  MadMessage m;
  m.bytes.assign(kMadSize, 0);
  MadHeader h;
  h.base_version = 1;
  h.mgmt_class = static_cast<uint8_t>(MgmtClass::kPerfMgt);
  h.class_version = 1;
  h.method = method::kGet;
  EncodeTo(h, m.bytes);
  m.addr.lid = Lid{9};
  return m;
}

// The answer to `req` as a medium would hand it back, its TID's high 32 bits rewritten.
MadMessage DispAnswer(const MadMessage& req, uint64_t high_bits = 0) {
  MadMessage r = req;
  MadHeader h = *r.header();
  h.method = static_cast<uint8_t>(h.method | method::kResponseBit);
  h.tid |= high_bits << 32;
  EncodeTo(h, r.bytes);
  return r;
}

TEST_F(DispFixture, ResponsesMatchByClassAndLowTidBitsWhateverTheHighBitsSay) {
  Make({});
  std::optional<Result<MadMessage>> got;
  d->Send(DispSmp(), {100ms, 0}, [&](Result<MadMessage> r) { got.emplace(std::move(r)); });
  ASSERT_EQ(wire.written.size(), 1u);
  EXPECT_EQ(wire.written[0].header()->tid, 1u);
  d->OnInbound(DispAnswer(wire.written[0], 0xabcd));
  ASSERT_TRUE(got.has_value() && got->ok());
  EXPECT_EQ(d->counters().received, 1u);
  EXPECT_EQ(d->counters().unmatched, 0u);
  EXPECT_EQ(d->outstanding(), 0u);
}

TEST_F(DispFixture, AnIoContextRunToCompletionReturnsOnceTheLastAnswerIsIn) {
  Make({});
  d->Send(DispSmp(), {10s, 0}, [](Result<MadMessage>) {});
  d->OnInbound(DispAnswer(wire.written[0]));
  auto t0 = std::chrono::steady_clock::now();
  io.run();  // no deadline timer left waiting for the answered request
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 5s);
}

TEST_F(DispFixture, WithWholeTidMatchingOtherHighBitsAreUnmatched) {
  DispatcherOptions o;
  o.match_low_tid = false;
  o.first_tid = (uint64_t{3} << 32) + 1;
  Make(o);
  int calls = 0;
  d->Send(DispSmp(), {100ms, 0}, [&](Result<MadMessage>) { ++calls; });
  ASSERT_EQ(wire.written.size(), 1u);
  EXPECT_EQ(wire.written[0].header()->tid, (uint64_t{3} << 32) + 1);
  MadMessage other = DispAnswer(wire.written[0]);
  MadHeader h = *other.header();
  h.tid = (uint64_t{4} << 32) + 1;
  EncodeTo(h, other.bytes);
  d->OnInbound(other);
  EXPECT_EQ(d->counters().unmatched, 1u);
  d->OnInbound(DispAnswer(wire.written[0]));
  EXPECT_EQ(calls, 1);
}

TEST_F(DispFixture, EveryRetryIsCountedAndTheLastTimeoutEndsTheRequest) {
  DispatcherOptions o;
  o.kernel_timeouts = true;
  Make(o);
  std::optional<Result<MadMessage>> got;
  d->Send(DispSmp(), {5ms, 2}, [&](Result<MadMessage> r) { got.emplace(std::move(r)); });
  RunUntil([&] { return got.has_value(); });
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(got->status().code(), StatusCode::kTimeout);
  EXPECT_EQ(d->counters().sent, 3u);
  EXPECT_EQ(d->counters().retries, 2u);
  EXPECT_EQ(d->counters().timeouts, 1u);
  // The kernel is handed the request's timeout on every attempt.
  ASSERT_EQ(wire.kernel_timeouts.size(), 3u);
  EXPECT_EQ(wire.kernel_timeouts[2], 5ms);
}

TEST_F(DispFixture, AWriteTheMediumRefusesEndsTheRequestWithItsError) {
  Make({});
  wire.refuse = Unavailable("full");
  std::optional<Result<MadMessage>> got;
  d->Send(DispSmp(), {100ms, 3}, [&](Result<MadMessage> r) { got.emplace(std::move(r)); });
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(got->status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(d->outstanding(), 0u);
  EXPECT_EQ(d->counters().in_flight, 0u);
}

TEST_F(DispFixture, ASendTheMediumReturnsIsResentAtOnce) {
  Make({});
  d->Send(DispSmp(), {1s, 1}, [](Result<MadMessage>) {});
  ASSERT_EQ(wire.written.size(), 1u);
  d->OnInbound(wire.written[0], /*returned=*/true);
  EXPECT_EQ(wire.written.size(), 2u);
  EXPECT_EQ(d->counters().retries, 1u);
}

TEST_F(DispFixture, TheBudgetHoldsRequestsBackAndStartsSmpsBeforePerfMgt) {
  DispatcherOptions o;
  o.max_in_flight = 1;
  Make(o);
  std::vector<int> order;
  d->Send(DispSmp(), {1s, 0}, [&](Result<MadMessage>) { order.push_back(0); });
  d->Send(DispPerf(), {1s, 0}, [&](Result<MadMessage>) { order.push_back(1); });
  d->Send(DispSmp(), {1s, 0}, [&](Result<MadMessage>) { order.push_back(2); });
  EXPECT_EQ(wire.written.size(), 1u);
  EXPECT_EQ(d->counters().budget_waits, 2u);
  EXPECT_EQ(d->counters().in_flight, 1u);
  d->OnInbound(DispAnswer(wire.written[0]));
  ASSERT_EQ(wire.written.size(), 2u);  // the SMP, though the PerfMgt request came first
  EXPECT_EQ(wire.written[1].header()->mgmt_class, static_cast<uint8_t>(MgmtClass::kSubnLid));
  d->OnInbound(DispAnswer(wire.written[1]));
  ASSERT_EQ(wire.written.size(), 3u);
  d->OnInbound(DispAnswer(wire.written[2]));
  EXPECT_EQ(order, (std::vector<int>{0, 2, 1}));
  EXPECT_EQ(d->counters().in_flight_high_water, 1u);
}

TEST_F(DispFixture, APostedTransferIgnoresAnAbortFromAnotherHost) {
  Make({});
  MadMessage m;
  m.bytes.assign(3000, 0);
  MadHeader h;
  h.base_version = 1;
  h.mgmt_class = static_cast<uint8_t>(MgmtClass::kSubnAdm);
  h.class_version = 2;
  h.method = method::kGetTableResp;
  h.tid = 0x55;
  EncodeTo(h, m.bytes);
  m.addr.lid = Lid{5};
  m.addr.qpn = 1;
  ASSERT_TRUE(d->PostTransfer(m).ok());
  EXPECT_EQ(d->rmpp_posts(), 1u);
  ASSERT_EQ(wire.written.size(), 1u);  // a window of one segment to begin with
  auto abort = RmppReceiver(kSaHeaderSize).Refuse(wire.written[0].bytes);
  ASSERT_TRUE(abort.reply.has_value());
  MadMessage forged{std::vector<uint8_t>(abort.reply->begin(), abort.reply->end()), {}};
  forged.addr.lid = Lid{6};
  forged.addr.qpn = 1;
  d->OnInbound(forged);
  EXPECT_EQ(d->rmpp_posts(), 1u);
  EXPECT_EQ(d->counters().unmatched, 1u);
  forged.addr.lid = Lid{5};
  d->OnInbound(forged);
  EXPECT_EQ(d->rmpp_posts(), 0u);
  EXPECT_EQ(d->counters().rmpp_aborted, 1u);
}

TEST_F(DispFixture, CloseEndsEveryRequestInOrderAndTakesNothingNew) {
  Make({});
  std::vector<int> seen;
  for (int i = 0; i < 3; ++i) {
    d->Send(DispSmp(), {1s, 0}, [&, i](Result<MadMessage> r) {
      EXPECT_EQ(r.status().code(), StatusCode::kUnavailable);
      seen.push_back(i);
    });
  }
  d->Close(Unavailable("closed"), /*deferred=*/false);
  EXPECT_EQ(seen, (std::vector<int>{0, 1, 2}));
  EXPECT_TRUE(d->idle());
  EXPECT_FALSE(d->Write(DispSmp()).ok());
}

}  // namespace
}  // namespace ibsm::mad
