// Discovery against a transport that answers with whatever the test scripts: a fabric that
// lies, truncates, duplicates GUIDs. The walk reports each with a stable ID, counts it, and
// keeps what it can.
#include <gtest/gtest.h>

#include <map>

#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>

#include "mad/attr/node_description.h"
#include "mad/attr/node_info.h"
#include "mad/attr/port_info.h"
#include "mad/attr/switch_info.h"
#include "mad/testing/fake_transport.h"
#include "sm/model/discovery.h"

namespace ibsm::sm {
namespace {

// Answers DR Gets from a table keyed by (path, attribute, modifier), through the tests' fake
// transport. A missing key is a lost MAD (the handler gets kTimeout), like a dead port.
class ScriptedTransport {
 public:
  using Key = std::tuple<DrPath, uint16_t, uint32_t>;
  using Answer = std::function<std::vector<uint8_t>(const mad::Smp& request)>;

  explicit ScriptedTransport(boost::asio::io_context& io) {
    transport.set_on_send([this, &io](mad::MadMessage request, const mad::SendOptions&,
                                      mad::Transport::ResponseHandler done) {
      auto smp = mad::Decode<mad::Smp>(request.bytes);
      DrPath path;
      for (size_t i = 1; i <= smp->hop_count; ++i) path.push_back(smp->initial_path[i]);
      auto it = answers_.find({path, smp->attr_id, smp->attr_mod});
      Result<mad::MadMessage> r = Timeout("no answer");
      if (it != answers_.end()) {
        mad::MadMessage m;
        m.bytes = it->second(*smp);
        r = std::move(m);
      }
      boost::asio::post(io, [done = std::move(done), r = std::move(r)]() mutable {
        done(std::move(r));
      });
    });
  }

  void Script(const DrPath& path, uint16_t attr, uint32_t mod, Answer a) {
    answers_[{path, attr, mod}] = std::move(a);
  }

  mad::FakeTransport transport;

 private:
  std::map<Key, Answer> answers_;
};

template <typename A>
ScriptedTransport::Answer ReplyWith(A attr) {
  return [attr](const mad::Smp& req) {
    mad::Smp resp = req;
    resp.method = mad::method::kGetResp;
    resp.direction = 1;
    resp.data.fill(0);
    mad::EncodeTo(attr, resp.data);
    std::vector<uint8_t> b(mad::kMadSize);
    mad::EncodeTo(resp, b);
    return b;
  };
}

mad::NodeInfo Ni(mad::NodeType t, uint64_t guid, uint8_t ports, uint8_t local_port) {
  mad::NodeInfo ni;
  ni.node_type = t;
  ni.node_guid = guid;
  ni.port_guid = t == mad::NodeType::kSwitch ? guid : guid + 1;
  ni.system_image_guid = guid;
  ni.num_ports = ports;
  ni.local_port_num = local_port;
  return ni;
}

mad::PortInfo Pi(uint8_t state) {
  mad::PortInfo pi;
  pi.port_state = state;
  pi.port_phys_state = 5;
  return pi;
}

// The SM's CA (GUID 0x10) cabled to port 1 of a 2-port switch (GUID 0x100).
void ScriptSmAndSwitch(ScriptedTransport& t) {
  t.Script({}, mad::attr::kNodeInfo, 0, ReplyWith(Ni(mad::NodeType::kCa, 0x10, 1, 1)));
  t.Script({}, mad::attr::kNodeDescription, 0, ReplyWith(mad::NodeDescription::From("sm host")));
  t.Script({}, mad::attr::kPortInfo, 1, ReplyWith(Pi(2)));
  t.Script({1}, mad::attr::kNodeInfo, 0, ReplyWith(Ni(mad::NodeType::kSwitch, 0x100, 2, 1)));
  t.Script({1}, mad::attr::kNodeDescription, 0, ReplyWith(mad::NodeDescription::From("sw")));
  t.Script({1}, mad::attr::kSwitchInfo, 0, ReplyWith(mad::SwitchInfo{}));
  t.Script({1}, mad::attr::kPortInfo, 0, ReplyWith(Pi(4)));
  t.Script({1}, mad::attr::kPortInfo, 1, ReplyWith(Pi(2)));
  t.Script({1}, mad::attr::kPortInfo, 2, ReplyWith(Pi(2)));
}

DiscoveryResult WalkScripted(ScriptedTransport& t, boost::asio::io_context& io) {
  SmpPipeline pipeline(t.transport, 8, mad::SendOptions{}, 0);
  Discovery d(pipeline);
  DiscoveryResult out;
  d.Run([&](DiscoveryResult r) { out = std::move(r); });
  io.run();
  return out;
}

bool HasIssue(const DiscoveryResult& r, const std::string& id) {
  for (const auto& i : r.issues)
    if (i.id == id) return true;
  return false;
}

TEST(DiscoveryBadInputTest, DuplicateGuidWithAnotherShapeIsReportedAndIgnored) {
  boost::asio::io_context io;
  ScriptedTransport t(io);
  ScriptSmAndSwitch(t);
  // Behind switch port 2, a CA claims the switch's own GUID.
  t.Script({1, 2}, mad::attr::kNodeInfo, 0, ReplyWith(Ni(mad::NodeType::kCa, 0x100, 1, 1)));
  DiscoveryResult r = WalkScripted(t, io);
  EXPECT_TRUE(HasIssue(r, "SM-DISC-003"));
  EXPECT_EQ(r.fabric.node_count(), 2u);
  EXPECT_EQ(r.fabric.switch_count(), 1u);
}

TEST(DiscoveryBadInputTest, ImpossibleNodeInfoIsReportedAndNotAdded) {
  boost::asio::io_context io;
  ScriptedTransport t(io);
  ScriptSmAndSwitch(t);
  t.Script({1, 2}, mad::attr::kNodeInfo, 0, ReplyWith(Ni(mad::NodeType::kCa, 0x200, 0, 1)));
  DiscoveryResult r = WalkScripted(t, io);
  EXPECT_TRUE(HasIssue(r, "SM-DISC-002"));
  EXPECT_EQ(r.fabric.node_count(), 2u);
}

TEST(DiscoveryBadInputTest, TruncatedAndMislabelledAnswersCountAsFailedSmps) {
  boost::asio::io_context io;
  ScriptedTransport t(io);
  ScriptSmAndSwitch(t);
  // A 12-byte answer, and a NodeDescription answer to a NodeInfo request.
  t.Script({1, 2}, mad::attr::kNodeInfo, 0,
           [](const mad::Smp&) { return std::vector<uint8_t>(12, 0xAB); });
  t.Script({1}, mad::attr::kSwitchInfo, 0, [](const mad::Smp& req) {
    mad::Smp resp = req;
    resp.method = mad::method::kGetResp;
    resp.attr_id = mad::attr::kNodeDescription;
    std::vector<uint8_t> b(mad::kMadSize);
    mad::EncodeTo(resp, b);
    return b;
  });
  DiscoveryResult r = WalkScripted(t, io);
  EXPECT_EQ(r.smps_failed, 2u);
  EXPECT_TRUE(HasIssue(r, "SM-DISC-001"));
  EXPECT_TRUE(HasIssue(r, "SM-DISC-007"));
  EXPECT_EQ(r.fabric.node_count(), 2u);
}

TEST(DiscoveryBadInputTest, ErrorStatusFromAnAgentIsAFailureNotAValue) {
  boost::asio::io_context io;
  ScriptedTransport t(io);
  ScriptSmAndSwitch(t);
  t.Script({1}, mad::attr::kNodeDescription, 0, [](const mad::Smp& req) {
    mad::Smp resp = req;
    resp.method = mad::method::kGetResp;
    resp.status = mad::mad_status::kMethodAttrUnsupported;
    std::vector<uint8_t> b(mad::kMadSize);
    mad::EncodeTo(resp, b);
    return b;
  });
  DiscoveryResult r = WalkScripted(t, io);
  EXPECT_TRUE(HasIssue(r, "SM-DISC-006"));
  auto sw = r.fabric.FindNode(Guid{0x100});
  ASSERT_TRUE(sw.has_value());
  EXPECT_EQ(r.fabric.node(*sw).description, "");
}

TEST(DiscoveryBadInputTest, LinkThatContradictsAnEarlierAnswerIsReported) {
  boost::asio::io_context io;
  ScriptedTransport t(io);
  ScriptSmAndSwitch(t);
  // Switch port 2 leads back to the SM's CA, whose only port is already cabled to port 1.
  t.Script({1, 2}, mad::attr::kNodeInfo, 0, ReplyWith(Ni(mad::NodeType::kCa, 0x10, 1, 1)));
  t.Script({1, 2}, mad::attr::kPortInfo, 1, ReplyWith(Pi(2)));
  DiscoveryResult r = WalkScripted(t, io);
  EXPECT_TRUE(HasIssue(r, "SM-DISC-005"));
  EXPECT_EQ(r.fabric.link_count(), 1u);
}

}  // namespace
}  // namespace ibsm::sm
