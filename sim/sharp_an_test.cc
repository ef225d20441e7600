#include "sim/sharp_an.h"

#include <gtest/gtest.h>

#include "fabric/generators.h"

namespace ibsm::sim {
namespace {

class SharpSimTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto base = FatTree2(4);
    ASSERT_TRUE(base.ok());
    auto f = WithAggregationNodes(*base, [](const Node& n) { return n.name != "leaf-002"; });
    ASSERT_TRUE(f.ok());
    fabric_ = std::move(*f);
    SimAnOptions o;
    o.tree_radix = 3;
    o.tree_table_size = 2;
    o.max_qps = 8;
    sharp_ = std::make_unique<SharpSim>(fabric_, o);
    sw_ = *fabric_.FindNodeByName("leaf-001");
    an_ = *fabric_.FindNodeByName("leaf-001-an");
    an_guid_ = fabric_.node(an_).guid;
  }

  uint16_t Smp(NodeId n, uint8_t method, uint16_t attr, uint32_t mod,
               std::array<uint8_t, 64>& data, bool* handled = nullptr) {
    auto st = sharp_->HandleSmp(n, PortNum{1}, method, attr, mod, data);
    if (handled) *handled = st.has_value();
    return st.value_or(0xFFFF);
  }
  void Enable() {
    std::array<uint8_t, 64> d{};
    mad::EncodeTo(mad::MlnxExtendedPortInfo{1}, d);
    ASSERT_EQ(Smp(sw_, mad::method::kSet, mad::vendor_attr::kMlnxExtendedPortInfo,
                  fabric_.node(sw_).num_ports, d),
              0);
  }
  // Sends a class 0x0B request to the AN; returns the response (nullopt: no answer).
  template <typename A>
  std::optional<mad::AmMad> Am(uint8_t method, uint32_t mod, const A& attr,
                               uint8_t version = mad::kAmClassVersion) {
    mad::AmMad m = mad::MakeAmRequest(method, A::kAttrId, mod);
    m.hdr.class_version = version;
    m.hdr.tid = 42;
    mad::EncodeTo(attr, m.data);
    mad::MadBytes b{};
    mad::EncodeAm(m, b);
    if (!sharp_->HandleGmp(an_, PortNum{1}, b)) return std::nullopt;
    mad::AmMad r;
    EXPECT_TRUE(mad::DecodeAm(b, &r).ok());
    EXPECT_EQ(r.hdr.tid, 42u);
    EXPECT_EQ(r.hdr.method, mad::method::kGetResp);
    return r;
  }
  std::vector<uint32_t> Alloc(uint16_t tree, uint8_t count, uint32_t job = 1) {
    mad::QpAllocation q;
    q.tree_id = tree;
    q.job_id = job;
    q.count = count;
    auto r = Am(mad::method::kSet, 0, q);
    if (!r || r->hdr.status != 0) return {};
    auto got = mad::Decode<mad::QpAllocation>(r->data);
    return std::vector<uint32_t>(got->qpn.begin(), got->qpn.begin() + count);
  }

  // A context with every field a ready RC QP needs (mad/attr/sharp.h, ibsm encoding v2).
  static mad::QpcConfig ReadyRc(uint32_t qpn, uint16_t tree) {
    mad::QpcConfig c;
    c.qpn = qpn;
    c.state = mad::qp_state::kReady;
    c.transport = mad::qp_transport::kRc;
    c.tree_id = tree;
    c.remote_lid = 9;
    c.remote_guid = 0x1234;
    c.mtu = 5;
    c.pkey = 0xFFFF;
    c.qkey = 0x11;
    c.send_psn = 0x100;
    c.recv_psn = 0x200;
    c.retry_count = 7;
    c.rnr_retry = 7;
    c.local_ack_timeout = 14;
    return c;
  }
  std::optional<mad::QpcConfig> QpcGet(uint32_t qpn) {
    mad::QpcConfig which;
    which.qpn = qpn;
    auto r = Am(mad::method::kGet, 0, which);
    if (!r || r->hdr.status != 0) return std::nullopt;
    auto c = mad::Decode<mad::QpcConfig>(r->data);
    return c.ok() ? std::optional<mad::QpcConfig>(*c) : std::nullopt;
  }
  uint16_t Cleanup(uint8_t scope, uint32_t job, uint16_t tree, uint32_t qpn) {
    mad::ResourceCleanup rc;
    rc.scope = scope;
    rc.job_id = job;
    rc.tree_id = tree;
    rc.qpn = qpn;
    return Am(mad::method::kSet, 0, rc)->hdr.status;
  }

  Fabric fabric_;
  std::unique_ptr<SharpSim> sharp_;
  NodeId sw_ = kNoNode, an_ = kNoNode;
  Guid an_guid_{0};
};

TEST_F(SharpSimTest, SharpSwitchAdvertisesCapabilityAndLegacySwitchDoesNot) {
  mad::GeneralInfoCapabilities caps;
  sharp_->AddCapabilities(sw_, caps);
  EXPECT_TRUE(caps.Has(mad::general_cap::kSharpAggregationNode));
  mad::GeneralInfoCapabilities legacy;
  sharp_->AddCapabilities(*fabric_.FindNodeByName("leaf-002"), legacy);
  EXPECT_FALSE(legacy.Has(mad::general_cap::kSharpAggregationNode));
  EXPECT_EQ(sharp_->ans().size(), fabric_.switch_count() - 1);
}

// Special-port marking as the open MLNX OpenSM header defines it: GeneralInfo bit 21, and
// MlnxExtendedPortInfo byte 47 of the AN-facing port = IsSpecialPort (bit 7) | type 1 (AN);
// every other port unmarked. Older firmware marks nothing and does not claim bit 21.
TEST_F(SharpSimTest, TheAnPortIsMarkedAsASpecialPortOfTypeAn) {
  mad::GeneralInfoCapabilities caps;
  sharp_->AddCapabilities(sw_, caps);
  EXPECT_TRUE(caps.Has(mad::general_cap::kSpecialPortsMarking));
  const uint32_t an_port = fabric_.node(sw_).num_ports;
  std::array<uint8_t, 64> d{};
  ASSERT_EQ(Smp(sw_, mad::method::kGet, mad::vendor_attr::kMlnxExtendedPortInfo, an_port, d), 0);
  EXPECT_EQ(d[47], 0x81);
  ASSERT_EQ(Smp(sw_, mad::method::kGet, mad::vendor_attr::kMlnxExtendedPortInfo, 1, d), 0);
  EXPECT_EQ(d[47], 0x00);
  sharp_->SetMarked(an_, false);
  ASSERT_EQ(Smp(sw_, mad::method::kGet, mad::vendor_attr::kMlnxExtendedPortInfo, an_port, d), 0);
  EXPECT_EQ(d[47], 0x00);

  SimAnOptions old;
  old.special_port_marking = false;
  SharpSim older(fabric_, old);
  mad::GeneralInfoCapabilities old_caps;
  older.AddCapabilities(sw_, old_caps);
  EXPECT_TRUE(old_caps.Has(mad::general_cap::kSharpAggregationNode));
  EXPECT_FALSE(old_caps.Has(mad::general_cap::kSpecialPortsMarking));
  auto st = older.HandleSmp(sw_, PortNum{1}, mad::method::kGet,
                            mad::vendor_attr::kMlnxExtendedPortInfo, an_port, d);
  ASSERT_EQ(st.value_or(0xFFFF), 0);
  EXPECT_EQ(d[47], 0x00);
}

// MlnxExtendedPortInfo byte 0 bit 4 port_recovered (mstflint tools_open_layouts.h): "On SET,
// only 0 is valid". A Set that copies the Get's 1 back is refused with MAD status 7 (invalid
// value, 0x001C) and enables nothing.
TEST_F(SharpSimTest, MlnxExtendedPortInfoSetWithPortRecoveredIsRefusedAsInvalidValue) {
  const uint32_t an_port = fabric_.node(sw_).num_ports;
  std::array<uint8_t, 64> d{};
  ASSERT_EQ(Smp(sw_, mad::method::kGet, mad::vendor_attr::kMlnxExtendedPortInfo, an_port, d), 0);
  EXPECT_EQ(d[0], 0x10);  // the AN port reads as recovered
  d[0] |= 0x40;           // SHArPANEn, port_recovered left as read
  EXPECT_EQ(Smp(sw_, mad::method::kSet, mad::vendor_attr::kMlnxExtendedPortInfo, an_port, d),
            0x001C);
  EXPECT_FALSE(Am(mad::method::kGet, 0, mad::AnInfo{}).has_value());  // AN still disabled
  d[0] = 0x40;
  EXPECT_EQ(Smp(sw_, mad::method::kSet, mad::vendor_attr::kMlnxExtendedPortInfo, an_port, d), 0);
  EXPECT_TRUE(Am(mad::method::kGet, 0, mad::AnInfo{}).has_value());
}

TEST_F(SharpSimTest, DisabledAnAnswersNothingUntilSharpAnEnIsSet) {
  EXPECT_FALSE(Am(mad::method::kGet, 0, mad::AnInfo{}).has_value());
  EXPECT_EQ(sharp_->counters().ignored, 1u);
  std::array<uint8_t, 64> d{};
  // Only the AN-facing port can enable it.
  mad::EncodeTo(mad::MlnxExtendedPortInfo{1}, d);
  EXPECT_EQ(Smp(sw_, mad::method::kSet, mad::vendor_attr::kMlnxExtendedPortInfo, 1, d),
            mad::mad_status::kInvalidField);
  Enable();
  d.fill(0);
  EXPECT_EQ(Smp(sw_, mad::method::kGet, mad::vendor_attr::kMlnxExtendedPortInfo,
                fabric_.node(sw_).num_ports, d),
            0);
  EXPECT_EQ(d[0], 0x50);  // SHArPANEn (bit 6) and port_recovered (bit 4)
  auto r = Am(mad::method::kGet, 0, mad::AnInfo{});
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->hdr.status, 0);
  auto info = mad::Decode<mad::AnInfo>(r->data);
  EXPECT_EQ(info->tree_radix, 3);
  EXPECT_EQ(info->tree_table_size, 2);
}

TEST_F(SharpSimTest, ConfiguredTreeReadsBackAndBadRequestsChangeNothing) {
  Enable();
  auto qps = Alloc(5, 3);
  ASSERT_EQ(qps.size(), 3u);
  mad::QpcConfig c = ReadyRc(qps[1], 5);
  EXPECT_EQ(Am(mad::method::kSet, 0, c)->hdr.status, 0);
  c.tree_id = 6;  // a QP of tree 5 cannot serve tree 6
  EXPECT_EQ(Am(mad::method::kSet, 0, c)->hdr.status, mad::mad_status::kInvalidField);

  mad::TreeConfig t;
  t.opcode = mad::tree_op::kWriteTree;
  t.state = mad::tree_state::kEnabled;
  t.tree_id = 5;
  t.parent_qpn = qps[0];
  t.num_children = 2;
  t.child_index = {0, 1};
  t.child_qpn = {qps[1], qps[2]};
  EXPECT_EQ(Am(mad::method::kSet, 0, t)->hdr.status, 0);

  // The Get names the tree in its data (mad/attr/sharp.h); addressed by modifier, as ibsm
  // encoding v1 did, it names tree 0, which does not exist.
  EXPECT_EQ(Am(mad::method::kGet, 5, mad::TreeConfig{})->hdr.status, mad::mad_status::kInvalidField);
  mad::TreeConfig which;
  which.tree_id = 5;
  auto got = Am(mad::method::kGet, 0, which);
  ASSERT_EQ(got->hdr.status, 0);
  auto back = mad::Decode<mad::TreeConfig>(got->data);
  EXPECT_EQ(back->parent_qpn, qps[0]);
  EXPECT_EQ(back->num_children, 2);
  EXPECT_EQ(back->child_qpn[1], qps[2]);
  auto qpc = QpcGet(qps[1]);
  ASSERT_TRUE(qpc.has_value());
  EXPECT_EQ(*qpc, ReadyRc(qps[1], 5));

  // Refused: a child QPN never allocated, a child index past the radix, a wrong version.
  mad::TreeConfig bad = t;
  bad.child_qpn[1] = 0x777777;
  EXPECT_EQ(Am(mad::method::kSet, 0, bad)->hdr.status, mad::mad_status::kInvalidField);
  bad = t;
  bad.opcode = mad::tree_op::kAddChildren;
  bad.num_children = 1;
  bad.child_index[0] = 3;
  EXPECT_EQ(Am(mad::method::kSet, 0, bad)->hdr.status, mad::mad_status::kInvalidField);
  EXPECT_EQ(Am(mad::method::kSet, 0, t, /*version=*/2)->hdr.status, mad::mad_status::kBadVersion);
  const SharpSim::An* an = sharp_->FindAn(an_guid_);
  ASSERT_NE(an, nullptr);
  ASSERT_EQ(an->trees.count(5), 1u);
  EXPECT_EQ(an->trees.at(5).child_qpn, (std::vector<uint32_t>{qps[1], qps[2]}));

  // Tree table of 2: a third tree is refused; QPs beyond max_qps too.
  auto qa = Alloc(6, 1), qb = Alloc(7, 1);
  ASSERT_EQ(qa.size() + qb.size(), 2u);
  EXPECT_TRUE(Alloc(8, 4).empty());  // 5 + 4 > 8
  mad::TreeConfig t6;
  t6.opcode = mad::tree_op::kWriteTree;
  t6.tree_id = 6;
  EXPECT_EQ(Am(mad::method::kSet, 0, t6)->hdr.status, 0);
  t6.tree_id = 7;
  EXPECT_EQ(Am(mad::method::kSet, 0, t6)->hdr.status, mad::mad_status::kInvalidField);

  mad::ResourceCleanup all;
  EXPECT_EQ(Am(mad::method::kSet, 0, all)->hdr.status, 0);
  EXPECT_TRUE(an->trees.empty());
  EXPECT_TRUE(an->qps.empty());
}

// A ready context that leaves any field an RC QP needs unset or invalid is refused with
// status 0x1C and the stored context stays as it was.
TEST_F(SharpSimTest, QpcConfigSetMissingAnyRcFieldIsRefusedAndChangesNothing) {
  Enable();
  auto qps = Alloc(5, 1);
  ASSERT_EQ(qps.size(), 1u);
  const mad::QpcConfig good = ReadyRc(qps[0], 5);
  EXPECT_EQ(SharpSim::IncompleteRcField(good), nullptr);
  struct Case {
    const char* field;
    void (*spoil)(mad::QpcConfig&);
  };
  const Case cases[] = {
      {"transport", [](mad::QpcConfig& c) { c.transport = mad::qp_transport::kUnset; }},
      {"transport", [](mad::QpcConfig& c) { c.transport = mad::qp_transport::kUd; }},
      {"mtu", [](mad::QpcConfig& c) { c.mtu = 0; }},
      {"mtu", [](mad::QpcConfig& c) { c.mtu = 6; }},
      {"pkey", [](mad::QpcConfig& c) { c.pkey = 0; }},
      {"pkey", [](mad::QpcConfig& c) { c.pkey = 0x8000; }},
      {"qkey", [](mad::QpcConfig& c) { c.qkey = 0; }},
      {"send_psn", [](mad::QpcConfig& c) { c.send_psn = 0; }},
      {"send_psn", [](mad::QpcConfig& c) { c.send_psn = mad::kPsnLimit; }},
      {"recv_psn", [](mad::QpcConfig& c) { c.recv_psn = 0x01000001; }},
      {"remote_lid", [](mad::QpcConfig& c) { c.remote_lid = 0; }},
      {"remote_lid", [](mad::QpcConfig& c) { c.remote_lid = 0xC001; }},
      {"remote_guid", [](mad::QpcConfig& c) { c.remote_guid = 0; }},
      {"local_ack_timeout", [](mad::QpcConfig& c) { c.local_ack_timeout = 0; }},
  };
  for (const Case& k : cases) {
    mad::QpcConfig c = good;
    k.spoil(c);
    SCOPED_TRACE(k.field);
    EXPECT_STREQ(SharpSim::IncompleteRcField(c), k.field);
    EXPECT_EQ(Am(mad::method::kSet, 0, c)->hdr.status, mad::mad_status::kInvalidField);
    auto now = QpcGet(qps[0]);
    ASSERT_TRUE(now.has_value());
    EXPECT_EQ(now->state, mad::qp_state::kReset);  // nothing stored
  }
  EXPECT_EQ(Am(mad::method::kSet, 0, good)->hdr.status, 0);
  EXPECT_EQ(QpcGet(qps[0]), good);
  // Back to reset needs no RC fields; an unknown state is refused.
  mad::QpcConfig reset;
  reset.qpn = qps[0];
  reset.tree_id = 5;
  EXPECT_EQ(Am(mad::method::kSet, 0, reset)->hdr.status, 0);
  reset.state = 3;
  EXPECT_EQ(Am(mad::method::kSet, 0, reset)->hdr.status, mad::mad_status::kInvalidField);
}

// QPCConfig Get selects the QP by the QPN in its data (ibsm encoding v2); the modifier is 0.
TEST_F(SharpSimTest, QpcConfigGetFindsTheQpByTheQpnInItsData) {
  Enable();
  auto qps = Alloc(5, 2);
  ASSERT_EQ(qps.size(), 2u);
  ASSERT_EQ(Am(mad::method::kSet, 0, ReadyRc(qps[1], 5))->hdr.status, 0);
  EXPECT_EQ(QpcGet(qps[1]), ReadyRc(qps[1], 5));
  EXPECT_EQ(QpcGet(qps[0])->state, mad::qp_state::kReset);
  EXPECT_FALSE(QpcGet(0x777777).has_value());
  // The QPN in the modifier (v1) with an empty selector finds nothing.
  EXPECT_EQ(Am(mad::method::kGet, qps[1], mad::QpcConfig{})->hdr.status, mad::mad_status::kInvalidField);
}

// ResourceCleanup scopes: one QP (of its job and tree, not while a tree names it), one tree,
// one job; QPAllocation release names the owning job and tree too.
TEST_F(SharpSimTest, CleanupByQpTreeAndJobFreesExactlyThatScope) {
  Enable();
  auto j1t5 = Alloc(5, 3, /*job=*/1);
  auto j2t6 = Alloc(6, 2, /*job=*/2);
  auto j1t7 = Alloc(7, 2, /*job=*/1);
  ASSERT_EQ(j1t5.size() + j2t6.size() + j1t7.size(), 7u);
  const SharpSim::An* an = sharp_->FindAn(an_guid_);
  mad::TreeConfig t;
  t.opcode = mad::tree_op::kWriteTree;
  t.state = mad::tree_state::kEnabled;
  t.tree_id = 5;
  t.parent_qpn = j1t5[0];
  t.num_children = 1;
  t.child_qpn[0] = j1t5[1];
  ASSERT_EQ(Am(mad::method::kSet, 0, t)->hdr.status, 0);

  // One QP: the wrong job or tree is refused, a QP the tree uses is in use.
  EXPECT_EQ(Cleanup(mad::cleanup_scope::kQp, 2, 5, j1t5[2]), mad::mad_status::kInvalidField);
  EXPECT_EQ(Cleanup(mad::cleanup_scope::kQp, 1, 7, j1t5[2]), mad::mad_status::kInvalidField);
  EXPECT_EQ(Cleanup(mad::cleanup_scope::kQp, 1, 5, j1t5[1]), mad::mad_status::kInvalidField);
  EXPECT_EQ(Cleanup(mad::cleanup_scope::kQp, 1, 5, j1t5[2]), 0);
  EXPECT_EQ(an->qps.size(), 6u);
  EXPECT_EQ(an->qps.count(j1t5[2]), 0u);
  EXPECT_EQ(an->trees.count(5), 1u);

  // Release: all listed QPNs must be the job's and the tree's.
  mad::QpAllocation rel;
  rel.opcode = mad::qp_alloc_op::kRelease;
  rel.job_id = 1;
  rel.tree_id = 7;
  rel.count = 2;
  rel.qpn[0] = j1t7[0];
  rel.qpn[1] = j2t6[0];
  EXPECT_EQ(Am(mad::method::kSet, 0, rel)->hdr.status, mad::mad_status::kInvalidField);
  EXPECT_EQ(an->qps.size(), 6u);
  rel.count = 1;
  EXPECT_EQ(Am(mad::method::kSet, 0, rel)->hdr.status, 0);
  EXPECT_EQ(an->qps.count(j1t7[0]), 0u);

  // One tree: job 2's tree 6 and its QPs only.
  EXPECT_EQ(Cleanup(mad::cleanup_scope::kTree, 0, 6, 0), 0);
  for (uint32_t q : j2t6) EXPECT_EQ(an->qps.count(q), 0u);
  EXPECT_EQ(an->qps.size(), 3u);

  // One job: job 1's QPs of every tree, and tree 5 they carried; job 2's new QP stays.
  auto j2t8 = Alloc(8, 1, /*job=*/2);
  ASSERT_EQ(j2t8.size(), 1u);
  EXPECT_EQ(Cleanup(mad::cleanup_scope::kJob, 1, 0, 0), 0);
  EXPECT_TRUE(an->trees.empty());
  ASSERT_EQ(an->qps.size(), 1u);
  EXPECT_EQ(an->qps.begin()->first, j2t8[0]);
  EXPECT_EQ(an->qps.begin()->second.job_id, 2u);
  EXPECT_EQ(Cleanup(7, 0, 0, 0), mad::mad_status::kInvalidField);  // no such scope
}

TEST_F(SharpSimTest, SwitchPowerCycleClearsItsAn) {
  Enable();
  ASSERT_EQ(Alloc(1, 2).size(), 2u);
  sharp_->OnNodeReset(sw_);
  const SharpSim::An* an = sharp_->FindAn(an_guid_);
  EXPECT_FALSE(an->enabled);
  EXPECT_TRUE(an->qps.empty());
  EXPECT_FALSE(Am(mad::method::kGet, 0, mad::AnInfo{}).has_value());
}

}  // namespace
}  // namespace ibsm::sim
