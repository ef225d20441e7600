#include "sm/record/dumps.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <iterator>

#include <fmt/format.h>

#include "base/text.h"
#include "conf/text_file.h"
#include "routing/hop_table.h"

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
      right ? 8 : 6, n.device_id, n.revision, OpenSmPrintable(n.description), lp.lid.value(), p.num.value());
}

}  // namespace

void WriteSubnetLst(const Fabric& f, Lid sm_lid, std::FILE* file) {
  for (NodeId id : ByGuid(f)) {
    const Node& n = f.node(id);
    for (uint32_t pn = 1; pn <= n.num_ports; ++pn) {
      const Port& p = f.port(id, PortNum{static_cast<uint8_t>(pn)});
      if (!p.connected()) continue;
      const Port& q = f.port(p.peer);
      // fwrite, not fmt::print (which throws on a full disk): WriteDumpFile sees the error.
      const std::string line =
          Side(f, p, sm_lid, false) + Side(f, q, sm_lid, true) +
          fmt::format("PHY={} LOG={} SPD={}\n", LinkWidthName(p.width), StateText(p.state),
                      SpeedText(p.speed));
      std::fwrite(line.data(), 1, line.size(), file);
    }
  }
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
                   f.port(id, PortNum{0}).lid.value(), n.guid.value(), OpenSmPrintable(n.description));
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
                           op.guid.value(), OpenSmPrintable(on.description));
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

void WriteFdbsDump(const Fabric& f, const routing::RoutingTables& tables, std::FILE* file) {
  const routing::HopTable hops = routing::HopTable::Build(f, 1);
  // Hops from switch `s` to the switch `to` leaving through `port`, or -1 if that port does
  // not lead to a switch with a path.
  auto via = [&](routing::SwitchIdx s, uint8_t port, routing::SwitchIdx to) -> int {
    for (const auto* l = hops.links_begin(s); l != hops.links_end(s); ++l) {
      if (l->port != port) continue;
      const uint8_t h = hops.hops(l->remote, to);
      return h == routing::kUnreachableHops ? -1 : h + 1;
    }
    return -1;
  };
  fmt::memory_buffer out;
  for (NodeId id : ByGuid(f)) {
    const Node& n = f.node(id);
    const routing::SwitchTable* t = tables.table(id);
    if (!n.is_switch() || !t) continue;
    const routing::SwitchIdx s = hops.index(id);
    fmt::format_to(std::back_inserter(out),
                   "dump_ucast_routes: Switch {:#018x}\nLID    : Port : Hops : Optimal\n",
                   n.guid.value());
    for (size_t lid = 1; lid < t->lft.size(); ++lid) {
      fmt::format_to(std::back_inserter(out), "0x{:04X} : ", lid);
      const auto owner = f.FindPortByLid(Lid{static_cast<uint16_t>(lid)});
      const uint8_t port = t->lft[lid];
      if (!owner || port == routing::kDropPort) {
        fmt::format_to(std::back_inserter(out), "UNREACHABLE\n");
        continue;
      }
      // The switch that delivers the LID, and the hops added after it (1 for a CA's cable).
      const Port& op = f.port(*owner);
      routing::SwitchIdx target = routing::kNoSwitch;
      int tail = 0;
      if (f.node(op.node).is_switch()) {
        target = hops.index(op.node);
      } else if (op.connected()) {
        target = hops.index(f.port(op.peer).node);
        tail = 1;
      }
      int h = -1, best = -1;
      if (target != routing::kNoSwitch) {
        const uint8_t b = hops.hops(s, target);
        if (b != routing::kUnreachableHops) best = b + tail;
        if (target == s) {
          const bool here = tail ? op.peer == f.port_id(id, PortNum{port}) : port == 0;
          h = here ? tail : -1;
        } else if (port != 0) {
          const int v = via(s, port, target);
          h = v < 0 ? -1 : v + tail;
        }
      }
      if (h < 0) {
        fmt::format_to(std::back_inserter(out), "{:03}  : HOPS UNKNOWN\n", port);
        continue;
      }
      fmt::format_to(std::back_inserter(out), "{:03}  : {:02}   : ", port, h);
      if (h == best) {
        fmt::format_to(std::back_inserter(out), "yes\n");
      } else {
        uint8_t best_port = 0;
        for (const auto* l = hops.links_begin(s); l != hops.links_end(s) && !best_port; ++l)
          if (via(s, l->port, target) + tail == best) best_port = l->port;
        fmt::format_to(std::back_inserter(out), "No {} hop path possible via port {}!\n", best,
                       best_port);
      }
      if (out.size() > (1u << 20)) {
        std::fwrite(out.data(), 1, out.size(), file);
        out.clear();
      }
    }
  }
  std::fwrite(out.data(), 1, out.size(), file);
}

void WriteMcfdbsDump(const Fabric& fabric, const MftPlan& mfts, std::FILE* out) {
  std::vector<NodeId> order;
  for (const auto& [n, sw] : mfts.switches)
    if (n < fabric.node_count() && !sw.masks.empty()) order.push_back(n);
  std::sort(order.begin(), order.end(),
            [&](NodeId a, NodeId b) { return fabric.node(a).guid < fabric.node(b).guid; });
  std::string text;
  for (NodeId n : order) {
    const SwitchMft& sw = mfts.switches.at(n);
    bool header = false;
    for (const auto& [mlid, masks] : sw.masks) {
      std::vector<uint8_t> ports = sw.Ports(mlid);
      if (ports.empty()) continue;
      if (!header) {
        fmt::format_to(std::back_inserter(text), "\nSwitch 0x{:016x}\nLID    : Out Port(s)\n",
                       fabric.node(n).guid.value());
        header = true;
      }
      fmt::format_to(std::back_inserter(text), "0x{:04X} :", mlid);
      for (uint8_t p : ports) fmt::format_to(std::back_inserter(text), " 0x{:03X} ", p);
      text += '\n';
    }
  }
  std::fwrite(text.data(), 1, text.size(), out);
}

Status WriteDumpFile(const std::string& path, const std::function<void(std::FILE*)>& write) {
  // Not fopen(path + ".tmp", "w"): dump_files_dir defaults to /var/log, which some systems
  // let a group write to, and a fixed name there is a symlink waiting to be followed.
  auto created = conf::CreateTempFileBeside(path, 0644);
  if (!created.ok()) {
    return IoError(fmt::format("cannot write {}: {}", path, created.status().message()));
  }
  const std::string tmp = created->path;
  std::FILE* f = ::fdopen(created->fd, "w");
  if (!f) {
    int e = errno;
    ::close(created->fd);
    ::unlink(tmp.c_str());
    return IoError(fmt::format("cannot write {}: {}", path, std::strerror(e)));
  }
  errno = 0;
  write(f);
  // A write that failed inside fwrite (ENOSPC) leaves the stream's error flag set and
  // need not make the fflush below fail: glibc may have dropped the buffered bytes.
  int e = 0;
  if (std::fflush(f) != 0 || std::ferror(f)) {
    e = errno != 0 ? errno : EIO;
  } else if (::fsync(::fileno(f)) != 0) {
    e = errno;
  }
  if (std::fclose(f) != 0 && e == 0) e = errno != 0 ? errno : EIO;
  if (e == 0 && std::rename(tmp.c_str(), path.c_str()) != 0) e = errno;
  if (e != 0) {
    std::remove(tmp.c_str());
    return IoError(fmt::format("cannot write {}: {}", path, std::strerror(e)));
  }
  return Status::Ok();
}

}  // namespace ibsm::sm
