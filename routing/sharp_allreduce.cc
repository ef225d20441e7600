#include "routing/sharp_allreduce.h"

#include <algorithm>

namespace ibsm::routing {
namespace {

// Adds `bytes` to every port the flow from end port `src` to end port `dst` leaves by.
bool Route(const Fabric& f, const RoutingTables& tables, PortId src, PortId dst, double bytes,
           AllreduceLoad* load) {
  ++load->flows;
  const Lid lid = f.port(dst).lid;
  const Port& s = f.port(src);
  if (!s.connected() || lid.value() == 0) return ++load->unroutable, false;
  load->bytes_out[src] += bytes;
  PortId at = s.peer;
  for (int hop = 0; hop < 64; ++hop) {
    if (at == dst) return true;
    const NodeId n = f.port(at).node;
    const SwitchTable* t = tables.table(n);
    if (!t || lid.value() >= t->lft.size()) break;
    const uint8_t out = t->lft[lid.value()];
    if (out == 0 || out > f.node(n).num_ports) break;
    const PortId op = f.port_id(n, PortNum{out});
    if (!f.port(op).connected()) break;
    load->bytes_out[op] += bytes;
    at = f.port(op).peer;
  }
  ++load->unroutable;
  return false;
}

void Summarise(const Fabric& f, const std::vector<PortId>& hosts, AllreduceLoad* load) {
  for (double b : load->bytes_out) load->max_link_bytes = std::max(load->max_link_bytes, b);
  double sum = 0;
  for (PortId h : hosts) {
    const double b = load->bytes_out[h] + load->bytes_out[f.port(h).peer];
    sum += b;
    load->max_host_link_bytes = std::max(load->max_host_link_bytes, b);
  }
  load->mean_host_link_bytes = hosts.empty() ? 0 : sum / static_cast<double>(hosts.size());
}

PortId AnPort(const Fabric& f, NodeId an) { return f.port_id(an, PortNum{1}); }

}  // namespace

AllreduceLoad SharpAllreduceLoad(const Fabric& f, const RoutingTables& tables,
                                 const SharpTree& tree, double bytes) {
  AllreduceLoad load;
  load.bytes_out.assign(f.port_count(), 0);
  std::vector<PortId> hosts;
  for (const SharpTreeNode& n : tree.nodes) {
    const PortId me = AnPort(f, n.an);
    for (PortId h : n.hosts) {
      Route(f, tables, h, me, bytes, &load);
      Route(f, tables, me, h, bytes, &load);
      hosts.push_back(h);
    }
    if (n.parent >= 0) {
      const PortId up = AnPort(f, tree.nodes[n.parent].an);
      Route(f, tables, me, up, bytes, &load);
      Route(f, tables, up, me, bytes, &load);
    }
  }
  Summarise(f, hosts, &load);
  return load;
}

AllreduceLoad RingAllreduceLoad(const Fabric& f, const RoutingTables& tables,
                                const std::vector<PortId>& hosts, double bytes) {
  AllreduceLoad load;
  load.bytes_out.assign(f.port_count(), 0);
  const size_t n = hosts.size();
  if (n < 2) return load;
  const double per = 2.0 * static_cast<double>(n - 1) / static_cast<double>(n) * bytes;
  for (size_t i = 0; i < n; ++i) Route(f, tables, hosts[i], hosts[(i + 1) % n], per, &load);
  Summarise(f, hosts, &load);
  return load;
}

}  // namespace ibsm::routing
