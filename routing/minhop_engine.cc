#include "routing/minhop_engine.h"

#include <algorithm>
#include <atomic>
#include <thread>

namespace ibsm::routing {
namespace {

// Where one end port attaches to the switch fabric.
struct Destination {
  PortId port = kNoPort;
  SwitchIdx sw = kNoSwitch;  // switch that delivers it; kNoSwitch if none (cable to a CA/none)
  uint8_t exit_port = 0;     // egress port on `sw` (0 for the switch's own port 0)
  bool is_switch = false;
  uint16_t base_lid = 0;
  uint32_t lid_count = 0;
};

std::vector<Destination> Destinations(const Fabric& fabric, const LidMap& lids,
                                      const HopTable& hops) {
  std::vector<Destination> out;
  out.reserve(lids.end_ports().size());
  for (PortId p : lids.end_ports()) {
    const Port& port = fabric.port(p);
    Destination d;
    d.port = p;
    d.base_lid = port.lid.value();
    d.lid_count = 1u << (port.lmc & 7);
    d.is_switch = fabric.node(port.node).is_switch();
    if (d.is_switch) {
      d.sw = hops.index(port.node);
      d.exit_port = 0;
    } else if (port.connected()) {
      const Port& peer = fabric.port(port.peer);
      d.sw = hops.index(peer.node);
      d.exit_port = peer.num.value();
    }
    out.push_back(d);
  }
  return out;
}

// The remote end of each egress port of one switch, for the LMC disjointness rule.
struct Remote {
  Guid node{0};
  Guid system_image{0};
};

// For the extra LIDs of an LMC range: three tiers, each "fewest routes, then lowest port" --
// a port towards a system image no earlier LID of this destination uses, else towards an
// unused node, else any.
uint8_t PickDisjoint(const uint8_t* begin, const uint8_t* end, const std::vector<uint32_t>& routes,
                     const std::vector<Remote>& remote, const std::vector<Guid>& used_systems,
                     const std::vector<Guid>& used_nodes) {
  uint8_t best_sys = 0, best_node = 0, best_any = 0;
  uint32_t least_sys = UINT32_MAX, least_node = UINT32_MAX, least_any = UINT32_MAX;
  for (const uint8_t* c = begin; c != end; ++c) {
    const uint8_t p = *c;
    const uint32_t n = routes[p];
    const Remote& r = remote[p];
    if (std::find(used_systems.begin(), used_systems.end(), r.system_image) ==
        used_systems.end()) {
      if (n < least_sys) least_sys = n, best_sys = p;
    } else if (std::find(used_nodes.begin(), used_nodes.end(), r.node) == used_nodes.end()) {
      if (n < least_node) least_node = n, best_node = p;
    }
    if (n < least_any) least_any = n, best_any = p;
  }
  return best_sys ? best_sys : best_node ? best_node : best_any;
}

void RouteSwitch(const Fabric& fabric, const LidMap& lids, const HopTable& hops,
                 const std::vector<Destination>& dests, SwitchIdx s, SwitchTable& table) {
  const Node& node = fabric.node(hops.node(s));
  table.node = hops.node(s);
  table.lft.assign(static_cast<size_t>(lids.max_lid()) + 1, kDropPort);

  std::vector<uint32_t> routes(node.num_ports + 1u, 0);
  std::vector<Remote> remote(node.num_ports + 1u);
  for (const HopTable::Link* l = hops.links_begin(s); l != hops.links_end(s); ++l) {
    const Node& r = fabric.node(hops.node(l->remote));
    // A zero SystemImageGUID means "not part of a larger system": the node is its own image.
    remote[l->port] = Remote{r.guid, r.system_image_guid.value() ? r.system_image_guid : r.guid};
  }

  std::vector<uint32_t> cand_start;
  std::vector<uint8_t> cand_ports;
  hops.AllMinHopPorts(s, cand_start, cand_ports);
  std::vector<Guid> used_systems, used_nodes;
  for (const Destination& d : dests) {
    if (d.sw == kNoSwitch) continue;
    if (d.sw == s) {
      for (uint32_t i = 0; i < d.lid_count; ++i) {
        const uint32_t lid = d.base_lid + i;
        if (lid < table.lft.size() && lids.owner(Lid(static_cast<uint16_t>(lid))) == d.port)
          table.lft[lid] = d.exit_port;
      }
      continue;
    }
    const uint8_t* cand_begin = cand_ports.data() + cand_start[d.sw];
    const uint8_t* cand_end = cand_ports.data() + cand_start[d.sw + 1];
    if (cand_begin == cand_end) continue;
    used_systems.clear();
    used_nodes.clear();
    for (uint32_t i = 0; i < d.lid_count; ++i) {
      const uint32_t lid = d.base_lid + i;
      if (lid >= table.lft.size() || lids.owner(Lid(static_cast<uint16_t>(lid))) != d.port)
        continue;
      uint8_t port = 0;
      if (i == 0) {
        // First LID of the port: the plain rule, fewest routes then lowest port.
        uint32_t least = UINT32_MAX;
        for (const uint8_t* c = cand_begin; c != cand_end; ++c)
          if (routes[*c] < least) least = routes[*c], port = *c;
      } else {
        port = PickDisjoint(cand_begin, cand_end, routes, remote, used_systems, used_nodes);
      }
      table.lft[lid] = port;
      if (!d.is_switch || i == 0) ++routes[port];
      if (d.lid_count > 1) {
        used_systems.push_back(remote[port].system_image);
        used_nodes.push_back(remote[port].node);
      }
    }
  }
}

}  // namespace

RoutingTables RouteMinHop(const Fabric& fabric, const LidMap& lids, const HopTable& hops,
                          unsigned threads) {
  RoutingTables out;
  out.engine = "minhop";
  const size_t S = hops.switch_count();
  out.switches.resize(S);
  out.switch_index.assign(fabric.node_count(), SIZE_MAX);
  for (SwitchIdx s = 0; s < S; ++s) out.switch_index[hops.node(s)] = s;

  const std::vector<Destination> dests = Destinations(fabric, lids, hops);
  // Switches are claimed one at a time from a shared cursor; a switch's table depends only on
  // the switch, so the schedule cannot change the result.
  std::atomic<size_t> next{0};
  auto worker = [&] {
    for (size_t s; (s = next.fetch_add(1, std::memory_order_relaxed)) < S;)
      RouteSwitch(fabric, lids, hops, dests, static_cast<SwitchIdx>(s), out.switches[s]);
  };
  const size_t n_threads = std::clamp<size_t>(threads == 0 ? 1 : threads, 1, std::max<size_t>(S, 1));
  std::vector<std::thread> pool;
  for (size_t i = 1; i < n_threads; ++i) pool.emplace_back(worker);
  worker();
  for (auto& th : pool) th.join();
  return out;
}

Result<RoutingTables> MinHopEngine::Route(const Fabric& fabric, const LidMap& lids,
                                          const RoutingOptions& options) const {
  const HopTable hops = HopTable::Build(fabric, options.threads);
  return RouteMinHop(fabric, lids, hops, options.threads);
}

std::unique_ptr<RoutingEngine> MakeMinHop() { return std::make_unique<MinHopEngine>(); }

}  // namespace ibsm::routing
