#include "tools/sa_client.h"

#include <gtest/gtest.h>

#include <memory>
#include <set>

#include <boost/asio/io_context.hpp>

#include "fabric/generators.h"
#include "mad/attr/modifiers.h"
#include "mad/attr/path_record.h"
#include "sim/sim_transport.h"
#include "sim/simulator.h"
#include "sm/sweep/subnet_manager.h"

namespace ibsm::tools {
namespace {

std::vector<PortId> CaPorts(const Fabric& f) {
  std::vector<PortId> out;
  for (NodeId n = 0; n < f.node_count(); ++n)
    if (f.node(n).kind == NodeKind::kCa) out.push_back(f.port_id(n, PortNum{1}));
  return out;
}

// ibsmd's SM on the first CA after one heavy sweep; the client on the last CA.
class SaFixture {
 public:
  // `settle`: keep the SM running after its first sweep until it has read the SL2VL and
  // VLArb tables (which it does after SUBNET UP, never in --once mode).
  explicit SaFixture(Fabric fabric, bool settle = false, sim::SimOptions so = {})
      : fabric_(std::move(fabric)), sim_(fabric_, so), cas_(CaPorts(fabric_)),
        sm_transport_(io_, sim_, cas_.front()), client_transport_(io_, sim_, cas_.back()) {
    sm::SubnetManagerOptions o;
    o.once = !settle;
    o.sweep_interval = std::chrono::seconds(0);
    o.send.timeout = std::chrono::milliseconds(20);
    o.send.retries = 4;
    sm_ = std::make_unique<sm::SubnetManager>(io_, sm_transport_, clock_, nullptr, o);
    sm_->Start([this](const sm::SweepStats& s) {
      up_ = s.subnet_up;
      io_.stop();
    });
    io_.run();
    if (!settle) return;
    io_.restart();
    while (io_.run_one() > 0) {
      auto snap = sm_->sa().snapshot();
      if (snap && snap->qos && !snap->qos->empty()) break;
    }
  }

  bool up() const { return up_; }
  const Fabric& fabric() const { return fabric_; }
  sim::Simulator& sim() { return sim_; }
  sm::SubnetManager& sm() { return *sm_; }
  boost::asio::io_context& io() { return io_; }
  mad::Transport& client_transport() { return client_transport_; }
  PortId client_port() const { return cas_.back(); }

 private:
  Fabric fabric_;
  boost::asio::io_context io_;
  sim::Simulator sim_;
  std::vector<PortId> cas_;
  sim::SimTransport sm_transport_;
  sim::SimTransport client_transport_;
  SystemClock clock_;
  std::unique_ptr<sm::SubnetManager> sm_;
  bool up_ = false;
};

// End ports (CA ports and switch port 0) and cables of `f`.
size_t EndPorts(const Fabric& f) {
  size_t n = 0;
  for (NodeId i = 0; i < f.node_count(); ++i)
    n += f.node(i).is_switch() ? 1 : f.node(i).num_ports;
  return n;
}

size_t Cables(const Fabric& f) {
  size_t n = 0;
  for (NodeId i = 0; i < f.node_count(); ++i)
    for (uint32_t p = 1; p <= f.node(i).num_ports; ++p)
      if (f.port(i, PortNum{static_cast<uint8_t>(p)}).connected()) ++n;
  return n / 2;
}

TEST(SaClientTest, ReadsWholeTablesOverRmppAndTheCountsMatchTheFabric) {
  SaFixture t(FatTree3(8).value());
  ASSERT_TRUE(t.up());
  const Fabric& f = t.fabric();
  SaClient client(t.client_transport(), t.sm().sm_lid(),
                  mad::SendOptions{std::chrono::milliseconds(500), 2});

  auto nodes = client.QueryAndWait(t.io(), TableRequest(mad::NodeRecord{}));
  ASSERT_TRUE(nodes.ok()) << nodes.status().message();
  ASSERT_EQ(nodes->status, 0) << SaStatusName(nodes->status);
  auto nrs = DecodeRecords<mad::NodeRecord>(*nodes);
  ASSERT_TRUE(nrs.ok());
  EXPECT_EQ(nrs->size(), EndPorts(f));
  std::set<uint64_t> guids;
  for (const auto& r : *nrs) guids.insert(r.node_info.port_guid);
  EXPECT_EQ(guids.size(), EndPorts(f)) << "a port listed twice";
  EXPECT_GT(t.sm().sa().counters().rmpp_answers, 0u);

  auto links = client.QueryAndWait(t.io(), TableRequest(mad::LinkRecord{}));
  ASSERT_TRUE(links.ok());
  EXPECT_EQ(links->records.size(), 2 * Cables(f));  // both directions of every cable

  auto switches = client.QueryAndWait(t.io(), TableRequest(mad::SwitchInfoRecord{}));
  ASSERT_TRUE(switches.ok());
  size_t want_switches = 0;
  for (const auto& n : f.nodes()) want_switches += n.is_switch();
  EXPECT_EQ(switches->records.size(), want_switches);

  // Paths from the requester to every end port, its own included.
  SaRequest paths;
  paths.attr_id = mad::sa_attr::kPathRecord;
  paths.record.resize(mad::Layout<mad::PathRecord>::kSize);
  auto prs = client.QueryAndWait(t.io(), paths);
  ASSERT_TRUE(prs.ok());
  ASSERT_EQ(prs->status, 0) << SaStatusName(prs->status);
  std::set<uint16_t> dlids;
  uint16_t own = t.sim().port_info(t.client_port()).lid;
  for (const auto& rec : prs->records) {
    mad::PathRecord r;
    ASSERT_TRUE(mad::DecodeFrom(rec, &r).ok());
    EXPECT_EQ(r.slid, own);
    dlids.insert(r.dlid);
  }
  EXPECT_EQ(prs->records.size(), EndPorts(f));
  EXPECT_EQ(dlids.size(), EndPorts(f));
}

TEST(SaClientTest, AnSaErrorIsAReplyAndANodeThatIsNoSaIsATimeout) {
  SaFixture t(FatTree2(4).value());
  ASSERT_TRUE(t.up());
  SaClient sa(t.client_transport(), t.sm().sm_lid(),
              mad::SendOptions{std::chrono::milliseconds(50), 1});
  mad::NodeRecord r;
  r.lid = 0xbfff;  // no such LID
  auto none = sa.QueryAndWait(t.io(), TableRequest(r, 1, mad::method::kGet));
  ASSERT_TRUE(none.ok()) << none.status().message();
  EXPECT_EQ(SaStatusName(none->status), "NO_RECORDS");
  EXPECT_TRUE(none->records.empty());

  // The client's own LID answers no SA request.
  SaClient nobody(t.client_transport(), Lid{t.sim().port_info(t.client_port()).lid},
                  mad::SendOptions{std::chrono::milliseconds(20), 1});
  auto lost = nobody.QueryAndWait(t.io(), TableRequest(mad::NodeRecord{}));
  ASSERT_FALSE(lost.ok());
  EXPECT_EQ(lost.status().code(), StatusCode::kTimeout);
}

// The client port's own SMA answer to a Get of `attr` (a DR SMP with an empty path).
std::vector<uint8_t> AskOwnSma(SaFixture& t, uint16_t attr, uint32_t mod) {
  mad::Smp smp = mad::MakeDrSmp(mad::method::kGet, attr, mod, {});
  std::optional<Result<mad::MadMessage>> got;
  t.client_transport().Send(mad::ToMessage(smp), mad::SendOptions{std::chrono::milliseconds(200), 1},
                            [&](Result<mad::MadMessage> r) { got = std::move(r); });
  t.io().restart();
  while (!got && t.io().run_one() > 0) {
  }
  EXPECT_TRUE(got && got->ok());
  if (!got || !got->ok()) return {};
  mad::Smp answer;
  EXPECT_TRUE(mad::DecodeFrom((*got)->bytes, &answer).ok());
  return std::vector<uint8_t>(answer.data.begin(), answer.data.end());
}

// Every device answers its tables here (the kind profile): what is checked is that the SA's
// records carry them exactly. What the SA says of a device that does not answer is
// sm/model/qos_tables_test.cc's.
TEST(SaClientTest, Sl2VlAndVlArbRecordsShowTheTablesThePortsHold) {
  SaFixture t(FatTree2(4).value(), /*settle=*/true, sim::SimOptions::Kind());
  ASSERT_TRUE(t.up());
  const Fabric& f = t.fabric();
  SaClient sa(t.client_transport(), t.sm().sm_lid(),
              mad::SendOptions{std::chrono::milliseconds(500), 2});

  // A host: one SL2VL table, found by its LID whatever port number the query names.
  const uint16_t host_lid = t.sim().port_info(t.client_port()).lid;
  mad::Sl2VlTableRecord want;
  want.lid = host_lid;
  want.out_port_num = 0;  // osmtest asks a CA for port 0
  auto host = sa.QueryAndWait(t.io(), TableRequest(want, 0b111));
  ASSERT_TRUE(host.ok()) << host.status().message();
  ASSERT_EQ(host->status, 0) << SaStatusName(host->status);
  auto hr = DecodeRecords<mad::Sl2VlTableRecord>(*host);
  ASSERT_TRUE(hr.ok());
  ASSERT_EQ(hr->size(), 1u);
  EXPECT_EQ((*hr)[0].out_port_num, 1);
  // Exactly what the port's own SMA answers.
  auto held = AskOwnSma(t, mad::attr::kSlToVlTable, 0);
  mad::SlToVlTable sl2vl;
  ASSERT_TRUE(mad::DecodeFrom(held, &sl2vl).ok());
  EXPECT_EQ((*hr)[0].table.vl, sl2vl.vl);

  // A switch: one table per (cabled input, cabled output) pair.
  NodeId leaf = f.port(f.port(t.client_port()).peer).node;
  size_t cabled = 0;
  for (uint8_t p = 1; p <= f.node(leaf).num_ports; ++p)
    cabled += f.port(leaf, PortNum{p}).connected();
  mad::Sl2VlTableRecord sw;
  sw.lid = t.sim().port_info(f.port_id(leaf, PortNum{0})).lid;
  auto tables = sa.QueryAndWait(t.io(), TableRequest(sw, 1));
  ASSERT_TRUE(tables.ok());
  EXPECT_EQ(tables->records.size(), (cabled + 1) * (cabled + 1));  // port 0 too

  // VLArb: the blocks the port's caps give it, low block 1 with its first 15 entries.
  mad::VlArbitrationTableRecord va;
  va.lid = host_lid;
  va.block_num = 1;
  auto arb = sa.QueryAndWait(t.io(), TableRequest(va, 0b101, mad::method::kGet));
  ASSERT_TRUE(arb.ok());
  ASSERT_EQ(arb->status, 0) << SaStatusName(arb->status);
  auto ar = DecodeRecords<mad::VlArbitrationTableRecord>(*arb);
  ASSERT_TRUE(ar.ok());
  ASSERT_EQ(ar->size(), 1u);
  mad::VlArbitrationTable block1;
  ASSERT_TRUE(mad::DecodeFrom(AskOwnSma(t, mad::attr::kVlArbitrationTable,
                                        mad::VlArbAttrMod(1)), &block1).ok());
  EXPECT_EQ((*ar)[0].table.vl, block1.vl);
  EXPECT_EQ((*ar)[0].table.weight, block1.weight);
  EXPECT_NE(block1.weight, decltype(block1.weight){}) << "an all-zero table proves little";
}

// --- ParseSaReply on bytes nobody vouches for ------------------------------------------

std::vector<uint8_t> Answer(uint8_t method, uint16_t attr_offset, size_t records,
                            uint8_t rmpp_flags = 0, uint32_t payload_len = 0) {
  mad::SaMad m;
  m.hdr.mgmt_class = 3;
  m.hdr.class_version = 2;
  m.hdr.method = method;
  m.hdr.attr_id = mad::sa_attr::kLinkRecord;
  m.attr_offset = attr_offset;
  m.rmpp_version = rmpp_flags ? 1 : 0;
  m.rmpp_type = rmpp_flags ? mad::rmpp::kTypeData : 0;
  m.rmpp_flags = rmpp_flags;
  m.rmpp_data2 = payload_len;
  for (size_t i = 0; i < records * attr_offset * 8 && i < m.data.size(); ++i)
    m.data[i] = static_cast<uint8_t>(i / (attr_offset * 8) + 1);
  std::vector<uint8_t> b(mad::kMadSize);
  mad::EncodeSa(m, b);
  return b;
}

TEST(ParseSaReplyTest, ALoneRmppSegmentEndsWhereItsPayloadLengthSays) {
  constexpr uint8_t kAll = mad::rmpp::kFlagActive | mad::rmpp::kFlagFirst | mad::rmpp::kFlagLast;
  // Three 8-byte LinkRecords: 20 bytes of SA header + 24 of records.
  auto r = ParseSaReply(Answer(mad::method::kGetTableResp, 1, 3, kAll, 20 + 24));
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r->records.size(), 3u);
  EXPECT_EQ(r->records[2][0], 3);
  // Without RMPP the whole MAD is records (200 bytes / 8).
  auto whole = ParseSaReply(Answer(mad::method::kGetTableResp, 1, 3));
  ASSERT_TRUE(whole.ok());
  EXPECT_EQ(whole->records.size(), 25u);
}

TEST(ParseSaReplyTest, AGetAnswerCarriesOneRecord) {
  auto r = ParseSaReply(Answer(mad::method::kGetResp, 1, 3));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->records.size(), 1u);
}

TEST(ParseSaReplyTest, ShortWrongClassAndRequestBytesAreRefused) {
  std::vector<uint8_t> b = Answer(mad::method::kGetTableResp, 1, 1);
  EXPECT_FALSE(ParseSaReply(std::span<const uint8_t>(b).first(40)).ok());
  std::vector<uint8_t> smp = b;
  smp[1] = 0x81;  // class byte
  EXPECT_FALSE(ParseSaReply(smp).ok());
  auto req = Answer(mad::method::kGetTable, 1, 1);
  EXPECT_FALSE(ParseSaReply(req).ok());
  // A zero AttributeOffset names no record size: no records, no loop.
  auto zero = ParseSaReply(Answer(mad::method::kGetTableResp, 0, 0));
  ASSERT_TRUE(zero.ok());
  EXPECT_TRUE(zero->records.empty());
}

}  // namespace
}  // namespace ibsm::tools
