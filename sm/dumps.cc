#include "sm/dumps.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <iterator>

#include <fmt/format.h>

namespace ibsm::sm {
namespace {

std::vector<NodeId> ByGuid(const Fabric& f) {
  std::vector<NodeId> order(f.node_count());
  for (NodeId i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(),
            [&](NodeId a, NodeId b) { return f.node(a).guid < f.node(b).guid; });
  return order;
}

std::string_view TypeTag(NodeKind k) {
  switch (k) {
    case NodeKind::kSwitch: return "SW";
    case NodeKind::kCa: return "CA";
    case NodeKind::kRouter: return "Rt";
  }
  return "**";
}

std::string_view SpeedText(LinkSpeed s) {
  switch (s) {
    case LinkSpeed::kSdr: return "2.5";
    case LinkSpeed::kDdr: return "5";
    case LinkSpeed::kQdr: return "10";
    case LinkSpeed::kFdr10: return "FDR10";
    case LinkSpeed::kFdr: return "14";
    case LinkSpeed::kEdr: return "25";
    case LinkSpeed::kHdr: return "50";
    case LinkSpeed::kNdr: return "100";
    case LinkSpeed::kXdr: return "200";
  }
  return "??";
}

std::string_view StateText(PortState s) {
  switch (s) {
    case PortState::kActive: return "ACT";
    case PortState::kArmed: return "ARM";
    case PortState::kInit: return "INI";
    default: return "DWN";
  }
}

// The port whose LID stands for the node in a line: port 0 of a switch, else the port.
const Port& LidPort(const Fabric& f, const Port& p) {
  const Node& n = f.node(p.node);
  return n.is_switch() ? f.port(p.node, PortNum{0}) : p;
}

std::string Side(const Fabric& f, const Port& p, Lid sm_lid, bool right) {
  const Node& n = f.node(p.node);
  const Port& lp = LidPort(f, p);
  Guid port_guid = n.is_switch() ? lp.guid : p.guid;
  // OpenSM prints the vendor ID with 6 digits on the left and 8 on the right.
  return fmt::format(
      "{{ {}{} Ports:{:02X} SystemGUID:{:016x} NodeGUID:{:016x} PortGUID:{:016x} "
      "VenID:{:0{}X} DevID:{:04X} Rev:{:08X} {{{}}} LID:{:04X} PN:{:02X} }} ",
      TypeTag(n.kind), lp.lid == sm_lid && sm_lid.value() != 0 ? "-SM" : "", n.num_ports,
      n.system_image_guid.value(), n.guid.value(), port_guid.value(), n.vendor_id,
      right ? 8 : 6, n.device_id, n.revision, n.description, lp.lid.value(), p.num.value());
}

}  // namespace

std::string FormatSubnetLst(const Fabric& f, Lid sm_lid) {
  std::string out;
  for (NodeId id : ByGuid(f)) {
    const Node& n = f.node(id);
    for (uint32_t pn = 1; pn <= n.num_ports; ++pn) {
      const Port& p = f.port(id, PortNum{static_cast<uint8_t>(pn)});
      if (!p.connected()) continue;
      const Port& q = f.port(p.peer);
      out += Side(f, p, sm_lid, false);
      out += Side(f, q, sm_lid, true);
      out += fmt::format("PHY={} LOG={} SPD={}\n", LinkWidthName(p.width), StateText(p.state),
                         SpeedText(p.speed));
    }
  }
  return out;
}

void WriteLftsDump(const Fabric& f, const routing::RoutingTables& tables, std::FILE* file) {
  fmt::memory_buffer out;
  for (NodeId id : ByGuid(f)) {
    const Node& n = f.node(id);
    const routing::SwitchTable* t = tables.table(id);
    if (!n.is_switch() || !t) continue;
    size_t max_lid = t->lft.empty() ? 0 : t->lft.size() - 1;
    fmt::format_to(std::back_inserter(out),
                   "Unicast lids [0-{}] of switch Lid {} guid {:#018x} ('{}'):\n", max_lid,
                   f.port(id, PortNum{0}).lid.value(), n.guid.value(), n.description);
    for (size_t lid = 0; lid <= max_lid; ++lid) {
      uint8_t port = t->lft[lid];
      if (port > n.num_ports) continue;
      fmt::format_to(std::back_inserter(out), "0x{:04x} {:03} # ", lid, port);
      if (auto owner = f.FindPortByLid(Lid{static_cast<uint16_t>(lid)})) {
        const Port& op = f.port(*owner);
        const Node& on = f.node(op.node);
        fmt::format_to(std::back_inserter(out), "{} portguid {:#018x}: '{}'\n",
                           on.kind == NodeKind::kSwitch ? "Switch"
                           : on.kind == NodeKind::kCa   ? "Channel Adapter"
                                                        : "Router",
                           op.guid.value(), on.description);
      } else {
        fmt::format_to(std::back_inserter(out), "unknown node and type\n");
      }
      if (out.size() > (1u << 20)) {
        std::fwrite(out.data(), 1, out.size(), file);
        out.clear();
      }
    }
    fmt::format_to(std::back_inserter(out), "{} lids dumped\n", max_lid);
  }
  std::fwrite(out.data(), 1, out.size(), file);
}

Status WriteDumpFile(const std::string& path, const std::function<void(std::FILE*)>& write) {
  std::string tmp = path + ".tmp";
  std::FILE* f = std::fopen(tmp.c_str(), "w");
  if (!f) return IoError(fmt::format("cannot create {}: {}", tmp, std::strerror(errno)));
  write(f);
  bool ok = std::fflush(f) == 0 && ::fsync(::fileno(f)) == 0;
  ok = std::fclose(f) == 0 && ok;
  if (!ok || std::rename(tmp.c_str(), path.c_str()) != 0) {
    int e = errno;
    std::remove(tmp.c_str());
    return IoError(fmt::format("cannot write {}: {}", path, std::strerror(e)));
  }
  return Status::Ok();
}

}  // namespace ibsm::sm
