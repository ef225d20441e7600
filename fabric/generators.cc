#include "fabric/generators.h"

#include <cmath>
#include <string>
#include <unordered_set>

#include <fmt/format.h>

namespace ibsm {

namespace {

// gen_topology.py's w(n): zero-pad width for indices up to n, at least 2.
int PadWidth(long n) { return std::max<int>(2, static_cast<int>(std::to_string(n).size())); }

std::string Numbered(std::string_view prefix, long index, int width) {
  return fmt::format("{}{:0{}d}", prefix, index, width);
}

// Builds nodes with gen_topology.py's GUID scheme and cables them.
class Builder {
 public:
  Builder(LinkWidth w, LinkSpeed s) : width_(w), speed_(s) {}

  void Reserve(size_t switches, int k, size_t hcas) {
    fabric_.Reserve(switches + hcas, switches * (static_cast<size_t>(k) + 1) + hcas * 2);
  }

  Result<NodeId> AddSwitch(const std::string& name, int ports) {
    Guid guid{kGenSwitchGuidBase + ++switches_};
    IBSM_ASSIGN_OR_RETURN(NodeId id, fabric_.AddNode(NodeKind::kSwitch, guid,
                                                     static_cast<uint8_t>(ports), name, name));
    const Node& n = fabric_.node(id);
    for (uint32_t p = 0; p <= n.num_ports; ++p) fabric_.mutable_port(n.first_port + p).guid = guid;
    IBSM_RETURN_IF_ERROR(fabric_.SetPortGuid(n.first_port, guid));
    return id;
  }

  // HCA for server `index` (1-based): "<prefix>-0012/hca<hca>", "<prefix>-0012 HCA-<hca>".
  Result<NodeId> AddHost(std::string_view prefix, long index, int hca) {
    std::string server = Numbered(std::string(prefix) + "-", index, 4);
    Guid guid{kGenCaGuidBase + 16 * ++hcas_};
    IBSM_ASSIGN_OR_RETURN(NodeId id,
                          fabric_.AddNode(NodeKind::kCa, guid, 1, fmt::format("{}/hca{}", server, hca),
                                          fmt::format("{} HCA-{}", server, hca)));
    IBSM_RETURN_IF_ERROR(fabric_.SetPortGuid(fabric_.port_id(id, PortNum{1}), Guid{guid.value() + 1}));
    return id;
  }

  // Cables port pa of a to port pb of b; 0 picks the lowest free port, as the script does.
  Status Connect(NodeId a, int pa, NodeId b, int pb) {
    if (pa == 0) pa = FreePort(a);
    if (pb == 0) pb = FreePort(b);
    if (pa == 0 || pb == 0) {
      return InvalidArgument("no free port on " + fabric_.node(pa == 0 ? a : b).name);
    }
    IBSM_RETURN_IF_ERROR(fabric_.Connect(a, PortNum{static_cast<uint8_t>(pa)}, b,
                                         PortNum{static_cast<uint8_t>(pb)}));
    for (PortId p : {fabric_.port_id(a, PortNum{static_cast<uint8_t>(pa)}),
                     fabric_.port_id(b, PortNum{static_cast<uint8_t>(pb)})}) {
      fabric_.mutable_port(p).width = width_;
      fabric_.mutable_port(p).speed = speed_;
    }
    return Status::Ok();
  }

  Fabric Take() { return std::move(fabric_); }

 private:
  int FreePort(NodeId n) const {
    const Node& node = fabric_.node(n);
    for (uint32_t p = 1; p <= node.num_ports; ++p)
      if (!fabric_.port(node.first_port + p).connected()) return static_cast<int>(p);
    return 0;
  }

  Fabric fabric_;
  LinkWidth width_;
  LinkSpeed speed_;
  uint64_t switches_ = 0;
  uint64_t hcas_ = 0;
};

Status CheckRadix(int k) {
  if (k < 2 || k > 254) return InvalidArgument(fmt::format("k={} must be in [2, 254]", k));
  return Status::Ok();
}

// gen_topology.py two_tier_shape(): hosts per leaf (uplinks are the rest).
Result<int> TwoTierHosts(int k, double oversub, int hosts_per_leaf) {
  int h = hosts_per_leaf;
  if (h == 0) h = oversub <= 1 ? k / 2 : static_cast<int>(k * oversub / (oversub + 1));
  if (h < 1 || h >= k) {
    return InvalidArgument(fmt::format("hosts per leaf {} must be in [1, k-1]", h));
  }
  return h;
}

// gen_topology.py build_plane(): leaves with h host ports and `up` uplinks, one to each spine.
Status BuildPlane(Builder& b, int k, const std::vector<NodeId>& hosts, int h, int up,
                  std::string_view tag) {
  long nleaf = (static_cast<long>(hosts.size()) + h - 1) / h;
  if (nleaf > k) {
    return InvalidArgument(fmt::format(
        "{} leaves needed but a {}-port spine reaches only {}; use fewer hosts or the 3-tier "
        "topology",
        nleaf, k, k));
  }
  std::vector<NodeId> leaves, spines;
  for (long i = 0; i < nleaf; ++i) {
    IBSM_ASSIGN_OR_RETURN(NodeId id,
                          b.AddSwitch(Numbered(std::string(tag) + "leaf-", i + 1, PadWidth(nleaf) + 1), k));
    leaves.push_back(id);
  }
  for (int j = 0; j < up; ++j) {
    IBSM_ASSIGN_OR_RETURN(NodeId id, b.AddSwitch(Numbered(std::string(tag) + "spine-", j + 1, PadWidth(up)), k));
    spines.push_back(id);
  }
  for (size_t i = 0; i < hosts.size(); ++i) {
    IBSM_RETURN_IF_ERROR(b.Connect(leaves[i / h], static_cast<int>(i % h) + 1, hosts[i], 1));
  }
  for (size_t i = 0; i < leaves.size(); ++i) {
    for (int j = 0; j < up; ++j) {
      IBSM_RETURN_IF_ERROR(b.Connect(leaves[i], h + 1 + j, spines[j], static_cast<int>(i) + 1));
    }
  }
  return Status::Ok();
}

std::vector<NodeId> Switches(const Fabric& f) {
  std::vector<NodeId> s;
  for (NodeId i = 0; i < f.node_count(); ++i)
    if (f.node(i).is_switch()) s.push_back(i);
  return s;
}

// BFS from `start`; switch_only restricts it to switch-to-switch links.
size_t Reach(const Fabric& f, NodeId start, bool switch_only) {
  std::vector<uint8_t> seen(f.node_count(), 0);
  std::vector<NodeId> todo{start};
  seen[start] = 1;
  size_t count = 1;
  while (!todo.empty()) {
    NodeId n = todo.back();
    todo.pop_back();
    const Node& node = f.node(n);
    for (uint32_t p = 1; p <= node.num_ports; ++p) {
      const Port& port = f.port(node.first_port + p);
      if (!port.connected()) continue;
      NodeId r = f.port(port.peer).node;
      if (seen[r] || (switch_only && !f.node(r).is_switch())) continue;
      seen[r] = 1;
      ++count;
      todo.push_back(r);
    }
  }
  return count;
}

}  // namespace

Result<Fabric> FatTree2(int k, const FatTree2Options& o) {
  IBSM_RETURN_IF_ERROR(CheckRadix(k));
  IBSM_ASSIGN_OR_RETURN(int h, TwoTierHosts(k, o.oversubscription, o.hosts_per_leaf));
  int nleaf = o.leaves ? o.leaves : k;
  if (nleaf < 1) return InvalidArgument("leaves must be positive");
  if (nleaf > k) {
    return InvalidArgument(fmt::format(
        "{} leaves needed but a {}-port spine reaches only {}; use fewer hosts or the 3-tier "
        "topology",
        nleaf, k, k));
  }
  Builder b(o.width, o.speed);
  b.Reserve(static_cast<size_t>(nleaf + k - h), k, static_cast<size_t>(nleaf) * h);
  std::vector<NodeId> hosts;
  for (int i = 0; i < nleaf * h; ++i) {
    IBSM_ASSIGN_OR_RETURN(NodeId id, b.AddHost("node", i + 1, 1));
    hosts.push_back(id);
  }
  IBSM_RETURN_IF_ERROR(BuildPlane(b, k, hosts, h, k - h, ""));
  return b.Take();
}

Result<Fabric> FatTree3(int k, int pods, const LinkRateOptions& o) {
  IBSM_RETURN_IF_ERROR(CheckRadix(k));
  if (k % 2) return InvalidArgument("k must be even");
  if (pods == 0) pods = k;
  if (pods < 1 || pods > k) return InvalidArgument(fmt::format("pods must be in [1, {}]", k));
  const int half = k / 2;
  const int pw = PadWidth(pods), cw = PadWidth(half * half) + 1, hw = PadWidth(half);
  Builder b(o.width, o.speed);
  b.Reserve(static_cast<size_t>(half) * half + static_cast<size_t>(pods) * k, k,
            static_cast<size_t>(pods) * half * half);
  std::vector<NodeId> cores;
  for (int c = 0; c < half * half; ++c) {
    IBSM_ASSIGN_OR_RETURN(NodeId id, b.AddSwitch(Numbered("core-", c + 1, cw), k));
    cores.push_back(id);
  }
  long hidx = 0;
  for (int p = 0; p < pods; ++p) {
    std::string pod = Numbered("pod", p + 1, pw);
    std::vector<NodeId> leaves, spines;
    for (int e = 0; e < half; ++e) {
      IBSM_ASSIGN_OR_RETURN(NodeId id, b.AddSwitch(Numbered(pod + "-leaf-", e + 1, hw), k));
      leaves.push_back(id);
    }
    for (int s = 0; s < half; ++s) {
      IBSM_ASSIGN_OR_RETURN(NodeId id, b.AddSwitch(Numbered(pod + "-spine-", s + 1, hw), k));
      spines.push_back(id);
    }
    for (int e = 0; e < half; ++e) {
      for (int j = 0; j < half; ++j) {  // leaf ports 1..k/2: hosts
        IBSM_ASSIGN_OR_RETURN(NodeId h, b.AddHost("node", ++hidx, 1));
        IBSM_RETURN_IF_ERROR(b.Connect(leaves[e], j + 1, h, 1));
      }
      for (int s = 0; s < half; ++s) {  // leaf ports k/2+1..k: one link to each pod spine
        IBSM_RETURN_IF_ERROR(b.Connect(leaves[e], half + 1 + s, spines[s], e + 1));
      }
    }
    for (int s = 0; s < half; ++s) {  // spine s -> cores s*k/2 .. s*k/2+k/2-1, core port = pod
      for (int j = 0; j < half; ++j) {
        IBSM_RETURN_IF_ERROR(b.Connect(spines[s], half + 1 + j, cores[s * half + j], p + 1));
      }
    }
  }
  return b.Take();
}

Result<Fabric> RailOptimized(int k, int servers, int rails, RailMode mode,
                             const RailOptions& o) {
  IBSM_RETURN_IF_ERROR(CheckRadix(k));
  if (servers < 1 || rails < 1) return InvalidArgument("servers and rails must be positive");
  IBSM_ASSIGN_OR_RETURN(int h, TwoTierHosts(k, o.oversubscription, o.hosts_per_leaf));
  const int up = k - h;
  const long nleaf = (servers + h - 1) / h;
  if (nleaf > k || (mode == RailMode::kSuperpod && nleaf * rails > k)) {
    return InvalidArgument(fmt::format("{} leaves > spine radix {}",
                                       mode == RailMode::kSuperpod ? nleaf * rails : nleaf, k));
  }
  Builder b(o.width, o.speed);
  size_t nsw = mode == RailMode::kPlanes ? static_cast<size_t>(rails) * (nleaf + up)
                                         : static_cast<size_t>(rails) * nleaf + up;
  b.Reserve(nsw, k, static_cast<size_t>(servers) * rails);
  std::vector<std::vector<NodeId>> hcas(rails);
  for (int r = 0; r < rails; ++r) {
    for (int s = 0; s < servers; ++s) {
      IBSM_ASSIGN_OR_RETURN(NodeId id, b.AddHost("server", s + 1, r + 1));
      hcas[r].push_back(id);
    }
  }
  if (mode == RailMode::kPlanes) {
    for (int r = 0; r < rails; ++r) {
      IBSM_RETURN_IF_ERROR(BuildPlane(b, k, hcas[r], h, up, fmt::format("rail{}-", r + 1)));
    }
    return b.Take();
  }
  std::vector<NodeId> spines;
  for (int j = 0; j < up; ++j) {
    IBSM_ASSIGN_OR_RETURN(NodeId id, b.AddSwitch(Numbered("spine-", j + 1, PadWidth(up)), k));
    spines.push_back(id);
  }
  int li = 0;
  for (int r = 0; r < rails; ++r) {
    for (long l = 0; l < nleaf; ++l) {
      IBSM_ASSIGN_OR_RETURN(
          NodeId leaf,
          b.AddSwitch(Numbered(fmt::format("rail{}-leaf-", r + 1), l + 1, PadWidth(nleaf) + 1), k));
      for (long j = 0; j < h && l * h + j < servers; ++j) {
        IBSM_RETURN_IF_ERROR(b.Connect(leaf, static_cast<int>(j) + 1, hcas[r][l * h + j], 1));
      }
      for (int j = 0; j < up; ++j) {
        IBSM_RETURN_IF_ERROR(b.Connect(leaf, h + 1 + j, spines[j], li + 1));
      }
      ++li;
    }
  }
  return b.Take();
}

Result<Fabric> RandomGraph(int switches, int k, int hosts_per_switch, uint64_t seed,
                           const RandomGraphOptions& o) {
  PyRandom rng(seed);
  return RandomGraph(switches, k, hosts_per_switch, rng, o);
}

Result<Fabric> RandomGraph(int n, int k, int h, PyRandom& rng, const RandomGraphOptions& o) {
  IBSM_RETURN_IF_ERROR(CheckRadix(k));
  if (n < 1) return InvalidArgument("switches must be positive");
  if (h < 0 || h >= k) return InvalidArgument("--hosts-per-switch must be < k");
  Builder b(o.width, o.speed);
  b.Reserve(static_cast<size_t>(n), k, static_cast<size_t>(n) * h);
  std::vector<NodeId> sws;
  for (int i = 0; i < n; ++i) {
    IBSM_ASSIGN_OR_RETURN(NodeId id, b.AddSwitch(Numbered("sw-", i + 1, PadWidth(n) + 1), k));
    sws.push_back(id);
  }
  long hi = 0;
  for (NodeId s : sws) {
    for (int p = 1; p <= h; ++p) {
      IBSM_ASSIGN_OR_RETURN(NodeId host, b.AddHost("node", ++hi, 1));
      IBSM_RETURN_IF_ERROR(b.Connect(s, p, host, 1));
    }
  }
  std::vector<int> free_ports(n, k - h);  // by switch index
  std::unordered_set<uint64_t> linked;
  auto key = [](int x, int y) {
    return (static_cast<uint64_t>(std::min(x, y)) << 32) | static_cast<uint32_t>(std::max(x, y));
  };
  auto link = [&](int x, int y) -> Status {
    IBSM_RETURN_IF_ERROR(b.Connect(sws[x], 0, sws[y], 0));
    --free_ports[x];
    --free_ports[y];
    linked.insert(key(x, y));
    return Status::Ok();
  };
  for (int i = 1; i < n; ++i) {  // a random spanning tree keeps it connected
    std::vector<int> cand;
    for (int s = 0; s < i; ++s)
      if (free_ports[s] > 0) cand.push_back(s);
    if (cand.empty()) return InvalidArgument("not enough switch ports to connect the graph");
    IBSM_RETURN_IF_ERROR(link(i, rng.Choice(cand)));
  }
  const long target = o.links >= 0 ? o.links : static_cast<long>(n) * (k - h) / 2 * 3 / 4;
  const long max_tries = 100L * n * k;
  for (long tries = 0; n >= 2 && static_cast<long>(linked.size()) < target && tries < max_tries;
       ++tries) {
    std::vector<size_t> xy = rng.SampleIndices(static_cast<size_t>(n), 2);
    int x = static_cast<int>(xy[0]), y = static_cast<int>(xy[1]);
    if (free_ports[x] > 0 && free_ports[y] > 0 && !linked.count(key(x, y))) {
      IBSM_RETURN_IF_ERROR(link(x, y));
    }
  }
  return b.Take();
}

std::vector<DroppedLink> Degrade(Fabric& fabric, int drop_links, uint64_t seed) {
  PyRandom rng(seed);
  return Degrade(fabric, drop_links, rng);
}

std::vector<DroppedLink> Degrade(Fabric& f, int drop_links, PyRandom& rng) {
  std::vector<DroppedLink> dropped;
  if (drop_links <= 0) return dropped;
  // gen_topology.py isl_list(): each switch-switch link once, from the end with the
  // smaller (node GUID, port), switches in node order, ports ascending.
  std::vector<PortId> cand;
  for (NodeId s : Switches(f)) {
    const Node& n = f.node(s);
    for (uint32_t p = 1; p <= n.num_ports; ++p) {
      const Port& port = f.port(n.first_port + p);
      if (!port.connected()) continue;
      const Port& r = f.port(port.peer);
      const Node& rn = f.node(r.node);
      if (!rn.is_switch()) continue;
      if (std::pair(n.guid, PortNum{static_cast<uint8_t>(p)}) < std::pair(rn.guid, r.num)) {
        cand.push_back(n.first_port + p);
      }
    }
  }
  rng.Shuffle(cand);
  for (PortId pa : cand) {
    if (static_cast<int>(dropped.size()) == drop_links) break;
    PortId pb = f.port(pa).peer;
    const Port a = f.port(pa), b = f.port(pb);
    f.Disconnect(pa);
    if (SwitchesConnected(f)) {
      dropped.push_back(DroppedLink{a.node, a.num, b.node, b.num});
    } else {  // that link was a bridge: put it back
      (void)f.Connect(a.node, a.num, b.node, b.num);
    }
  }
  return dropped;
}

bool SwitchesConnected(const Fabric& f) {
  std::vector<NodeId> sws = Switches(f);
  if (sws.empty()) return true;
  return Reach(f, sws[0], /*switch_only=*/true) == sws.size();
}

bool IsConnected(const Fabric& f) {
  if (f.node_count() == 0) return true;
  return Reach(f, 0, /*switch_only=*/false) == f.node_count();
}

Fabric WithoutNode(const Fabric& f, NodeId gone) {
  Fabric out;
  std::vector<NodeId> now(f.node_count(), kNoNode);
  for (NodeId n = 0; n < f.node_count(); ++n) {
    if (n == gone) continue;
    const Node& node = f.node(n);
    auto id = out.AddNode(node.kind, node.guid, node.num_ports, node.name, node.description);
    if (!id.ok()) continue;
    now[n] = *id;
    Node& copy = out.mutable_node(*id);
    copy.system_image_guid = node.system_image_guid;
    copy.vendor_id = node.vendor_id;
    copy.device_id = node.device_id;
    copy.revision = node.revision;
    for (uint32_t p = 0; p <= node.num_ports; ++p) {
      const Port& from = f.port(node.first_port + p);
      Port& to = out.mutable_port(copy.first_port + p);
      to.guid = from.guid;
      to.lid = from.lid;
      to.lmc = from.lmc;
      to.state = from.state;
      to.width = from.width;
      to.speed = from.speed;
    }
  }
  for (NodeId n = 0; n < f.node_count(); ++n) {
    if (now[n] == kNoNode) continue;
    for (uint32_t p = 1; p <= f.node(n).num_ports; ++p) {
      const Port& port = f.port(f.node(n).first_port + p);
      if (!port.connected()) continue;
      const Port& peer = f.port(port.peer);
      if (now[peer.node] == kNoNode || port.peer < f.node(n).first_port + p) continue;
      (void)out.Connect(now[n], port.num, now[peer.node], peer.num);
    }
  }
  out.IndexLids();
  return out;
}


}  // namespace ibsm
