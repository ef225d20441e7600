// Partitions end to end on the in-process simulator: the SM programs P_Key tables by diff,
// a reload changes only what differs, and the SA hides what a host may not see.
#include <gtest/gtest.h>

#include <map>
#include <optional>
#include <set>

#include <boost/asio/io_context.hpp>

#include "fabric/generators.h"
#include "mad/attr/mc_member_record.h"
#include "mad/attr/path_record.h"
#include "mad/attr/sa_records.h"
#include "sim/sim_transport.h"
#include "sim/simulator.h"
#include "sm/model/multicast.h"
#include "sm/model/pkey_manager.h"
#include "sm/sweep/subnet_manager.h"
#include "sm/testing/test_util.h"

namespace ibsm::sm {
namespace {

using testutil::CaPorts;
using testutil::UsedPKeys;
using testutil::ParsePartitionsText;

namespace pc = mad::path_comp;

struct SaAnswer {
  uint16_t status = 0xFFFF;
  std::vector<std::vector<uint8_t>> records;
};

// The SM on host 0 of an 8-host two-level fat tree, swept on demand.
class PartitionBed {
 public:
  explicit PartitionBed(PartitionPolicy policy)
      : fabric_(FatTree2(4).value()), sim_(fabric_), hosts_(CaPorts(fabric_)),
        transport_(io_, sim_, hosts_[0]) {
    options_.send.timeout = std::chrono::milliseconds(20);
    options_.send.retries = 4;
    options_.sweep_interval = std::chrono::seconds(0);
    options_.partitions = std::move(policy);
    sm_ = std::make_unique<SubnetManager>(io_, transport_, clock_, nullptr, options_);
    sm_->Start([this](const SweepStats& s) {
      last_ = s;
      io_.stop();
    });
    io_.run();
  }
  ~PartitionBed() {
    sm_->Stop();
    transport_.Close();
  }

  SweepStats Reload(PartitionPolicy policy) {
    options_.partitions = std::move(policy);
    sm_->Reconfigure(options_);
    sm_->RequestHeavySweep("test reload");
    io_.restart();
    io_.run();
    return last_;
  }

  // An SA request from `from` (a host port), as that host's SA client sends it.
  SaAnswer Ask(PortId from, uint8_t method, uint16_t attr, uint64_t comp_mask,
               std::span<const uint8_t> record, uint64_t sm_key = 0) {
    sim::SimTransport client(io_, sim_, from);
    mad::SaMad m;
    m.hdr.mgmt_class = static_cast<uint8_t>(mad::MgmtClass::kSubnAdm);
    m.hdr.class_version = mad::kSaClassVersion;
    m.hdr.method = method;
    m.hdr.attr_id = attr;
    m.comp_mask = comp_mask;
    m.sm_key = sm_key;
    std::copy(record.begin(), record.end(), m.data.begin());
    mad::MadMessage msg;
    msg.bytes.resize(mad::kMadSize);
    mad::EncodeSa(m, msg.bytes);
    msg.addr.lid = sm_->sm_lid();
    std::optional<Result<mad::MadMessage>> got;
    client.Send(std::move(msg), mad::SendOptions{std::chrono::milliseconds(500), 2},
                [&](Result<mad::MadMessage> r) {
                  got = std::move(r);
                  io_.stop();
                });
    io_.restart();
    io_.run();
    client.Close();
    SaAnswer a;
    EXPECT_TRUE(got && got->ok());
    if (!got || !got->ok()) return a;
    std::vector<uint8_t> bytes = (*got)->bytes;
    std::vector<uint8_t> padded = bytes;
    if (padded.size() < mad::kMadSize) padded.resize(mad::kMadSize, 0);
    mad::SaMad resp;
    EXPECT_TRUE(mad::DecodeSa(padded, &resp).ok());
    a.status = resp.hdr.status;
    size_t stride = size_t{resp.attr_offset} * 8;
    if (a.status == 0 && stride > 0) {
      size_t end = resp.hdr.method == mad::method::kGetResp ? mad::kSaHeaderSize + stride
                                                            : bytes.size();
      for (size_t at = mad::kSaHeaderSize; at + stride <= end; at += stride)
        a.records.emplace_back(bytes.begin() + at, bytes.begin() + at + stride);
    }
    return a;
  }

  std::vector<mad::PathRecord> Paths(PortId from, PortId src, PortId dst,
                                     std::optional<uint16_t> pkey = std::nullopt,
                                     uint64_t sm_key = 0) {
    mad::PathRecord r;
    r.slid = sim_.port_info(src).lid;
    r.dlid = sim_.port_info(dst).lid;
    uint64_t mask = pc::kSlid | pc::kDlid;
    if (pkey) {
      r.pkey = *pkey;
      mask |= pc::kPKey;
    }
    std::vector<uint8_t> buf(mad::Layout<mad::PathRecord>::kSize);
    mad::EncodeTo(r, buf);
    SaAnswer a = Ask(from, mad::method::kGetTable, mad::sa_attr::kPathRecord, mask, buf, sm_key);
    std::vector<mad::PathRecord> out;
    for (const auto& rec : a.records) {
      mad::PathRecord p;
      EXPECT_TRUE(mad::DecodeFrom(rec, &p).ok());
      out.push_back(p);
    }
    return out;
  }

  template <typename R>
  std::vector<R> Table(PortId from, uint64_t comp_mask = 0, const R& templ = {},
                       uint64_t sm_key = 0) {
    std::vector<uint8_t> buf(mad::Layout<R>::kSize);
    mad::EncodeRecord(templ, buf);
    SaAnswer a = Ask(from, mad::method::kGetTable, mad::SaRecord<R>::kAttrId, comp_mask, buf,
                     sm_key);
    EXPECT_EQ(a.status, 0);
    std::vector<R> out;
    for (const auto& rec : a.records) {
      auto r = mad::DecodeRecord<R>(rec);
      EXPECT_TRUE(r.ok());
      if (r.ok()) out.push_back(*r);
    }
    return out;
  }

  const Fabric& fabric() const { return fabric_; }
  sim::Simulator& sim() { return sim_; }
  const std::vector<PortId>& hosts() const { return hosts_; }
  const SweepStats& last() const { return last_; }
  SubnetManager& sm() { return *sm_; }
  std::string Guid(int host) const { return ToString(fabric_.port(hosts_[host]).guid); }

 private:
  Fabric fabric_;
  boost::asio::io_context io_;
  sim::Simulator sim_;
  std::vector<PortId> hosts_;
  sim::SimTransport transport_;
  SystemClock clock_;
  SubnetManagerOptions options_;
  std::unique_ptr<SubnetManager> sm_;
  SweepStats last_;
};

// Red (0x0001): hosts 1-3 full, host 5 limited. Blue (0x0002): hosts 4-5 full, hosts 3 and
// 6 limited. Host 7 in neither. The SM (host 0) a full member of both.
std::string TwoPartitions(const PartitionBed& b) {
  return "red=0x0001, ipoib : " + b.Guid(1) + "=full, " + b.Guid(2) + "=full, " + b.Guid(3) +
         "=full, " + b.Guid(5) + "=limited, SELF=full ;\n" +
         "blue=0x0002 :   # multi-line, default membership limited\n   " + b.Guid(4) +
         "=full, " + b.Guid(5) + "=full,\n   " + b.Guid(6) + ", " + b.Guid(3) +
         ", SELF=full ;\n";
}

PartitionPolicy Policy(std::shared_ptr<const conf::PartitionConfig> c) {
  PartitionPolicy p;
  p.config = std::move(c);
  return p;
}

TEST(PartitionsSimTest, AfterASweepHostsAndTheirSwitchPortsHoldTheConfiguredKeys) {
  PartitionBed b({});
  ASSERT_TRUE(b.last().subnet_up);
  // No file: the default partition, which every port holds from power-on: nothing to send.
  EXPECT_EQ(b.last().pkey_blocks_sent, 0u);
  EXPECT_GT(b.last().pkey_blocks_read, 0u);
  EXPECT_GT(b.last().enforcement_sets, 0u);  // part_enforce both, from the first sweep
  SweepStats s = b.Reload(Policy(ParsePartitionsText(TwoPartitions(b))));
  ASSERT_TRUE(s.subnet_up);
  auto& sim = b.sim();
  const auto& h = b.hosts();
  EXPECT_EQ(UsedPKeys(sim.pkey_table(h[0])), (std::vector<uint16_t>{0xFFFF, 0x8001, 0x8002}));
  EXPECT_EQ(UsedPKeys(sim.pkey_table(h[1])), (std::vector<uint16_t>{0x7FFF, 0x8001}));
  EXPECT_EQ(UsedPKeys(sim.pkey_table(h[4])), (std::vector<uint16_t>{0x7FFF, 0x8002}));
  EXPECT_EQ(UsedPKeys(sim.pkey_table(h[5])), (std::vector<uint16_t>{0x7FFF, 0x0001, 0x8002}));
  EXPECT_EQ(UsedPKeys(sim.pkey_table(h[6])), (std::vector<uint16_t>{0x7FFF, 0x0002}));
  EXPECT_EQ(UsedPKeys(sim.pkey_table(h[7])), std::vector<uint16_t>{0x7FFF});
  // The leaf port facing host 5 checks its packets against host 5's keys, both ways.
  PortId leaf = b.fabric().port(h[5]).peer;
  EXPECT_EQ(UsedPKeys(sim.pkey_table(leaf)), (std::vector<uint16_t>{0x7FFF, 0x0001, 0x8002}));
  EXPECT_EQ(sim.port_info(leaf).partition_enforcement_inbound, 1);
  EXPECT_EQ(sim.port_info(leaf).partition_enforcement_outbound, 1);
  EXPECT_EQ(s.enforcement_sets, 0u);  // already on
  // Every host's table changed (0xFFFF became 0x7FFF at index 0, or the SM gained keys),
  // and so did every leaf port facing one and every switch's port 0 (now a limited member
  // of the default partition): one block each.
  EXPECT_EQ(UsedPKeys(sim.pkey_table(b.fabric().port_id(b.fabric().port(leaf).node, PortNum{0}))),
            std::vector<uint16_t>{0x7FFF});
  EXPECT_EQ(s.pkey_blocks_sent, 2u * h.size() + b.fabric().switch_count());
}

TEST(PartitionsSimTest, AReloadSendsOnlyTheBlocksThatChangedAndKeepsIndexes) {
  PartitionBed b({});
  ASSERT_TRUE(b.last().subnet_up);
  std::string conf = TwoPartitions(b);
  ASSERT_TRUE(b.Reload(Policy(ParsePartitionsText(conf))).subnet_up);
  const auto& h = b.hosts();
  std::vector<uint16_t> h5_before = b.sim().pkey_table(h[5]);
  // The same set again: nothing is read or sent, and enforcement stays.
  SweepStats same = b.Reload(Policy(ParsePartitionsText(conf)));
  EXPECT_EQ(same.pkey_blocks_sent, 0u);
  EXPECT_EQ(same.pkey_blocks_read, 0u);
  EXPECT_EQ(same.enforcement_sets, 0u);
  // Host 7 joins red: its table and its leaf port's change, nothing else.
  SweepStats grown = b.Reload(Policy(ParsePartitionsText(conf + "red : " + b.Guid(7) + "=full ;\n")));
  EXPECT_EQ(grown.pkey_blocks_sent, 2u);
  EXPECT_EQ(UsedPKeys(b.sim().pkey_table(h[7])), (std::vector<uint16_t>{0x7FFF, 0x8001}));
  EXPECT_EQ(b.sim().pkey_table(h[5]), h5_before);
  // Red goes away: host 5 keeps blue where it was.
  auto blue_only = ParsePartitionsText("blue=0x0002 : " + b.Guid(4) + "=full, " + b.Guid(5) + "=full, " +
                         b.Guid(6) + ", SELF=full ;\n");
  ASSERT_TRUE(b.Reload(Policy(blue_only)).subnet_up);
  std::vector<uint16_t> h5 = b.sim().pkey_table(h[5]);
  EXPECT_EQ(UsedPKeys(h5), (std::vector<uint16_t>{0x7FFF, 0x8002}));
  for (size_t i = 0; i < h5.size(); ++i)
    if (h5_before[i] == 0x8002) {
      EXPECT_EQ(h5[i], 0x8002) << "blue moved from index " << i;
    }
}

TEST(PartitionsSimTest, PartEnforceOffClearsTheSwitchPortsEnforcement) {
  PartitionBed b(Policy(ParsePartitionsText("red=0x0001 : ALL_CAS=full ;\n")));
  ASSERT_TRUE(b.last().subnet_up);
  PortId leaf = b.fabric().port(b.hosts()[3]).peer;
  EXPECT_EQ(b.sim().port_info(leaf).partition_enforcement_inbound, 1);
  PartitionPolicy off = Policy(ParsePartitionsText("red=0x0001 : ALL_CAS=full ;\n"));
  off.enforce = PartEnforce::kOff;
  SweepStats s = b.Reload(off);
  EXPECT_EQ(b.sim().port_info(leaf).partition_enforcement_inbound, 0);
  EXPECT_EQ(b.sim().port_info(leaf).partition_enforcement_outbound, 0);
  EXPECT_GT(s.enforcement_sets, 0u);
}

TEST(PartitionsSimTest, PathRecordsFlowOnlyWithinAPartitionAndNeverLimitedToLimited) {
  PartitionBed b({});
  ASSERT_TRUE(b.Reload(Policy(ParsePartitionsText(TwoPartitions(b)))).subnet_up);
  const auto& h = b.hosts();
  auto within = b.Paths(h[1], h[1], h[2]);
  ASSERT_EQ(within.size(), 1u);
  EXPECT_EQ(within[0].pkey, 0x8001);
  EXPECT_TRUE(b.Paths(h[1], h[1], h[4]).empty());  // red to blue
  EXPECT_TRUE(b.Paths(h[4], h[4], h[1]).empty());
  EXPECT_TRUE(b.Paths(h[7], h[7], h[1]).empty());  // host 7 is in neither
  // A limited member reaches a full one, with the limited member's key as the source's.
  auto limited = b.Paths(h[6], h[6], h[4]);
  ASSERT_EQ(limited.size(), 1u);
  EXPECT_EQ(limited[0].pkey, 0x0002);
  // Two limited members of blue (hosts 3 and 6) share nothing else: no path.
  EXPECT_TRUE(b.Paths(h[3], h[3], h[6]).empty());
  // A requested P_Key must be one both ends share as members that may talk.
  EXPECT_EQ(b.Paths(h[1], h[1], h[2], 0x8001).size(), 1u);
  EXPECT_TRUE(b.Paths(h[1], h[1], h[2], 0xFFFF).empty());  // both limited in the default
  EXPECT_TRUE(b.Paths(h[1], h[1], h[2], 0x8002).empty());
  // A third host cannot learn the path between two hosts it shares nothing with; the SA key
  // (opensm.conf sa_key, 1 by default) sees every pair.
  EXPECT_TRUE(b.Paths(h[7], h[1], h[2]).empty());
  EXPECT_EQ(b.Paths(h[7], h[1], h[2], std::nullopt, /*sm_key=*/1).size(), 1u);
  // Everyone reaches the SM (a full member of the default partition).
  EXPECT_EQ(b.Paths(h[7], h[7], h[0]).size(), 1u);
}

std::set<uint64_t> CaGuids(const std::vector<mad::NodeRecord>& rs) {
  std::set<uint64_t> out;
  for (const auto& r : rs)
    if (r.node_info.node_type == mad::NodeType::kCa) out.insert(r.node_info.port_guid);
  return out;
}

TEST(PartitionsSimTest, NodeRecordsOfCasAHostSharesNoPartitionWithAreHidden) {
  PartitionBed b({});
  ASSERT_TRUE(b.Reload(Policy(ParsePartitionsText(TwoPartitions(b)))).subnet_up);
  const auto& h = b.hosts();
  auto guid = [&](int i) { return b.fabric().port(h[i]).guid.value(); };
  auto seen = b.Table<mad::NodeRecord>(h[4]);
  EXPECT_EQ(CaGuids(seen), (std::set<uint64_t>{guid(0), guid(3), guid(4), guid(5), guid(6)}));
  size_t switches = 0;
  for (const auto& r : seen) switches += r.node_info.node_type == mad::NodeType::kSwitch;
  EXPECT_EQ(switches, b.fabric().switch_count());  // switches are everyone's
  EXPECT_EQ(CaGuids(b.Table<mad::NodeRecord>(h[7])), (std::set<uint64_t>{guid(0), guid(7)}));
  EXPECT_EQ(CaGuids(b.Table<mad::NodeRecord>(h[7], 0, {}, /*sm_key=*/1)).size(), h.size());
  // PortInfoRecords follow the same rule.
  mad::PortInfoRecord of1;
  of1.lid = b.sim().port_info(h[1]).lid;
  EXPECT_TRUE(b.Table<mad::PortInfoRecord>(h[4], /*lid*/ 1, of1).empty());
  EXPECT_EQ(b.Table<mad::PortInfoRecord>(h[2], 1, of1).size(), 1u);
}

// OpenSM filters GUIDInfoRecords (the requester shares a P_Key with the port) and
// LinkRecords (the requester shares one with both ends, and the ends with each other).
TEST(PartitionsSimTest, GuidInfoAndLinkRecordsOfCasAHostSharesNoPartitionWithAreHidden) {
  PartitionBed b({});
  ASSERT_TRUE(b.Reload(Policy(ParsePartitionsText(TwoPartitions(b)))).subnet_up);
  const auto& h = b.hosts();
  std::map<uint16_t, int> host_of_lid;
  for (size_t i = 0; i < h.size(); ++i) host_of_lid[b.sim().port_info(h[i]).lid] = int(i);
  // The hosts whose LID a table names, and how many records name a switch.
  auto hosts_in = [&](const std::vector<uint16_t>& lids, size_t* switch_lids) {
    std::set<int> out;
    *switch_lids = 0;
    for (uint16_t l : lids) {
      auto it = host_of_lid.find(l);
      if (it != host_of_lid.end()) {
        out.insert(it->second);
      } else {
        ++*switch_lids;
      }
    }
    return out;
  };
  auto guid_info_lids = [&](PortId from, uint64_t sm_key) {
    std::vector<uint16_t> lids;
    for (const auto& r : b.Table<mad::GuidInfoRecord>(from, 0, {}, sm_key)) lids.push_back(r.lid);
    return lids;
  };
  size_t switches = 0;
  EXPECT_EQ(hosts_in(guid_info_lids(h[7], 0), &switches), (std::set<int>{0, 7}));
  EXPECT_EQ(switches, b.fabric().switch_count());  // switches are everyone's
  EXPECT_EQ(hosts_in(guid_info_lids(h[4], 0), &switches), (std::set<int>{0, 3, 4, 5, 6}));
  EXPECT_EQ(hosts_in(guid_info_lids(h[7], 1), &switches).size(), h.size());  // the SA key

  auto link_lids = [&](PortId from, uint64_t sm_key) {
    std::vector<uint16_t> lids;
    for (const auto& r : b.Table<mad::LinkRecord>(from, 0, {}, sm_key)) {
      lids.push_back(r.from_lid);
      lids.push_back(r.to_lid);
    }
    return lids;
  };
  EXPECT_EQ(hosts_in(link_lids(h[7], 0), &switches), (std::set<int>{0, 7}));
  // Every cable between switches, both directions, and the two host cables both ways.
  size_t isl = 0;
  for (NodeId n = 0; n < b.fabric().node_count(); ++n) {
    const Node& node = b.fabric().node(n);
    for (uint8_t p = 1; node.is_switch() && p <= node.num_ports; ++p) {
      const Port& port = b.fabric().port(n, PortNum{p});
      if (port.connected() && b.fabric().node(b.fabric().port(port.peer).node).is_switch()) ++isl;
    }
  }
  EXPECT_EQ(b.Table<mad::LinkRecord>(h[7]).size(), isl + 4);
  EXPECT_EQ(hosts_in(link_lids(h[4], 0), &switches), (std::set<int>{0, 3, 4, 5, 6}));
  EXPECT_EQ(hosts_in(link_lids(h[7], 1), &switches).size(), h.size());
}

TEST(PartitionsSimTest, PKeyTableRecordsShowTheProgrammedTables) {
  PartitionBed b({});
  ASSERT_TRUE(b.Reload(Policy(ParsePartitionsText(TwoPartitions(b)))).subnet_up);
  const auto& h = b.hosts();
  mad::PKeyTableRecord of5;
  of5.lid = b.sim().port_info(h[5]).lid;
  auto rs = b.Table<mad::PKeyTableRecord>(h[4], 1, of5);
  ASSERT_EQ(rs.size(), 1u);
  EXPECT_EQ(rs[0].block_num, 0);
  std::vector<uint16_t> got(rs[0].pkey_table.pkey.begin(), rs[0].pkey_table.pkey.end());
  std::vector<uint16_t> held = b.sim().pkey_table(h[5]);
  held.resize(32);
  EXPECT_EQ(got, held);
  EXPECT_TRUE(b.Table<mad::PKeyTableRecord>(h[7], 1, of5).empty());
  // Every switch answers too: port 0, and the ports that enforce.
  mad::PKeyTableRecord of_leaf;
  NodeId leaf = b.fabric().port(b.fabric().port(h[5]).peer).node;
  of_leaf.lid = b.sim().port_info(b.fabric().port_id(leaf, PortNum{0})).lid;
  EXPECT_GE(b.Table<mad::PKeyTableRecord>(h[7], 1, of_leaf).size(), 3u);
}

TEST(PartitionsSimTest, ServiceRecordsAreSeenOnlyByHoldersOfTheirPKey) {
  PartitionBed b({});
  ASSERT_TRUE(b.Reload(Policy(ParsePartitionsText(TwoPartitions(b)))).subnet_up);
  const auto& h = b.hosts();
  mad::ServiceRecord r;
  r.service_id = 0x42;
  const uint64_t prefix = 0xfe80000000000000ull;
  const uint64_t guid = b.fabric().port(h[1]).guid.value();
  for (int i = 0; i < 8; ++i) {
    r.service_gid[i] = static_cast<uint8_t>(prefix >> (56 - 8 * i));
    r.service_gid[8 + i] = static_cast<uint8_t>(guid >> (56 - 8 * i));
  }
  r.service_p_key = 0x8001;
  r.service_lease = mad::kServiceLeaseInfinite;
  std::vector<uint8_t> buf(mad::Layout<mad::ServiceRecord>::kSize);
  mad::EncodeRecord(r, buf);
  namespace sr = mad::sr_comp;
  SaAnswer set = b.Ask(h[1], mad::method::kSet, mad::sa_attr::kServiceRecord,
                       sr::kServiceId | sr::kServiceGid | sr::kServicePKey, buf);
  ASSERT_EQ(set.status, 0);
  EXPECT_EQ(b.Table<mad::ServiceRecord>(h[2]).size(), 1u);
  EXPECT_EQ(b.Table<mad::ServiceRecord>(h[5]).size(), 1u);  // a limited member holds it too
  EXPECT_TRUE(b.Table<mad::ServiceRecord>(h[4]).empty());
  EXPECT_TRUE(b.Table<mad::ServiceRecord>(h[7]).empty());
  EXPECT_EQ(b.Table<mad::ServiceRecord>(h[7], 0, {}, /*sm_key=*/1).size(), 1u);
}

TEST(PartitionsSimTest, AServiceIsRegisteredOnlyByAMemberOfItsPartition) {
  PartitionBed b({});
  ASSERT_TRUE(b.Reload(Policy(ParsePartitionsText(TwoPartitions(b)))).subnet_up);
  const auto& h = b.hosts();
  namespace sr = mad::sr_comp;
  const uint64_t mask = sr::kServiceId | sr::kServiceGid | sr::kServicePKey;
  auto service_on = [&](PortId port, uint16_t pkey) {
    mad::ServiceRecord r;
    r.service_id = 0x43;
    const uint64_t prefix = 0xfe80000000000000ull;
    const uint64_t guid = b.fabric().port(port).guid.value();
    for (int i = 0; i < 8; ++i) {
      r.service_gid[i] = static_cast<uint8_t>(prefix >> (56 - 8 * i));
      r.service_gid[8 + i] = static_cast<uint8_t>(guid >> (56 - 8 * i));
    }
    r.service_p_key = pkey;
    r.service_lease = mad::kServiceLeaseInfinite;
    std::vector<uint8_t> buf(mad::Layout<mad::ServiceRecord>::kSize);
    mad::EncodeRecord(r, buf);
    return buf;
  };
  // Host 4 is in "blue" only: it cannot register into "red" (0x0001), for itself or for a
  // red host, nor can a red host register a service of host 4 into red.
  EXPECT_EQ(b.Ask(h[4], mad::method::kSet, mad::sa_attr::kServiceRecord, mask,
                  service_on(h[4], 0x8001)).status,
            mad::sa_status::kReqInvalid);
  EXPECT_EQ(b.Ask(h[4], mad::method::kSet, mad::sa_attr::kServiceRecord, mask,
                  service_on(h[1], 0x8001)).status,
            mad::sa_status::kReqInvalid);
  EXPECT_EQ(b.Ask(h[1], mad::method::kSet, mad::sa_attr::kServiceRecord, mask,
                  service_on(h[4], 0x8001)).status,
            mad::sa_status::kReqInvalid);
  EXPECT_EQ(b.sm().sa().counters().service_pkey_refused, 3u);
  EXPECT_TRUE(b.sm().sa().services().empty());
  // In its own partition it may.
  EXPECT_EQ(b.Ask(h[4], mad::method::kSet, mad::sa_attr::kServiceRecord, mask,
                  service_on(h[4], 0x8002)).status,
            0);
  EXPECT_EQ(b.sm().sa().services().size(), 1u);
}

// The P_Key a Set stores is the P_Key checked: clearing the ServiceP_Key bit does not slip a
// record of the requester's choosing into a partition it is not in; the SA stores the default
// partition's key then (as OpenSM's set method fills it) and checks that.
TEST(PartitionsSimTest, ClearingTheServicePKeyBitStoresTheDefaultKeyNotTheRecordsBytes) {
  PartitionBed b({});
  ASSERT_TRUE(b.Reload(Policy(ParsePartitionsText(TwoPartitions(b)))).subnet_up);
  const auto& h = b.hosts();
  namespace sr = mad::sr_comp;
  mad::ServiceRecord r;
  r.service_id = 0x44;
  const uint64_t prefix = 0xfe80000000000000ull;
  const uint64_t guid = b.fabric().port(h[4]).guid.value();
  for (int i = 0; i < 8; ++i) {
    r.service_gid[i] = static_cast<uint8_t>(prefix >> (56 - 8 * i));
    r.service_gid[8 + i] = static_cast<uint8_t>(guid >> (56 - 8 * i));
  }
  r.service_p_key = 0x8001;  // red: host 4 is blue only
  r.service_lease = mad::kServiceLeaseInfinite;
  std::vector<uint8_t> buf(mad::Layout<mad::ServiceRecord>::kSize);
  mad::EncodeRecord(r, buf);
  SaAnswer set = b.Ask(h[4], mad::method::kSet, mad::sa_attr::kServiceRecord,
                       sr::kServiceId | sr::kServiceGid, buf);
  // Host 4 is in the default partition: registered there, not in red.
  ASSERT_EQ(set.status, 0);
  ASSERT_EQ(set.records.size(), 1u);
  EXPECT_EQ(mad::DecodeRecord<mad::ServiceRecord>(set.records[0])->service_p_key, 0xFFFF);
  ASSERT_EQ(b.sm().sa().services().size(), 1u);
  EXPECT_EQ(b.sm().sa().services()[0].service_p_key, 0xFFFF);
  for (const auto& seen : b.Table<mad::ServiceRecord>(h[1])) EXPECT_NE(seen.service_p_key, 0x8001);
}

// partitions.conf's `ipoib` flag makes the partition's IPoIB broadcast group (P_Key with the
// full bit), `mgid=` a group of its own; a port joins and sees only groups of its partitions.
TEST(PartitionsSimTest, MulticastGroupsFollowThePartitionsAndTheirMembers) {
  PartitionBed b({});
  const auto& h = b.hosts();
  const mad::Gid default_bcast = IpoibBroadcastMgid(0xFFFF);
  const mad::Gid red_bcast = IpoibBroadcastMgid(0x8001);
  const mad::Gid green_group{0xff12a01b00000000ull, 0x0000000000000077ull};
  auto groups_seen_by = [&](PortId from) {
    std::set<mad::Gid> seen;
    for (const auto& r : b.Table<mad::McMemberRecord>(from)) seen.insert(r.mgid());
    return seen;
  };
  EXPECT_EQ(groups_seen_by(h[1]), std::set<mad::Gid>{default_bcast});
  const std::string conf = TwoPartitions(b) + "green=0x0003 : " + b.Guid(6) +
                           "=full, SELF=full, mgid=ff12:a01b::77,mtu=5 ;\n";
  ASSERT_TRUE(b.Reload(Policy(ParsePartitionsText(conf))).subnet_up);
  // No Default line with ipoib: no default broadcast group, as in OpenSM with a config.
  // (Host 0 is the SM's own port, which this bed cannot query from.)
  EXPECT_EQ(groups_seen_by(h[1]), std::set<mad::Gid>{red_bcast});
  EXPECT_EQ(groups_seen_by(h[5]), std::set<mad::Gid>{red_bcast});  // a limited member too
  EXPECT_EQ(groups_seen_by(h[6]), std::set<mad::Gid>{green_group});
  EXPECT_TRUE(groups_seen_by(h[4]).empty());
  EXPECT_TRUE(groups_seen_by(h[7]).empty());
  for (const auto& r : b.Table<mad::McMemberRecord>(h[1])) {
    EXPECT_EQ(r.p_key, 0x8001);
    EXPECT_EQ(r.q_key, 0x0B1Bu);
  }
  for (const auto& r : b.Table<mad::McMemberRecord>(h[6])) {
    EXPECT_EQ(r.p_key, 0x8003);
    EXPECT_EQ(r.mtu, 5);
  }
  EXPECT_EQ(b.sm().multicast().groups().count(default_bcast), 0u);

  auto join = [&](PortId from, PortId port, const mad::Gid& mgid) {
    mad::McMemberRecord r;
    r.set_mgid(mgid);
    r.set_port_gid({0xfe80000000000000ull, b.fabric().port(port).guid.value()});
    r.join_state = mad::join_state::kFull;
    std::vector<uint8_t> buf(mad::Layout<mad::McMemberRecord>::kSize);
    mad::EncodeRecord(r, buf);
    return b.Ask(from, mad::method::kSet, mad::sa_attr::kMcMemberRecord, mad::mcr_comp::kJoin,
                 buf)
        .status;
  };
  EXPECT_EQ(join(h[1], h[1], red_bcast), 0);
  EXPECT_EQ(join(h[4], h[4], red_bcast), mad::sa_status::kReqInvalid);  // blue only
  EXPECT_EQ(join(h[7], h[7], red_bcast), mad::sa_status::kReqInvalid);  // in no partition
  // A proxy join for a port the requester shares no partition with (host 1 red, host 4
  // blue; both limited in the default partition).
  EXPECT_EQ(join(h[1], h[4], red_bcast), mad::sa_status::kReqInvalid);
  EXPECT_EQ(b.sm().sa().counters().mc_partition_refusals, 1u);
  EXPECT_EQ(b.sm().multicast().counters().rejected_by_id.at("SA-MC-018"), 2u);

  // Red leaves the file: its group is no longer permanent but keeps its full member.
  ASSERT_TRUE(b.Reload(Policy(ParsePartitionsText(conf.substr(conf.find("blue="))))).subnet_up);
  const auto& groups = b.sm().multicast().groups();
  ASSERT_EQ(groups.count(red_bcast), 1u);
  EXPECT_FALSE(groups.at(red_bcast).permanent);
  EXPECT_EQ(groups.at(red_bcast).members.size(), 1u);
  EXPECT_TRUE(groups.at(green_group).permanent);
  EXPECT_EQ(groups.count(default_bcast), 0u);
}

}  // namespace
}  // namespace ibsm::sm
