#include "fabric/topology_writer.h"

#include <fmt/format.h>

namespace ibsm {

namespace {

std::string Clean(std::string_view s) {
  std::string out(s);
  for (char& c : out) {
    if (c == '=' || c == '"' || c == '#' || c == '@' || static_cast<unsigned char>(c) < 0x20 ||
        c == 0x7f) {
      c = '_';
    }
  }
  return out;
}

// The LID shown for the node a port belongs to: a switch's port 0 LID, else the port's own.
uint16_t ShownLid(const Fabric& f, const Port& p) {
  const Node& n = f.node(p.node);
  return n.is_switch() ? f.port(n.first_port).lid.value() : p.lid.value();
}

void AppendRate(std::string& out, const Port& p) {
  out += LinkWidthName(p.width);
  out += LinkSpeedName(p.speed);
}

}  // namespace

std::string WriteTopology(const Fabric& f) {
  std::vector<NodeId> order;
  order.reserve(f.node_count());
  NodeId first_ca = kNoNode;
  for (NodeId i = 0; i < f.node_count(); ++i) {
    if (f.node(i).kind == NodeKind::kCa) {
      first_ca = i;
      break;
    }
  }
  if (first_ca != kNoNode) order.push_back(first_ca);
  for (NodeId i = 0; i < f.node_count(); ++i)
    if (f.node(i).is_switch()) order.push_back(i);
  for (NodeId i = 0; i < f.node_count(); ++i)
    if (!f.node(i).is_switch() && i != first_ca) order.push_back(i);

  std::string out;
  out.reserve(f.port_count() * 64);
  out += fmt::format("# ibsm topology: {} switches, {} CAs, {} links\n\n", f.switch_count(),
                     f.ca_count(), f.link_count());
  uint16_t devid = 0;
  auto it = std::back_inserter(out);
  for (NodeId id : order) {
    const Node& n = f.node(id);
    if (n.vendor_id != 0) fmt::format_to(it, "vendid={:#x}\n", n.vendor_id);
    if (n.device_id != devid) {
      fmt::format_to(it, "devid={:#x}\n", n.device_id);
      devid = n.device_id;
    }
    if (n.system_image_guid != n.guid) {
      fmt::format_to(it, "sysimgguid={:#018x}\n", n.system_image_guid.value());
    }
    const uint64_t g = n.guid.value();
    const std::string name = Clean(n.name);
    if (n.is_switch()) {
      const Port& p0 = f.port(n.first_port);
      fmt::format_to(it, "switchguid={:#018x}({:x})\n", g, g);
      fmt::format_to(it, "Switch\t{} \"{}\"\t\t# \"{}\" base port 0 lid {} lmc {}\n",
                     n.num_ports, name, Clean(n.description), p0.lid.value(), p0.lmc);
      for (uint32_t pn = 1; pn <= n.num_ports; ++pn) {
        const Port& p = f.port(n.first_port + pn);
        if (!p.connected()) continue;
        const Port& r = f.port(p.peer);
        const Node& rn = f.node(r.node);
        if (rn.is_switch()) {
          fmt::format_to(it, "[{}]\t\"{}\"[{}]\t\t# \"{}\" lid {} ", pn, Clean(rn.name),
                         r.num.value(), Clean(rn.description), ShownLid(f, r));
        } else {  // ibnetdiscover prints the remote port GUID for CAs
          fmt::format_to(it, "[{}]\t\"{}\"[{}]({:x}) \t\t# \"{}\" lid {} ", pn, Clean(rn.name),
                         r.num.value(), r.guid.value(), Clean(rn.description), ShownLid(f, r));
        }
        AppendRate(out, p);
        out += '\n';
      }
    } else {
      fmt::format_to(it, "{}={:#018x}\n", n.kind == NodeKind::kRouter ? "rtguid" : "caguid", g);
      fmt::format_to(it, "{}\t{} \"{}\"\t\t# \"{}\"\n", n.kind == NodeKind::kRouter ? "Rt" : "Ca",
                     n.num_ports, name, Clean(n.description));
      for (uint32_t pn = 1; pn <= n.num_ports; ++pn) {
        const Port& p = f.port(n.first_port + pn);
        if (!p.connected()) continue;
        const Port& r = f.port(p.peer);
        const Node& rn = f.node(r.node);
        fmt::format_to(it, "[{}]({:x}) \t\"{}\"[{}]\t\t# lid {} lmc {} \"{}\" lid {} ", pn,
                       p.guid.value(), Clean(rn.name), r.num.value(), p.lid.value(), p.lmc,
                       Clean(rn.description), ShownLid(f, r));
        AppendRate(out, p);
        out += '\n';
      }
    }
    out += '\n';
  }
  return out;
}

}  // namespace ibsm
