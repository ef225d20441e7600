#include "sm/sa/sa_path.h"
#include "sm/testing/test_util.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <memory>
#include <optional>
#include <set>
#include <utility>

#include "fabric/generators.h"
#include "routing/routing_test_util.h"

namespace ibsm::sm {
namespace {

using mad::Gid;
using mad::PathRecord;
namespace pc = mad::path_comp;
namespace mc = mad::multipath_comp;

// A routed fabric and the snapshot over it. Held by pointer: the snapshot points into it.
struct Net {
  Fabric fabric;
  std::unique_ptr<routing::LidMap> lids;
  routing::RoutingTables tables;
  std::vector<PortId> hosts;  // every CA port, in NodeId order
  PathSnapshot snap;

  Gid gid(PortId p) const { return Gid{testutil::kDefaultPrefix, fabric.port(p).guid.value()}; }
  uint16_t lid(PortId p) const { return fabric.port(p).lid.value(); }
  routing::SwitchTable& table(NodeId n) { return tables.switches[tables.switch_index[n]]; }
  NodeId leaf(PortId host) const { return fabric.port(fabric.port(host).peer).node; }
};

std::unique_ptr<Net> Build(Result<Fabric> f, const char* engine, uint8_t lmc) {
  EXPECT_TRUE(f.ok());
  auto net = std::make_unique<Net>();
  net->fabric = std::move(*f);
  routing::testing::AssignLids(net->fabric, lmc);
  net->lids = std::make_unique<routing::LidMap>(net->fabric);
  routing::RoutingOptions o;
  o.lmc = lmc;
  auto t = routing::MakeEngine(engine)->Route(net->fabric, *net->lids, o);
  EXPECT_TRUE(t.ok()) << t.status().ToString();
  net->tables = std::move(*t);
  for (NodeId n = 0; n < net->fabric.node_count(); ++n)
    if (!net->fabric.node(n).is_switch()) net->hosts.push_back(net->fabric.port_id(n, PortNum(1)));
  net->snap.fabric = &net->fabric;
  net->snap.lids = net->lids.get();
  net->snap.tables = &net->tables;
  return net;
}

PathRecord Between(const Net& n, PortId src, PortId dst) {
  PathRecord r;
  r.sgid = mad::ToGidBytes(n.gid(src));
  r.dgid = mad::ToGidBytes(n.gid(dst));
  return r;
}
constexpr uint64_t kGids = pc::kSgid | pc::kDgid;

// The switch egress ports a packet from `src` to `dlid` leaves by, walked independently of
// sa_path.cc. Empty if it does not arrive.
std::vector<PortId> InterSwitchHops(const Net& n, PortId src, uint16_t dlid) {
  std::vector<PortId> out;
  NodeId cur = n.leaf(src);
  for (int i = 0; i < 64; ++i) {
    const uint8_t e = n.tables.table(cur)->lft[dlid];
    if (e == 0 || e == routing::kDropPort) return out;
    const PortId p = n.fabric.port_id(cur, PortNum(e));
    const NodeId next = n.fabric.port(n.fabric.port(p).peer).node;
    if (!n.fabric.node(next).is_switch()) return out;
    out.push_back(p);
    cur = next;
  }
  return {};
}

// Inter-switch links the record's two directions use.
std::set<PortId> LinksOf(const Net& n, const PathRecord& r) {
  const PortId src = n.lids->owner(Lid(r.slid)), dst = n.lids->owner(Lid(r.dlid));
  std::set<PortId> s;
  for (PortId p : InterSwitchHops(n, src, r.dlid)) s.insert(p);
  for (PortId p : InterSwitchHops(n, dst, r.slid)) s.insert(p);
  return s;
}

size_t SharedLinks(const Net& n, const std::vector<PathRecord>& recs) {
  std::multiset<PortId> all;
  std::set<PortId> distinct;
  for (const auto& r : recs)
    for (PortId p : LinksOf(n, r)) {
      all.insert(p);
      distinct.insert(p);
    }
  return all.size() - distinct.size();
}

std::vector<PathRecord> MustQuery(const Net& n, const PathRecord& req, uint64_t comp,
                                  PortId requester = kNoPort, PathQueryOptions o = {}) {
  auto r = QueryPaths(n.snap, req, comp, requester, o);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? *r : std::vector<PathRecord>{};
}

TEST(SaPathTest, RecordBetweenTwoHostsCarriesTheirGidsLidsAndTheRouteFigures) {
  auto n = Build(FatTree2(8), "minhop", 0);
  const PortId a = n->hosts[0], b = n->hosts[31];
  auto recs = MustQuery(*n, Between(*n, a, b), kGids);
  ASSERT_EQ(recs.size(), 1u);
  const PathRecord& r = recs[0];
  EXPECT_EQ(mad::ToGid(r.sgid), n->gid(a));
  EXPECT_EQ(mad::ToGid(r.dgid), n->gid(b));
  EXPECT_EQ(r.slid, n->lid(a));
  EXPECT_EQ(r.dlid, n->lid(b));
  EXPECT_EQ(r.mtu, mad::mtu::k4096);
  EXPECT_EQ(r.mtu_selector, mad::selector::kExactly);
  EXPECT_EQ(r.rate, mad::rate::k100);  // 4x EDR
  EXPECT_EQ(r.rate_selector, mad::selector::kExactly);
  EXPECT_EQ(r.packet_life_time, 18);
  EXPECT_EQ(r.hop_limit, 0);
  EXPECT_EQ(r.sl, 0);
  EXPECT_EQ(r.pkey, 0xFFFF);
  EXPECT_EQ(r.reversible, 1);
  EXPECT_EQ(r.numb_path, 0);
  EXPECT_EQ(r.preference, 0);
}

// The QoS policy's qos-ulps (docs/qos.md, "QoS policy file"), in OpenSM's order: a request's
// own SL stands only where the policy agrees; without one the policy's SL wins over the
// partition's sl=; without a policy the partition's sl= applies.
TEST(SaPathTest, TheQosPolicyGivesTheSlInOpenSmsOrder) {
  auto n = Build(FatTree2(8), "minhop", 0);
  const PortId a = n->hosts[0], b = n->hosts[31], c = n->hosts[5];
  auto parsed = conf::ParseQosPolicy(
      fmt::format("qos-ulps\n"
                  "  default : 1\n"
                  "  srp, target-port-guid {:#x} : 5\n"
                  "  any, service-id 0x1000-0x1fff : 6\n"
                  "  ipoib, pkey 0x8002 : 7\n"
                  "end-qos-ulps\n",
                  n->fabric.port(b).guid.value()),
      "qos-policy.conf");
  ASSERT_TRUE(parsed.ok()) << parsed.errors[0].ToString();
  n->snap.partition_sl = [](uint16_t) -> uint8_t { return 3; };
  auto sl_of = [&](const PathRecord& req, uint64_t comp) -> int {
    auto recs = MustQuery(*n, req, comp | kGids);
    return recs.empty() ? -1 : recs[0].sl;
  };
  // Without a policy: the partition's sl=.
  EXPECT_EQ(sl_of(Between(*n, a, c), 0), 3);
  n->snap.qos_policy = &parsed.policy;
  // The target GUID rule, the service-ID rule (only when the mask names the service ID),
  // the default where nothing matches: each over the partition's sl=.
  EXPECT_EQ(sl_of(Between(*n, a, b), 0), 5);
  PathRecord sid = Between(*n, a, c);
  sid.service_id = 0x1234;
  EXPECT_EQ(sl_of(sid, pc::kServiceId), 6);
  EXPECT_EQ(sl_of(sid, 0), 1);
  EXPECT_EQ(sl_of(Between(*n, a, c), 0), 1);
  // A request's SL that the policy agrees with stands; one it does not has no path.
  PathRecord want = Between(*n, a, b);
  want.sl = 5;
  EXPECT_EQ(sl_of(want, pc::kSl), 5);
  want.sl = 4;
  EXPECT_EQ(sl_of(want, pc::kSl), -1);
  // The policy applies to MultiPathRecords too.
  mad::MultiPathRequest m;
  m.sgids = {n->gid(a)};
  m.dgids = {n->gid(b)};
  m.record.sgid_count = 1;
  m.record.dgid_count = 1;
  auto mr = QueryMultiPaths(n->snap, m, mc::kSgidCount | mc::kDgidCount, a);
  ASSERT_TRUE(mr.ok()) << mr.status().ToString();
  ASSERT_FALSE(mr->empty());
  EXPECT_EQ((*mr)[0].sl, 5);
}

// qos TRUE (docs/qos.md): an SL that a hop's SL2VL table maps to VL 15 is not valid on that
// path, as OpenSM's PathRecord has it. The tables are keyed by (output port, input port)
// on a switch and are the port's own on a CA; one not read drops nothing.
TEST(SaPathTest, AnSlThatSomeHopMapsToVl15GivesNoPath) {
  auto n = Build(FatTree2(8), "minhop", 0);
  const PortId a = n->hosts[0], b = n->hosts[31];
  QosMap tables;
  n->snap.sl2vl = &tables;
  n->snap.partition_sl = [](uint16_t) -> uint8_t { return 2; };
  auto sl_of = [&](PortId src, PortId dst, std::optional<uint8_t> want) -> int {
    PathRecord req = Between(*n, src, dst);
    uint64_t comp = kGids;
    if (want) req.sl = *want, comp |= pc::kSl;
    auto recs = MustQuery(*n, req, comp);
    return recs.empty() ? -1 : recs[0].sl;
  };
  auto reversible = [&](PortId src, PortId dst) {
    auto recs = MustQuery(*n, Between(*n, src, dst), kGids);
    return recs.empty() ? -1 : recs[0].reversible;
  };
  // No tables read: nothing is dropped.
  EXPECT_EQ(sl_of(a, b, std::nullopt), 2);
  EXPECT_EQ(sl_of(a, b, 7), 7);

  // The first switch on a -> b, table (in: the port from a, out: its egress to b's LID),
  // maps SL 2 and SL 7 to VL 15.
  const NodeId leaf = n->leaf(a);
  const uint8_t in = n->fabric.port(n->fabric.port(a).peer).num.value();
  const uint8_t out = n->tables.table(leaf)->lft[n->lid(b)];
  auto q = std::make_shared<NodeQos>();
  q->ports.resize(size_t{n->fabric.node(leaf).num_ports} + 1);
  q->ports[out].sl2vl.resize(size_t{n->fabric.node(leaf).num_ports} + 1);
  mad::SlToVlTable t;
  for (size_t sl = 0; sl < 16; ++sl) t.vl[sl] = static_cast<uint8_t>(sl & 7);
  t.vl[2] = 15;
  t.vl[7] = 15;
  q->ports[out].sl2vl[in] = t;
  tables[n->fabric.node(leaf).guid] = q;
  EXPECT_EQ(sl_of(a, b, std::nullopt), -1) << "the partition's SL 2 leads to VL 15";
  EXPECT_EQ(sl_of(a, b, 7), -1) << "the requested SL 7 leads to VL 15";
  EXPECT_EQ(sl_of(a, b, 3), 3);
  // The other direction crosses that switch by other ports: its own path keeps every SL,
  // but SL 2 does not come back, so the path is not reversible.
  EXPECT_EQ(sl_of(b, a, std::nullopt), 2);
  EXPECT_EQ(reversible(b, a), 0);
  // Without qos the tables are not consulted (OpenSM checks them only with qos TRUE).
  n->snap.sl2vl = nullptr;
  EXPECT_EQ(sl_of(a, b, std::nullopt), 2);
  EXPECT_EQ(reversible(b, a), 1);
  n->snap.sl2vl = &tables;

  // The source CA port's own table counts too: every SL to VL 15 there, no path at all.
  auto h = std::make_shared<NodeQos>();
  h->ports.resize(2);
  h->ports[1].sl2vl.resize(1);
  mad::SlToVlTable all15;
  all15.vl.fill(15);
  h->ports[1].sl2vl[0] = all15;
  const PortId c = n->hosts[5];
  tables[n->fabric.node(n->fabric.port(c).node).guid] = h;
  EXPECT_EQ(sl_of(c, b, std::nullopt), -1);
  EXPECT_EQ(sl_of(c, b, 3), -1);
}

TEST(SaPathTest, TheSlowestLinkOnTheRouteSetsTheRateAndLinksOffTheRouteDoNot) {
  auto n = Build(FatTree2(8), "minhop", 0);
  const PortId a = n->hosts[0], b = n->hosts[31];
  const auto hops = InterSwitchHops(*n, a, n->lid(b));
  ASSERT_EQ(hops.size(), 2u);  // leaf -> spine -> leaf
  // Another uplink of the same leaf, off this route, drops to SDR: no change.
  const NodeId leaf = n->fabric.port(hops[0]).node;
  for (uint8_t p = 5; p <= 8; ++p) {
    const PortId other = n->fabric.port_id(leaf, PortNum(p));
    if (other != hops[0]) {
      n->fabric.mutable_port(other).speed = LinkSpeed::kSdr;
      break;
    }
  }
  EXPECT_EQ(MustQuery(*n, Between(*n, a, b), kGids)[0].rate, mad::rate::k100);
  // The spine's down link on the route runs 1x: 25 Gb/s.
  n->fabric.mutable_port(hops[1]).width = LinkWidth::k1x;
  EXPECT_EQ(MustQuery(*n, Between(*n, a, b), kGids)[0].rate, mad::rate::k25);
  // The destination's own link at 1x QDR is slower still: 10 Gb/s.
  n->fabric.mutable_port(b).speed = LinkSpeed::kQdr;
  n->fabric.mutable_port(b).width = LinkWidth::k1x;
  EXPECT_EQ(MustQuery(*n, Between(*n, a, b), kGids)[0].rate, mad::rate::k10);
}

TEST(SaPathTest, TheSmallestMtuOnTheRouteSetsTheMtu) {
  auto n = Build(FatTree2(8), "minhop", 0);
  const PortId a = n->hosts[0], b = n->hosts[31];
  const auto hops = InterSwitchHops(*n, a, n->lid(b));
  n->snap.port_mtu.assign(n->fabric.port_count(), 0);
  n->snap.port_mtu[n->fabric.port(hops[0]).peer] = mad::mtu::k2048;  // spine's ingress
  n->snap.port_mtu[n->hosts[5]] = mad::mtu::k256;                    // not on the route
  EXPECT_EQ(MustQuery(*n, Between(*n, a, b), kGids)[0].mtu, mad::mtu::k2048);
  n->snap.default_mtu = mad::mtu::k1024;  // ports the sweep did not record
  EXPECT_EQ(MustQuery(*n, Between(*n, a, b), kGids)[0].mtu, mad::mtu::k1024);
}

TEST(SaPathTest, SelectorsAdjustOrDisqualifyAsIbaTable207Says) {
  auto n = Build(FatTree2(8), "minhop", 0);  // path: MTU 4096, 100 Gb/s, lifetime 18
  const PathRecord base = Between(*n, n->hosts[0], n->hosts[31]);
  auto with = [&](uint64_t bits, auto set) {
    PathRecord r = base;
    set(r);
    return MustQuery(*n, r, kGids | bits);
  };
  const uint64_t kMtuBits = pc::kMtuSelector | pc::kMtu;
  const uint64_t kRateBits = pc::kRateSelector | pc::kRate;
  const uint64_t kPltBits = pc::kPacketLifeTimeSelector | pc::kPacketLifeTime;
  using namespace mad::selector;

  EXPECT_TRUE(with(kMtuBits, [](PathRecord& r) {
                r.mtu_selector = kGreaterThan;
                r.mtu = 5;
              }).empty());
  EXPECT_EQ(with(kMtuBits,
                 [](PathRecord& r) {
                   r.mtu_selector = kGreaterThan;
                   r.mtu = 4;
                 })[0]
                .mtu,
            5);
  EXPECT_EQ(with(kMtuBits,
                 [](PathRecord& r) {
                   r.mtu_selector = kLessThan;
                   r.mtu = 5;
                 })[0]
                .mtu,
            4);
  EXPECT_EQ(with(kMtuBits,
                 [](PathRecord& r) {
                   r.mtu_selector = kExactly;
                   r.mtu = 3;
                 })[0]
                .mtu,
            3);
  EXPECT_EQ(with(kMtuBits,
                 [](PathRecord& r) {
                   r.mtu_selector = kLargest;
                   r.mtu = 1;
                 })[0]
                .mtu,
            5);
  // A selector without its value is ignored (OpenSM).
  EXPECT_EQ(with(pc::kMtuSelector,
                 [](PathRecord& r) {
                   r.mtu_selector = kGreaterThan;
                   r.mtu = 5;
                 })
                .size(),
            1u);

  EXPECT_TRUE(with(kRateBits, [](PathRecord& r) {
                r.rate_selector = kGreaterThan;
                r.rate = mad::rate::k100;
              }).empty());
  EXPECT_EQ(with(kRateBits,
                 [](PathRecord& r) {
                   r.rate_selector = kGreaterThan;
                   r.rate = mad::rate::k56;
                 })[0]
                .rate,
            mad::rate::k100);
  EXPECT_EQ(with(kRateBits,
                 [](PathRecord& r) {
                   r.rate_selector = kLessThan;
                   r.rate = mad::rate::k100;
                 })[0]
                .rate,
            mad::rate::k80);
  EXPECT_TRUE(with(kRateBits, [](PathRecord& r) {
                r.rate_selector = kExactly;
                r.rate = mad::rate::k40;
              }).empty());
  EXPECT_EQ(with(kRateBits,
                 [](PathRecord& r) {
                   r.rate_selector = kExactly;
                   r.rate = mad::rate::k100;
                 })
                .size(),
            1u);

  EXPECT_TRUE(with(kPltBits, [](PathRecord& r) {
                r.packet_life_time_selector = kGreaterThan;
                r.packet_life_time = 18;
              }).empty());
  EXPECT_EQ(with(kPltBits,
                 [](PathRecord& r) {
                   r.packet_life_time_selector = kLessThan;
                   r.packet_life_time = 10;
                 })[0]
                .packet_life_time,
            9);
  EXPECT_EQ(with(kPltBits,
                 [](PathRecord& r) {
                   r.packet_life_time_selector = kExactly;
                   r.packet_life_time = 12;
                 })[0]
                .packet_life_time,
            12);
  EXPECT_TRUE(with(kPltBits, [](PathRecord& r) {
                r.packet_life_time_selector = kExactly;
                r.packet_life_time = 20;
              }).empty());
}

TEST(SaPathTest, MalformedQueriesAreRejectedWithTheStatusTheSaSends) {
  auto n = Build(FatTree2(8), "minhop", 0);
  const PathRecord ok = Between(*n, n->hosts[0], n->hosts[1]);
  auto status = [&](PathRecord r, uint64_t comp, PortId requester = kNoPort) {
    auto q = QueryPaths(n->snap, r, comp, requester);
    EXPECT_FALSE(q.ok());
    return q.ok() ? uint16_t{0} : SaStatusForPathError(q.status());
  };
  PathRecord r = ok;
  r.mtu_selector = mad::selector::kExactly;
  r.mtu = 7;
  EXPECT_EQ(status(r, kGids | pc::kMtuSelector | pc::kMtu), 0x0200);  // ERR_REQ_INVALID
  r = ok;
  r.rate_selector = mad::selector::kExactly;
  r.rate = 1;
  EXPECT_EQ(status(r, kGids | pc::kRateSelector | pc::kRate), 0x0200);
  EXPECT_EQ(status(ok, kGids | pc::kServiceIdMsb), 0x0600);  // insufficient components
  r = ok;
  r.sgid = mad::ToGidBytes({testutil::kDefaultPrefix, 0xDEADBEEF});
  EXPECT_EQ(status(r, kGids), 0x0500);  // ERR_REQ_INVALID_GID
  r = ok;
  r.sgid = mad::ToGidBytes({0xfec0000000000000ull, n->gid(n->hosts[0]).guid});
  EXPECT_EQ(status(r, kGids), 0x0500);  // another subnet's prefix
  r = ok;
  r.slid = n->lid(n->hosts[7]);  // SGID names host 0
  EXPECT_EQ(status(r, kGids | pc::kSlid), 0x0200);
  r = ok;
  r.dgid = mad::ToGidBytes({0xff12401bffff0000ull, 1});
  EXPECT_EQ(status(r, kGids), 0x0200);                // multicast: the SA's groups answer that
  EXPECT_EQ(status(ok, pc::kDgid, kNoPort), 0x0200);  // no source at all

  PathSnapshot empty;
  auto q = QueryPaths(empty, ok, kGids, kNoPort);
  ASSERT_FALSE(q.ok());
  EXPECT_EQ(q.status().code(), StatusCode::kUnavailable);
}

TEST(SaPathTest, AnUnknownLidOrAnUnreachableDestinationGivesNoRecord) {
  auto n = Build(FatTree2(8), "minhop", 0);
  const PortId a = n->hosts[0], b = n->hosts[31];
  PathRecord r = Between(*n, a, b);
  r.dlid = 0xB000;
  EXPECT_TRUE(MustQuery(*n, r, pc::kSgid | pc::kDlid).empty());
  // The source leaf drops the destination's LID.
  n->table(n->leaf(a)).lft[n->lid(b)] = routing::kDropPort;
  EXPECT_TRUE(MustQuery(*n, Between(*n, a, b), kGids).empty());
  // A host whose cable is gone.
  auto n2 = Build(FatTree2(8), "minhop", 0);
  n2->fabric.Disconnect(n2->hosts[31]);
  EXPECT_TRUE(MustQuery(*n2, Between(*n2, n2->hosts[0], n2->hosts[31]), kGids).empty());
}

TEST(SaPathTest, ReversibleSaysWhetherTheLftsRouteBack) {
  auto n = Build(FatTree2(8), "minhop", 0);
  const PortId a = n->hosts[0], b = n->hosts[31];
  n->table(n->leaf(b)).lft[n->lid(a)] = routing::kDropPort;  // b cannot answer a
  auto recs = MustQuery(*n, Between(*n, a, b), kGids);
  ASSERT_EQ(recs.size(), 1u);
  EXPECT_EQ(recs[0].reversible, 0);
  PathRecord r = Between(*n, a, b);
  r.reversible = 1;
  EXPECT_TRUE(MustQuery(*n, r, kGids | pc::kReversible).empty());
  r.reversible = 0;  // 0 is "don't care"
  EXPECT_EQ(MustQuery(*n, r, kGids | pc::kReversible).size(), 1u);
}

TEST(SaPathTest, AMissingSourceIsTheRequesterAndAMissingDestinationIsEveryPort) {
  auto n = Build(FatTree2(8), "minhop", 0);
  const PortId me = n->hosts[3], b = n->hosts[20];
  PathRecord r;
  r.dlid = n->lid(b);
  auto recs = MustQuery(*n, r, pc::kDlid, me);
  ASSERT_EQ(recs.size(), 1u);
  EXPECT_EQ(recs[0].slid, n->lid(me));
  EXPECT_EQ(mad::ToGid(recs[0].sgid), n->gid(me));

  PathQueryOptions world;
  world.all_sources_when_unspecified = true;
  EXPECT_EQ(MustQuery(*n, r, pc::kDlid, me, world).size(), n->lids->end_ports().size());

  // From one host to everything: every end port (hosts and switches), itself included.
  r = PathRecord{};
  r.sgid = mad::ToGidBytes(n->gid(me));
  recs = MustQuery(*n, r, pc::kSgid);
  EXPECT_EQ(recs.size(), n->lids->end_ports().size());
  for (const auto& x : recs) {
    if (x.dlid == n->lid(me)) {
      EXPECT_EQ(x.packet_life_time, 0) << "loopback";
    }
  }

  PathQueryOptions get;
  get.get = true;
  EXPECT_EQ(MustQuery(*n, r, pc::kSgid, kNoPort, get).size(), 1u);
}

TEST(SaPathTest, LmcTwoGivesSixteenDistinctLidPairsMostDisjointFirst) {
  auto n = Build(FatTree3(8), "ftree", 2);
  const PortId a = n->hosts[0], b = n->hosts[127];  // different pods
  auto recs = MustQuery(*n, Between(*n, a, b), kGids);
  ASSERT_EQ(recs.size(), 16u);
  std::set<std::pair<uint16_t, uint16_t>> pairs;
  for (const auto& r : recs) {
    EXPECT_GE(r.slid, n->lid(a));
    EXPECT_LT(r.slid, n->lid(a) + 4);
    EXPECT_GE(r.dlid, n->lid(b));
    EXPECT_LT(r.dlid, n->lid(b) + 4);
    pairs.insert({r.slid, r.dlid});
  }
  EXPECT_EQ(pairs.size(), 16u);

  // The first four use every SLID and every DLID once and share no inter-switch link in
  // either direction; OpenSM's first four (the diagonal) are no better.
  const std::vector<PathRecord> first(recs.begin(), recs.begin() + 4);
  std::set<uint16_t> slids, dlids;
  for (const auto& r : first) {
    slids.insert(r.slid);
    dlids.insert(r.dlid);
    EXPECT_EQ(r.preference, 0);
  }
  EXPECT_EQ(slids.size(), 4u);
  EXPECT_EQ(dlids.size(), 4u);
  EXPECT_EQ(SharedLinks(*n, first), 0u);
  std::vector<PathRecord> diagonal;
  for (uint16_t i = 0; i < 4; ++i) {
    PathRecord d;
    d.slid = static_cast<uint16_t>(n->lid(a) + i);
    d.dlid = static_cast<uint16_t>(n->lid(b) + i);
    diagonal.push_back(d);
  }
  EXPECT_LE(SharedLinks(*n, first), SharedLinks(*n, diagonal));
  // Later records necessarily reuse links and say so.
  EXPECT_GT(recs.back().preference, 0);

  // Any LID of the range names the port: a DLID pins the destination LID.
  PathRecord r = Between(*n, a, b);
  r.dlid = static_cast<uint16_t>(n->lid(b) + 2);
  auto pinned = MustQuery(*n, r, kGids | pc::kDlid);
  ASSERT_EQ(pinned.size(), 4u);
  for (const auto& x : pinned) EXPECT_EQ(x.dlid, n->lid(b) + 2);
}

TEST(SaPathTest, MinhopWithLmcStillPutsTheMostDisjointPairsFirst) {
  auto n = Build(FatTree2(8), "minhop", 2);
  const PortId a = n->hosts[0], b = n->hosts[31];
  auto recs = MustQuery(*n, Between(*n, a, b), kGids);
  ASSERT_EQ(recs.size(), 16u);
  const std::vector<PathRecord> first(recs.begin(), recs.begin() + 4);
  std::vector<PathRecord> diagonal;
  for (uint16_t i = 0; i < 4; ++i) {
    PathRecord d;
    d.slid = static_cast<uint16_t>(n->lid(a) + i);
    d.dlid = static_cast<uint16_t>(n->lid(b) + i);
    diagonal.push_back(d);
  }
  EXPECT_LE(SharedLinks(*n, first), SharedLinks(*n, diagonal));
}

// Where OpenSM's LID-offset order loses: the source leaf sends DLID base+2 up the same
// link as base+0, so OpenSM's third record (base+2, base+2) repeats the first one's
// forward route. The snapshot's own routes show it, and the third record avoids it.
TEST(SaPathTest, RoutesThatCoincideAreOrderedAfterRoutesThatDoNot) {
  auto n = Build(FatTree2(8), "minhop", 2);
  const PortId a = n->hosts[0], b = n->hosts[31];
  auto& lft = n->table(n->leaf(a)).lft;
  lft[n->lid(b) + 2] = lft[n->lid(b)];
  PathRecord r = Between(*n, a, b);
  r.numb_path = 3;
  auto recs = MustQuery(*n, r, kGids | pc::kNumbPath);
  ASSERT_EQ(recs.size(), 3u);
  std::vector<PathRecord> opensm;
  for (uint16_t i = 0; i < 3; ++i) {
    PathRecord d;
    d.slid = static_cast<uint16_t>(n->lid(a) + i);
    d.dlid = static_cast<uint16_t>(n->lid(b) + i);
    opensm.push_back(d);
  }
  EXPECT_GT(SharedLinks(*n, opensm), 0u);
  EXPECT_EQ(SharedLinks(*n, recs), 0u);
  for (const auto& x : recs) EXPECT_EQ(x.preference, 0);
}

TEST(SaPathTest, NumbPathLimitsAGetTableToTheBestPaths) {
  auto n = Build(FatTree3(8), "ftree", 2);
  const PathRecord base = Between(*n, n->hosts[0], n->hosts[127]);
  auto all = MustQuery(*n, base, kGids);
  PathRecord r = base;
  r.numb_path = 3;
  auto three = MustQuery(*n, r, kGids | pc::kNumbPath);
  ASSERT_EQ(three.size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(three[i].slid, all[i].slid);
    EXPECT_EQ(three[i].dlid, all[i].dlid);
  }
  PathQueryOptions get;
  get.get = true;
  auto one = MustQuery(*n, base, kGids, kNoPort, get);
  ASSERT_EQ(one.size(), 1u);
  EXPECT_EQ(one[0].slid, all[0].slid);
  EXPECT_EQ(one[0].dlid, all[0].dlid);
}

TEST(SaPathTest, ThePartitionHookDecidesThePKey) {
  auto n = Build(FatTree2(8), "minhop", 0);
  const PortId a = n->hosts[0], b = n->hosts[31], c = n->hosts[9];
  PathRecord r = Between(*n, a, b);
  r.pkey = 0x1234;
  EXPECT_TRUE(MustQuery(*n, r, kGids | pc::kPKey).empty());  // only the default partition
  r.pkey = 0x7FFF;
  EXPECT_EQ(MustQuery(*n, r, kGids | pc::kPKey)[0].pkey, 0x7FFF);

  n->snap.partitions = [c](PortId, PortId src, PortId dst,
                           std::optional<uint16_t> want) -> std::optional<uint16_t> {
    if (src == c || dst == c) return std::nullopt;
    if (want && *want != 0x8001) return std::nullopt;
    return 0x8001;
  };
  EXPECT_EQ(MustQuery(*n, Between(*n, a, b), kGids)[0].pkey, 0x8001);
  EXPECT_TRUE(MustQuery(*n, Between(*n, a, c), kGids).empty());
}

mad::MultiPathRequest TwoByTwo(const Net& n, PortId s0, PortId s1, PortId d0, PortId d1) {
  mad::MultiPathRequest m;
  m.sgids = {n.gid(s0), n.gid(s1)};
  m.dgids = {n.gid(d0), n.gid(d1)};
  m.record.sgid_count = 2;
  m.record.dgid_count = 2;
  return m;
}
constexpr uint64_t kCounts = mc::kSgidCount | mc::kDgidCount;

TEST(SaPathTest, MultiPathWithNumbPathTwoGivesTwoIndependentPathsForApm) {
  auto n = Build(FatTree3(8), "ftree", 2);
  const PortId s0 = n->hosts[0], s1 = n->hosts[1], d0 = n->hosts[126], d1 = n->hosts[127];
  auto m = TwoByTwo(*n, s0, s1, d0, d1);
  m.record.numb_path = 2;
  auto r = QueryMultiPaths(n->snap, m, kCounts | mc::kNumbPath, s0);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->size(), 2u);
  const PathRecord& p = (*r)[0];
  const PathRecord& q = (*r)[1];
  EXPECT_NE(n->lids->owner(Lid(p.slid)), n->lids->owner(Lid(q.slid)));
  EXPECT_NE(n->lids->owner(Lid(p.dlid)), n->lids->owner(Lid(q.dlid)));
  EXPECT_EQ(SharedLinks(*n, *r), 0u);
  EXPECT_EQ(q.preference, 0);

  // Without NumbPath: every LID pair of the four port pairs (OpenSM caps at 127).
  auto all = QueryMultiPaths(n->snap, m, kCounts, s0);
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(all->size(), 4u * 16u);
}

TEST(SaPathTest, MultiPathQueriesWithoutGidListsAreRejected) {
  auto n = Build(FatTree2(8), "minhop", 0);
  auto m = TwoByTwo(*n, n->hosts[0], n->hosts[1], n->hosts[2], n->hosts[3]);
  auto r = QueryMultiPaths(n->snap, m, mc::kSgidCount, kNoPort);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(SaStatusForPathError(r.status()), 0x0600);
  m.dgids.clear();
  r = QueryMultiPaths(n->snap, m, kCounts, kNoPort);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(SaStatusForPathError(r.status()), 0x0200);
  m = TwoByTwo(*n, n->hosts[0], n->hosts[1], n->hosts[2], n->hosts[3]);
  m.dgids[1].guid = 0x1234;
  r = QueryMultiPaths(n->snap, m, kCounts, kNoPort);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(SaStatusForPathError(r.status()), 0x0500);
}

// `count` GIDs of `ports`, taken in turn.
std::vector<Gid> GidsOf(const Net& n, const std::vector<PortId>& ports, size_t count) {
  std::vector<Gid> out;
  for (size_t i = 0; i < count; ++i) out.push_back(n.gid(ports[i % ports.size()]));
  return out;
}

mad::MultiPathRequest Lists(std::vector<Gid> sgids, std::vector<Gid> dgids) {
  mad::MultiPathRequest m;
  m.record.sgid_count = static_cast<uint8_t>(sgids.size());
  m.record.dgid_count = static_cast<uint8_t>(dgids.size());
  m.sgids = std::move(sgids);
  m.dgids = std::move(dgids);
  return m;
}

TEST(SaPathTest, AMultiPathRequestOverThePortPairCapIsRefusedBeforeAnyRouteIsWalked) {
  auto n = Build(FatTree2(24), "minhop", 0);  // 288 hosts
  ASSERT_GE(n->hosts.size(), size_t{255});
  const std::vector<PortId> first(n->hosts.begin(), n->hosts.begin() + 255);
  const std::vector<PortId> last(n->hosts.end() - 255, n->hosts.end());
  // The largest request the wire allows: 255 distinct SGIDs x 255 distinct DGIDs.
  MultiPathStats stats;
  auto r = QueryMultiPaths(n->snap, Lists(GidsOf(*n, first, 255), GidsOf(*n, last, 255)),
                           kCounts, n->hosts[0], &stats);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(SaStatusForPathError(r.status()), 0x0100);  // ERR_NO_RESOURCES
  EXPECT_EQ(stats.port_pairs, 255u * 255u);
  EXPECT_EQ(stats.candidates, 0u);
  // Just over the cap (9 x 8 = 72 pairs) is refused too; at the cap (8 x 8) it is answered.
  r = QueryMultiPaths(n->snap, Lists(GidsOf(*n, first, 9), GidsOf(*n, last, 8)), kCounts,
                      n->hosts[0], &stats);
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(stats.candidates, 0u);
  r = QueryMultiPaths(n->snap, Lists(GidsOf(*n, first, 8), GidsOf(*n, last, 8)), kCounts,
                      n->hosts[0], &stats);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(stats.port_pairs, kMultiPathMaxPortPairs);
  EXPECT_EQ(r->size(), kMultiPathMaxPortPairs);  // LMC 0: one path per pair
}

TEST(SaPathTest, AGidListedManyTimesCountsOnceAndTheRequestIsAnswered) {
  auto n = Build(FatTree2(24), "minhop", 0);
  const PortId a = n->hosts[0], b = n->hosts[1], c = n->hosts[200];
  MultiPathStats stats;
  // 255 copies of one source and 255 of one destination: one pair, one path.
  auto r = QueryMultiPaths(n->snap, Lists(GidsOf(*n, {a}, 255), GidsOf(*n, {c}, 255)), kCounts,
                           a, &stats);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(stats.port_pairs, 1u);
  EXPECT_EQ(stats.candidates, 1u);
  ASSERT_EQ(r->size(), 1u);
  EXPECT_EQ((*r)[0].slid, n->lid(a));
  EXPECT_EQ((*r)[0].dlid, n->lid(c));
  // Repeats interleaved with other ports keep the first-seen order of the pairs.
  r = QueryMultiPaths(n->snap,
                      Lists({n->gid(b), n->gid(a), n->gid(b), n->gid(a)}, GidsOf(*n, {c}, 3)),
                      kCounts, a, &stats);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(stats.port_pairs, 2u);
  ASSERT_EQ(r->size(), 2u);
}

TEST(SaPathTest, AMultiPathRequestAtThePortPairCapRoutesAtMostTheCandidateCap) {
  // LMC 3: 8 LIDs a port, 64 LID pairs a port pair, 64 x 64 = 4,096 untrimmed.
  auto n = Build(FatTree3(8), "ftree", 3);
  const std::vector<PortId> src(n->hosts.begin(), n->hosts.begin() + 8);
  const std::vector<PortId> dst(n->hosts.end() - 8, n->hosts.end());
  MultiPathStats stats;
  auto r = QueryMultiPaths(n->snap, Lists(GidsOf(*n, src, 8), GidsOf(*n, dst, 8)), kCounts,
                           src[0], &stats);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(stats.port_pairs, 64u);
  EXPECT_EQ(stats.candidates, kMultiPathMaxCandidates);
  EXPECT_TRUE(stats.trimmed);
  EXPECT_EQ(r->size(), 127u);  // NumbPath's default still fills
  std::set<std::pair<uint16_t, uint16_t>> pairs;
  for (const PathRecord& p : *r) pairs.insert({p.slid, p.dlid});
  EXPECT_EQ(pairs.size(), r->size());

  // One pair at LMC 3 is far below the cap: every one of its 64 LID pairs is routed.
  r = QueryMultiPaths(n->snap, Lists({n->gid(src[0])}, {n->gid(dst[0])}), kCounts, src[0],
                      &stats);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(stats.candidates, 64u);
  EXPECT_FALSE(stats.trimmed);
  EXPECT_EQ(r->size(), 64u);
}

TEST(SaPathTest, RateCodesFollowWidthTimesSpeed) {
  EXPECT_EQ(RateCode(LinkWidth::k1x, LinkSpeed::kSdr), mad::rate::k2_5);
  EXPECT_EQ(RateCode(LinkWidth::k4x, LinkSpeed::kQdr), mad::rate::k40);
  EXPECT_EQ(RateCode(LinkWidth::k4x, LinkSpeed::kFdr10), mad::rate::k40);
  EXPECT_EQ(RateCode(LinkWidth::k4x, LinkSpeed::kFdr), mad::rate::k56);
  EXPECT_EQ(RateCode(LinkWidth::k12x, LinkSpeed::kQdr), mad::rate::k120);
  EXPECT_EQ(RateCode(LinkWidth::k4x, LinkSpeed::kEdr), mad::rate::k100);
  EXPECT_EQ(RateCode(LinkWidth::k2x, LinkSpeed::kHdr), mad::rate::k100);
  EXPECT_EQ(RateCode(LinkWidth::k4x, LinkSpeed::kHdr), mad::rate::k200);
  EXPECT_EQ(RateCode(LinkWidth::k4x, LinkSpeed::kNdr), mad::rate::k400);
  EXPECT_EQ(RateCode(LinkWidth::k8x, LinkSpeed::kNdr), mad::rate::k800);
  EXPECT_EQ(RateCode(LinkWidth::k4x, LinkSpeed::kXdr), mad::rate::k800);
  EXPECT_EQ(RateCode(LinkWidth::k12x, LinkSpeed::kXdr), mad::rate::k1200);  // no 2400 code
}

}  // namespace
}  // namespace ibsm::sm
