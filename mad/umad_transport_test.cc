// What the umad receiver thread hands to the io thread when that thread falls behind
// (README "MAD transport: backpressure"). The transport itself needs a port; its policy
// does not.
#include "mad/umad_transport.h"

#include <gtest/gtest.h>

#include "mad/rmpp.h"

namespace ibsm::mad {
namespace {

std::vector<uint8_t> Mad(uint8_t mgmt_class, uint8_t method) {
  std::vector<uint8_t> m(kMadSize, 0);
  MadHeader h;
  h.base_version = 1;
  h.mgmt_class = mgmt_class;
  h.class_version = mgmt_class == static_cast<uint8_t>(MgmtClass::kSubnAdm) ? 2 : 1;
  h.method = method;
  EncodeTo(h, m);
  return m;
}

constexpr auto kSaClass = static_cast<uint8_t>(MgmtClass::kSubnAdm);
constexpr auto kSmiClass = static_cast<uint8_t>(MgmtClass::kSubnLid);

TEST(UmadInboundPolicyTest, AnswersToOurRequestsAreToldFromUnsolicitedMads) {
  EXPECT_TRUE(AnswersUs(Mad(kSmiClass, method::kGetResp), 0));
  EXPECT_FALSE(AnswersUs(Mad(kSmiClass, method::kTrap), 0));
  EXPECT_FALSE(AnswersUs(Mad(kSaClass, method::kGetTable), 0));
  EXPECT_TRUE(AnswersUs(Mad(kSaClass, method::kGetTable), 110));  // our own send came back
  EXPECT_FALSE(AnswersUs(std::vector<uint8_t>(10, 0), 0));

  // An ACK of an RMPP response we send carries the request's method: it answers us; a DATA
  // segment of a peer's request does not.
  std::vector<uint8_t> big(3000, 0);
  auto req = Mad(kSaClass, method::kSet);
  std::copy(req.begin(), req.begin() + kSaHeaderSize, big.begin());
  auto sender = RmppSender::Create(big, kSaHeaderSize);
  ASSERT_TRUE(sender.ok());
  MadBytes data = sender->NextSegments().front();
  EXPECT_FALSE(AnswersUs(data, 0));
  RmppReceiver receiver(kSaHeaderSize);
  auto step = receiver.Feed(data);
  ASSERT_TRUE(step.reply.has_value());  // the ACK of segment 1
  EXPECT_TRUE(AnswersUs(*step.reply, 0));
}

TEST(UmadInboundPolicyTest, UnsolicitedMadsAreDroppedFirstWhenTheIoThreadFallsBehind) {
  constexpr size_t kCap = 8192;
  EXPECT_TRUE(InboundAdmitted(0, false, kCap));
  EXPECT_TRUE(InboundAdmitted(kCap / 2 - 1, false, kCap));
  EXPECT_FALSE(InboundAdmitted(kCap / 2, false, kCap));
  EXPECT_TRUE(InboundAdmitted(kCap / 2, true, kCap));
  EXPECT_TRUE(InboundAdmitted(kCap - 1, true, kCap));
  EXPECT_FALSE(InboundAdmitted(kCap, true, kCap));
}

}  // namespace
}  // namespace ibsm::mad
