// QoS setup (qos TRUE) read back from the strict simulator: every port's VLArb and SL2VL
// tables and VLHighLimit end as OpenSM's QoS manager writes them for the port's class
// (sm/sweep/qos_program.h, docs/qos.md), devices that do not answer the tables are not asked, the
// SA returns the tables as programmed, and a second sweep writes nothing.
#include <algorithm>
#include <optional>

#include <boost/asio/io_context.hpp>
#include <gtest/gtest.h>

#include "conf/qos_config.h"
#include "fabric/generators.h"
#include "sim/sim_transport.h"
#include "sim/simulator.h"
#include "sm/testing/sim_test_util.h"
#include "sm/sweep/subnet_manager.h"

namespace ibsm::sm {
namespace {

using simcheck::FirstCaPort;
using namespace std::chrono_literals;

struct QosRun {
  SweepStats first, last;
  std::shared_ptr<const QosMap> sa_tables;
};

QosRun SweepWithQos(const Fabric& f, sim::Simulator& sim, SubnetManagerOptions o, int sweeps) {
  boost::asio::io_context io;
  SystemClock clock;
  sim::SimTransport transport(io, sim, FirstCaPort(f));
  SubnetManager sm(io, transport, clock, nullptr, o);
  QosRun run;
  int seen = 0;
  sm.Start([&](const SweepStats& s) {
    if (seen == 0) run.first = s;
    run.last = s;
    if (++seen >= sweeps) {
      if (auto snap = sm.sa().snapshot()) run.sa_tables = snap->qos;
      sm.Stop();
      io.stop();
    } else {
      sm.RequestHeavySweep("test");
    }
  });
  io.run();
  return run;
}

SubnetManagerOptions QosOptions(const std::string& conf_text) {
  SubnetManagerOptions o;
  o.send.timeout = 50ms;
  o.send.retries = 3;
  o.sweep_interval = 0s;
  o.routing_engine = "ftree";
  auto c = conf::ParseConfig(conf_text, "test.conf");
  EXPECT_TRUE(c.ok()) << c.status().ToString();
  o.qos = c->config.qos;
  o.qos_levels = conf::BuildQosLevels(c->config);
  return o;
}

uint8_t Mask(const mad::PortInfo& pi) {
  return static_cast<uint8_t>((1u << (pi.operational_vls - 1)) - 1);
}

void ExpectSl2Vl(const mad::SlToVlTable& have, const conf::QosLevel& l, const mad::PortInfo& out) {
  for (size_t sl = 0; sl < 16; ++sl) {
    const uint8_t want = l.sl2vl[sl] == 15 ? 15 : (l.sl2vl[sl] & Mask(out));
    EXPECT_EQ(have.vl[sl], want) << "SL " << sl;
  }
}

void ExpectVlArb(const sim::Simulator& sim, PortId p, const conf::QosLevel& l) {
  const mad::PortInfo& pi = sim.port_info(p);
  for (size_t b : {size_t{0}, size_t{2}}) {
    const mad::VlArbitrationTable t = sim.vl_arb(p, b);
    const auto& src = b == 0 ? l.vlarb_low : l.vlarb_high;
    const size_t cap = b == 0 ? pi.vl_arb_low_cap : pi.vl_arb_high_cap;
    for (size_t i = 0; i < cap && i < 32; ++i) {
      EXPECT_EQ(t.vl[i], src[i].vl & Mask(pi)) << "block " << b + 1 << " entry " << i;
      EXPECT_EQ(t.weight[i], src[i].weight) << "block " << b + 1 << " entry " << i;
    }
  }
}

constexpr const char* kQosConf =
    "qos TRUE\n"
    "qos_high_limit 4\n"
    "qos_ca_high_limit 9\n"
    "qos_vlarb_high 0:8,1:16\n"
    "qos_swe_vlarb_low 0:1,1:2,2:3,3:4,4:5,5:6,6:7,7:8\n"
    "qos_ca_vlarb_low 0:64,1:32,2:16,9:8\n"
    "qos_swe_sl2vl 0,1,2,3,4,5,6,7,0,1,2,3,4,5,6,15\n"
    "qos_ca_sl2vl 1,1,1,1,2,2,2,2,3,3,3,3,12,13,14,15\n";

TEST(QosProgramSimTest, EveryTableAndHighLimitEndsAsItsClassSaysAndASecondSweepWritesNone) {
  auto f = FatTree3(4);
  ASSERT_TRUE(f.ok());
  sim::Simulator sim(*f);  // strict: tables at their power-on values, some CAs silent on them
  const SubnetManagerOptions o = QosOptions(kQosConf);
  QosRun run = SweepWithQos(*f, sim, o, /*sweeps=*/2);
  ASSERT_TRUE(run.first.subnet_up);
  ASSERT_TRUE(run.last.subnet_up);
  EXPECT_GT(run.first.qos_sets, 0u);
  EXPECT_EQ(run.first.qos_sets_failed, 0u);
  EXPECT_EQ(run.last.qos_sets, 0u) << "the second sweep found every table as it wants it";
  EXPECT_EQ(run.last.portinfo_sets, 0u) << "VLHighLimit included";
  const conf::QosLevels& l = o.qos_levels;

  size_t switch_tables = 0, ca_tables = 0, silent = 0;
  for (NodeId n = 0; n < f->node_count(); ++n) {
    const Node& node = f->node(n);
    SCOPED_TRACE(ToString(node.guid));
    if (node.is_switch()) {
      for (uint8_t out = 1; out <= node.num_ports; ++out) {
        const PortId op = f->port_id(n, PortNum{out});
        if (!f->port(op).connected()) continue;
        const mad::PortInfo& pi = sim.port_info(op);
        EXPECT_EQ(pi.vl_high_limit, l.swe.high_limit);
        // The strict profile's switches silent on VLArb are not asked (nor written).
        if (sim.quirks(n).vlarb == sim::OptionalAnswer::kAnswered) ExpectVlArb(sim, op, l.swe);
        for (uint8_t in = 0; in <= node.num_ports; ++in) {
          SCOPED_TRACE("in " + std::to_string(in) + " out " + std::to_string(out));
          ExpectSl2Vl(sim.sl_to_vl(f->port_id(n, PortNum{in}), out), l.swe, pi);
          ++switch_tables;
        }
      }
      continue;
    }
    const PortId p = f->port_id(n, PortNum{1});
    if (!f->port(p).connected()) continue;
    const mad::PortInfo& pi = sim.port_info(p);
    EXPECT_EQ(pi.vl_high_limit, l.ca.high_limit);
    const sim::DeviceQuirks& q = sim.quirks(n);
    if (q.sl2vl != sim::OptionalAnswer::kAnswered) {
      // Not asked: the table is still the power-on one.
      const mad::SlToVlTable t = sim.sl_to_vl(p, 0);
      EXPECT_EQ(t.vl[8], 8);
      ++silent;
      continue;
    }
    ExpectSl2Vl(sim.sl_to_vl(p, 0), l.ca, pi);
    if (q.vlarb == sim::OptionalAnswer::kAnswered) ExpectVlArb(sim, p, l.ca);
    ++ca_tables;
  }
  EXPECT_GT(switch_tables, 100u);
  EXPECT_GT(ca_tables, 4u);
  EXPECT_GT(silent, 0u) << "the strict profile has CAs without the tables";

  // The SA answers what was written: every switch table the SM holds is the simulator's.
  ASSERT_TRUE(run.sa_tables);
  size_t checked = 0;
  for (NodeId n = 0; n < f->node_count(); ++n) {
    const Node& node = f->node(n);
    auto it = run.sa_tables->find(node.guid);
    if (!node.is_switch() || it == run.sa_tables->end()) continue;
    for (uint8_t out = 1; out <= node.num_ports; ++out) {
      if (out >= it->second->ports.size()) break;
      const auto& by_in = it->second->ports[out].sl2vl;
      for (uint8_t in = 0; in < by_in.size(); ++in) {
        if (!by_in[in]) continue;
        EXPECT_EQ(by_in[in]->vl, sim.sl_to_vl(f->port_id(n, PortNum{in}), out).vl);
        ++checked;
      }
    }
  }
  EXPECT_GT(checked, 100u);
}

// Two switches cabled twice, the SM's host on switch A, a dual-port CA with port 1 on A and
// port 2 on B, and two more hosts. Discovery reaches the dual-port CA by one port; the other
// answers SL2VL and VLArb only through the switch cabled to it (IBA 14.2.5.8-9: a CA applies
// them to the port an SMP arrives on, whatever the modifier says).
Result<Fabric> DualPortCaFabric(uint64_t dual_guid) {
  Fabric f;
  IBSM_ASSIGN_OR_RETURN(NodeId a, f.AddNode(NodeKind::kSwitch, Guid{0x100}, 8, "swA", "swA"));
  IBSM_ASSIGN_OR_RETURN(NodeId b, f.AddNode(NodeKind::kSwitch, Guid{0x200}, 8, "swB", "swB"));
  IBSM_RETURN_IF_ERROR(f.SetPortGuid(f.port_id(a, PortNum{0}), Guid{0x100}));
  IBSM_RETURN_IF_ERROR(f.SetPortGuid(f.port_id(b, PortNum{0}), Guid{0x200}));
  IBSM_RETURN_IF_ERROR(f.Connect(a, PortNum{7}, b, PortNum{7}));
  IBSM_RETURN_IF_ERROR(f.Connect(a, PortNum{8}, b, PortNum{8}));
  auto host = [&](uint64_t guid, NodeId sw, uint8_t port) -> Status {
    IBSM_ASSIGN_OR_RETURN(NodeId h, f.AddNode(NodeKind::kCa, Guid{guid}, 1, "h", "h"));
    IBSM_RETURN_IF_ERROR(f.SetPortGuid(f.port_id(h, PortNum{1}), Guid{guid + 1}));
    return f.Connect(sw, PortNum{port}, h, PortNum{1});
  };
  IBSM_RETURN_IF_ERROR(host(0x1000, a, 1));  // the SM's (the first CA)
  IBSM_ASSIGN_OR_RETURN(NodeId d, f.AddNode(NodeKind::kCa, Guid{dual_guid}, 2, "dual", "dual"));
  IBSM_RETURN_IF_ERROR(f.SetPortGuid(f.port_id(d, PortNum{1}), Guid{dual_guid + 1}));
  IBSM_RETURN_IF_ERROR(f.SetPortGuid(f.port_id(d, PortNum{2}), Guid{dual_guid + 2}));
  IBSM_RETURN_IF_ERROR(f.Connect(a, PortNum{2}, d, PortNum{1}));
  IBSM_RETURN_IF_ERROR(f.Connect(b, PortNum{2}, d, PortNum{2}));
  IBSM_RETURN_IF_ERROR(host(0x3000, a, 3));
  IBSM_RETURN_IF_ERROR(host(0x4000, b, 3));
  return f;
}

TEST(QosProgramSimTest, EveryPortOfAMultiPortCaGetsItsTablesThroughItsOwnSwitch) {
  // A dual-port CA the strict profile lets answer both tables (a silent one proves nothing).
  std::optional<Fabric> fabric;
  NodeId dual = kNoNode;
  for (uint64_t g = 0x2000; g < 0x2000 + 64 * 0x10 && dual == kNoNode; g += 0x10) {
    auto f = DualPortCaFabric(g);
    ASSERT_TRUE(f.ok()) << f.status().ToString();
    sim::Simulator probe(*f);
    NodeId d = *f->FindNode(Guid{g});
    if (probe.quirks(d).sl2vl == sim::OptionalAnswer::kAnswered &&
        probe.quirks(d).vlarb == sim::OptionalAnswer::kAnswered) {
      fabric = std::move(*f);
      dual = d;
    }
  }
  ASSERT_NE(dual, kNoNode);
  const Fabric& f = *fabric;
  sim::Simulator sim(f);
  const SubnetManagerOptions o = QosOptions(kQosConf);
  QosRun run = SweepWithQos(f, sim, o, /*sweeps=*/2);
  ASSERT_TRUE(run.first.subnet_up);
  EXPECT_EQ(run.first.qos_sets_failed, 0u);
  EXPECT_EQ(run.last.qos_sets, 0u) << "both ports' tables read back as written";
  const conf::QosLevels& l = o.qos_levels;
  ASSERT_TRUE(run.sa_tables);
  auto held = run.sa_tables->find(f.node(dual).guid);
  ASSERT_NE(held, run.sa_tables->end());
  for (uint8_t num : {uint8_t{1}, uint8_t{2}}) {
    SCOPED_TRACE("dual-port CA port " + std::to_string(num));
    const PortId p = f.port_id(dual, PortNum{num});
    const mad::PortInfo& pi = sim.port_info(p);
    // Its own PortInfo Sets, too, arrive on it (a CA refuses a Set of another port).
    EXPECT_NE(pi.lid, 0);
    EXPECT_EQ(pi.port_state, 4) << "ACTIVE";
    EXPECT_EQ(pi.vl_high_limit, l.ca.high_limit);
    ExpectSl2Vl(sim.sl_to_vl(p, 0), l.ca, pi);
    ExpectVlArb(sim, p, l.ca);
    // The SA holds each port's own table, as the port answers it.
    ASSERT_LT(num, held->second->ports.size());
    const PortQos& pq = held->second->ports[num];
    ASSERT_EQ(pq.sl2vl.size(), 1u);
    ASSERT_TRUE(pq.sl2vl[0]);
    EXPECT_EQ(pq.sl2vl[0]->vl, sim.sl_to_vl(p, 0).vl);
    ASSERT_TRUE(pq.vlarb[0]);
    // As the port answers a Get: its VLArbLowCap entries (past them, a block reads 0).
    const size_t cap = std::min<size_t>(pi.vl_arb_low_cap, mad::kVlArbBlockSize);
    const mad::VlArbitrationTable have = sim.vl_arb(p, 0);
    for (size_t i = 0; i < cap; ++i) {
      EXPECT_EQ(pq.vlarb[0]->vl[i], have.vl[i]) << "entry " << i;
      EXPECT_EQ(pq.vlarb[0]->weight[i], have.weight[i]) << "entry " << i;
    }
  }
}

TEST(QosProgramSimTest, WithoutQosNoTableIsWritten) {
  auto f = FatTree3(4);
  ASSERT_TRUE(f.ok());
  sim::Simulator sim(*f);
  QosRun run = SweepWithQos(*f, sim, QosOptions("qos FALSE\nqos_sl2vl 0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0\n"), 1);
  ASSERT_TRUE(run.first.subnet_up);
  EXPECT_EQ(run.first.qos_sets, 0u);
  for (NodeId n = 0; n < f->node_count(); ++n) {
    if (!f->node(n).is_switch()) continue;
    EXPECT_EQ(sim.sl_to_vl(f->port_id(n, PortNum{1}), 2).vl[8], 8) << "power-on table kept";
    EXPECT_EQ(sim.port_info(f->port_id(n, PortNum{1})).vl_high_limit, 0);
  }
}

}  // namespace
}  // namespace ibsm::sm
