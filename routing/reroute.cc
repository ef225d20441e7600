#include "routing/reroute.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <mutex>
#include <set>

#include <fmt/format.h>

#include "fabric/generators.h"
#include "routing/parallel.h"

namespace ibsm::routing {

size_t BlocksDiffering(const RoutingTables& a, const RoutingTables& b) {
  size_t blocks = 0;
  for (const SwitchTable& st : a.switches) {
    const SwitchTable* other = b.table(st.node);
    for (size_t first = 0; first < st.lft.size(); first += 64) {
      bool differs = false;
      for (size_t lid = first; lid < first + 64 && lid < st.lft.size() && !differs; ++lid)
        differs = !other || lid >= other->lft.size() || other->lft[lid] != st.lft[lid];
      blocks += differs;
    }
  }
  return blocks;
}

RoutingTables CopyTables(const RoutingTables& tables, unsigned threads) {
  RoutingTables out;
  out.engine = tables.engine;
  out.switch_index = tables.switch_index;
  out.switches.resize(tables.switches.size());
  ParallelFor(tables.switches.size(), threads, [&](size_t i) { out.switches[i] = tables.switches[i]; });
  return out;
}

// Named, not anonymous: the unity build puts this file beside other engines' helpers.
namespace reroute_impl {

constexpr uint32_t kRerouteInf = UINT32_MAX;
constexpr uint32_t kRerouteUnset = UINT32_MAX - 1;

// What following the old tables from a switch towards one LID gives.
enum Shape : uint8_t {
  kShapeUnknown = 0,
  kShapeDown = 1,    // delivers, every hop down (or the switch delivers itself)
  kShapeUpDown = 2,  // delivers, up* then down*, at least one hop up
  kShapeBroken = 3,  // does not deliver, or not up*/down*: routed again
  kShapeBusy = 4,    // on the walk being followed (a second visit is a forwarding loop)
  kShapeCutOff = 5,  // in another component than the owner: kDropPort
  kShapeOffRule = 6, // delivers, but down then up somewhere (not up*/down*)
  kShapeClear = 7,   // an off-rule route that runs into no rebuilt off-rule one
};

enum HubWay : uint8_t { kToHub = 1, kOwnWay = 2 };

struct RerouteLink {
  enum Kind : uint8_t { kNothing, kSwitch, kEnd } kind = kNothing;
  bool up = false;          // kSwitch: towards a higher (rank, GUID)
  uint32_t peer = kNone;    // kSwitch: switch index
  PortId peer_port = kNoPort;
};

struct RerouteNeighbour {
  uint8_t port;
  uint32_t sw;
};

// The fabric's switches as dense indices, their cables classified under one ranking, and
// each switch's old LFT.
struct RerouteGraph {
  std::vector<NodeId> node;                 // switch index -> NodeId
  std::vector<uint32_t> index;              // NodeId -> switch index (kNone: not a switch)
  std::vector<uint32_t> component;          // per switch
  std::vector<size_t> link_base;            // per switch: offset into links (port 1 at +0)
  std::vector<uint8_t> num_ports;
  std::vector<RerouteLink> links;
  std::vector<std::vector<RerouteNeighbour>> up, down;
  std::vector<const std::vector<uint8_t>*> old;
  std::vector<NodeId> before;               // switch index -> NodeId in `before`

  const RerouteLink& link(uint32_t s, uint8_t port) const { return links[link_base[s] + port - 1]; }
};

// Per-worker scratch, one column (LID) at a time.
struct RerouteScratch {
  // raw: what following the old route from a switch gave (follow()'s memo); shape: that, as
  // the rules below then classify and rebuild it (kShapeBroken for a route built again).
  std::vector<uint8_t> raw, shape, reached;
  // Routes without an up*/down* way, with a hub: on the way of one that counts
  // (CheckCreditLoops's rule); how the switch was routed (kToHub, kOwnWay, or 0: not yet).
  std::vector<uint8_t> counted, hubbed, hub;  // hub: which one, where kToHub
  std::vector<uint32_t> affected, d_any, d_plain, queue, walk, plain, broken, offrule, cutoff;
  // d_down, `above` (the switches over the target that have a cable up: only their routes
  // can climb) and the d_any memoised depend on the target alone: a run's LIDs, mostly one
  // switch's CAs, share them (`distances_for`).
  std::vector<uint32_t> d_down, above, over;  // over: every switch above the target
  uint32_t distances_for = kNone;
  std::vector<uint8_t> tile_old, tile_new;  // switch-major, 64 LIDs a switch
  // The run of LIDs the tile holds: examine[first ..) from LID run_lo, run_off[j] past it (or
  // contiguous). Where every LID of the run is followed partly, a switch's row is gathered
  // only when one of its entries is first read (`loaded`): those LIDs read few switches, and
  // gathering all of them was most of what such a run cost (a cache and TLB miss a row).
  uint32_t run_lo = 0, run_n = 0, run_off[64];
  bool run_contiguous = true, lazy = false;
  std::vector<uint8_t> loaded;
  std::vector<std::pair<uint32_t, bool>> stack;
  std::vector<uint8_t> candidates;
  std::vector<uint32_t> changed;  // the column's switches whose entry set() changed
  BlockSet blocks;                 // the blocks set() changed an entry of, every column's
  uint64_t lids_rerouted = 0, entries_changed = 0, routes_kept = 0, followed_partly = 0;
  std::string error;
  uint32_t error_lid = kRerouteInf;
  bool unproven = false;
};

uint8_t RerouteOldEntry(const RerouteGraph& g, uint32_t s, uint32_t lid) {
  const std::vector<uint8_t>* t = g.old[s];
  return lid < t->size() ? (*t)[lid] : kDropPort;
}

}  // namespace reroute_impl

Result<Rerouted> RerouteAround(const Fabric& f, const LidMap& lids, const Fabric& before,
                               const RoutingTables& old, const RoutingOptions& options,
                               bool examine_all, const UpDownProof* before_proof,
                               RoutingTables* start) {
  const unsigned threads = options.threads;
  using namespace reroute_impl;
  RerouteGraph g;
  g.index.assign(f.node_count(), kNone);
  for (NodeId n = 0; n < f.node_count(); ++n) {
    if (!f.node(n).is_switch()) continue;
    const auto was = before.FindNode(f.node(n).guid);
    const SwitchTable* t = was ? old.table(*was) : nullptr;
    if (!t) {
      return Status(StatusCode::kFailedPrecondition,
                    fmt::format("switch {} has no previous table", f.node(n).description));
    }
    g.index[n] = static_cast<uint32_t>(g.node.size());
    g.node.push_back(n);
    g.before.push_back(*was);
    g.old.push_back(&t->lft);
  }
  const uint32_t S = static_cast<uint32_t>(g.node.size());
  // The ranking the old tables were proven under, where there is one: the routes kept and the
  // routes built then are up*/down* under the same order.
  std::vector<uint32_t> rank;
  const bool proven_before = before_proof && before_proof->rank.size() == before.node_count();
  if (proven_before) {
    rank.assign(f.node_count(), kNone);
    for (uint32_t s = 0; s < S; ++s) rank[g.node[s]] = before_proof->rank[g.before[s]];
  } else {
    rank = UpDownRanks(f, options.root_guids);
  }
  auto higher = [&](NodeId a, NodeId b) {  // a above b: nearer the tops, ties by lower GUID
    return rank[a] != rank[b] ? rank[a] < rank[b] : f.node(a).guid < f.node(b).guid;
  };
  g.up.resize(S);
  g.down.resize(S);
  g.num_ports.resize(S);
  g.link_base.resize(S);
  for (uint32_t s = 0; s < S; ++s) {
    g.num_ports[s] = f.node(g.node[s]).num_ports;
    g.link_base[s] = s == 0 ? 0 : g.link_base[s - 1] + g.num_ports[s - 1];
  }
  g.links.resize(S == 0 ? 0 : g.link_base[S - 1] + g.num_ports[S - 1]);
  // A leaf: a switch with a CA (or router) cabled, LeafDistanceRanks's rank 0.
  std::vector<uint8_t> leaf(S, 0);
  // Each switch's own links and lists, on the workers (3-tier k=48: 138,000 ports).
  ParallelFor(S, threads, [&](size_t s) {
    const NodeId n = g.node[s];
    const Node& node = f.node(n);
    for (uint32_t p = 1; p <= node.num_ports; ++p) {
      const Port& port = f.port(node.first_port + p);
      RerouteLink& l = g.links[g.link_base[s] + p - 1];
      if (!port.connected()) continue;
      const NodeId m = f.port(port.peer).node;
      l.peer_port = port.peer;
      if (f.node(m).is_switch()) {
        l.kind = RerouteLink::kSwitch;
        l.peer = g.index[m];
        l.up = higher(m, n);
        (l.up ? g.up : g.down)[s].push_back({static_cast<uint8_t>(p), l.peer});
      } else {
        l.kind = RerouteLink::kEnd;
        leaf[s] = 1;
      }
    }
  });
  g.component.assign(S, kNone);
  for (uint32_t s0 = 0, c = 0; s0 < S; ++s0) {
    if (g.component[s0] != kNone) continue;
    std::vector<uint32_t> queue{s0};
    g.component[s0] = c;
    for (size_t i = 0; i < queue.size(); ++i)
      for (const auto* list : {&g.up[queue[i]], &g.down[queue[i]]})
        for (const RerouteNeighbour& nb : *list)
          if (g.component[nb.sw] == kNone) g.component[nb.sw] = c, queue.push_back(nb.sw);
    ++c;
  }

  Rerouted out;
  out.tables.engine = old.engine;
  out.tables.switch_index.assign(f.node_count(), SIZE_MAX);
  const uint32_t max_lid = lids.max_lid();
  out.tables.switches.resize(S);
  for (uint32_t s = 0; s < S; ++s) {
    out.tables.switches[s].node = g.node[s];
    out.tables.switch_index[g.node[s]] = s;
  }

  // The hubs: where the routes without an up*/down* way turn (reroute.h). Switches with a CA
  // cabled, by GUID, each with the switches it reaches up* then down* (its `cover`: the same
  // as those that reach it so); the first that covers every switch is the only one, else
  // hubs are taken while they add to what the others cover, up to kMaxHubs (after 16 cables
  // of one aggregation switch, it and the cores above it are covered by different pods'
  // leaves). None when the switches are in more than one piece. port[s]: the next hop of s's
  // shortest up*/down* route to the hub, its lowest port among equals (one route per switch,
  // whatever the LID).
  struct Hub {
    uint32_t sw = kNone;
    std::vector<uint8_t> cover, port;
  };
  std::vector<Hub> hubs;
  if (S > 0 && *std::max_element(g.component.begin(), g.component.end()) == 0) {
    constexpr size_t kMaxHubs = 4;
    std::vector<uint32_t> order;
    for (uint32_t s = 0; s < S; ++s)
      if (leaf[s]) order.push_back(s);
    std::sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) {
      return f.node(g.node[a]).guid < f.node(g.node[b]).guid;
    });
    // Up*(c) is its up-neighbours' closure: a leaf whose up-neighbours are those of one
    // tried already covers the same (on a fat tree, the other leaves of its pod).
    std::set<std::vector<uint32_t>> tried;
    std::vector<uint32_t> ups, queue;
    std::vector<uint8_t> covered(S, 0);
    size_t covered_count = 0;
    for (uint32_t c : order) {
      if (hubs.size() == kMaxHubs || covered_count == S) break;
      ups.clear();
      for (const RerouteNeighbour& nb : g.up[c]) ups.push_back(nb.sw);
      std::sort(ups.begin(), ups.end());
      if (!tried.insert(ups).second) continue;
      std::vector<uint8_t> cover(S, 0);
      queue.assign(1, c);
      cover[c] = 1;
      for (size_t i = 0; i < queue.size(); ++i)
        for (const RerouteNeighbour& nb : g.up[queue[i]])
          if (!cover[nb.sw]) cover[nb.sw] = 1, queue.push_back(nb.sw);
      for (size_t i = 0; i < queue.size(); ++i)
        for (const RerouteNeighbour& nb : g.down[queue[i]])
          if (!cover[nb.sw]) cover[nb.sw] = 1, queue.push_back(nb.sw);
      if (queue.size() == S) {  // covers everything alone
        hubs.assign(1, Hub{c, std::move(cover), {}});
        break;
      }
      size_t adds = 0;
      for (uint32_t s = 0; s < S; ++s) adds += cover[s] && !covered[s];
      if (adds == 0) continue;
      for (uint32_t s = 0; s < S; ++s) covered[s] |= cover[s];
      covered_count += adds;
      hubs.push_back(Hub{c, std::move(cover), {}});
    }
  }
  std::vector<uint32_t> hub_order;  // every switch, highest first (for the hubs' ways)
  if (!hubs.empty()) {
    hub_order.resize(S);
    for (uint32_t s = 0; s < S; ++s) hub_order[s] = s;
    std::sort(hub_order.begin(), hub_order.end(),
              [&](uint32_t a, uint32_t b) { return higher(g.node[a], g.node[b]); });
  }
  for (Hub& h : hubs) {
    // Pure down distances (the switches above the hub), then up*/down* ones, highest first.
    std::vector<uint32_t> d_down(S, kRerouteInf), d_any(S, kRerouteInf), queue{h.sw};
    d_down[h.sw] = 0;
    for (size_t i = 0; i < queue.size(); ++i)
      for (const RerouteNeighbour& nb : g.up[queue[i]])
        if (d_down[nb.sw] == kRerouteInf) d_down[nb.sw] = d_down[queue[i]] + 1, queue.push_back(nb.sw);
    std::vector<uint8_t>& port = h.port;
    port.assign(S, 0);
    for (uint32_t s : hub_order) {
      d_any[s] = d_down[s];
      if (d_down[s] != kRerouteInf) {
        for (const RerouteNeighbour& nb : g.down[s])
          if (d_down[nb.sw] + 1 == d_down[s] && (!port[s] || nb.port < port[s])) port[s] = nb.port;
        continue;
      }
      for (const RerouteNeighbour& nb : g.up[s])
        if (d_any[nb.sw] != kRerouteInf && d_any[nb.sw] + 1 <= d_any[s] &&
            (d_any[nb.sw] + 1 < d_any[s] || nb.port < port[s]))
          d_any[s] = d_any[nb.sw] + 1, port[s] = nb.port;
    }
  }
  const uint8_t no_hub = static_cast<uint8_t>(hubs.size());

  // The LIDs to examine. Without examine_all, only those the fault can have changed:
  // an owner that is not the old one or not cabled as before, or an old entry, on some
  // switch, into a port whose cable is gone or leads elsewhere. Every other LID's routes
  // are the old ones, hop for hop, over cables that are all still there.
  std::vector<uint32_t> examine;
  // `before` in more than one piece: a switch cut off then had no route it had to keep, and a
  // cable that joins the pieces again would leave its entries as they were.
  bool all = examine_all || g.component.empty() ||
             *std::max_element(g.component.begin(), g.component.end()) > 0 ||
             !SwitchesConnected(before);
  // Per examined LID (by its index in `examine`): whether only the switches whose old route
  // runs into a changed cable need following (reroute.h; never a switch's own LID), and those
  // with an entry into one: seeds[seed_begin[i] .. seed_begin[i + 1]); whether its owner is
  // cabled as before, so Rerouted::changes can list the switches whose entry may differ.
  std::vector<bool> partial, same_owner;
  std::vector<uint32_t> seed_begin, seeds;
  if (!all) {
    std::vector<bool> touched(size_t{max_lid} + 1, false);
    std::vector<std::pair<uint32_t, uint32_t>> dead_entries;  // (LID, switch)
    const LidMap was(before);
    auto same_end = [&](PortId a, const Fabric& fa, PortId b, const Fabric& fb) {
      if (a == kNoPort || b == kNoPort) return a == b;
      const Port& pa = fa.port(a);
      const Port& pb = fb.port(b);
      if (fa.node(pa.node).guid != fb.node(pb.node).guid || pa.num != pb.num) return false;
      if (pa.connected() != pb.connected()) return false;
      if (!pa.connected()) return true;
      const Port& qa = fa.port(pa.peer);
      const Port& qb = fb.port(pb.peer);
      return fa.node(qa.node).guid == fb.node(qb.node).guid && qa.num == qb.num;
    };
    for (uint32_t lid = 1; lid <= max_lid; ++lid)
      touched[lid] = !same_end(lids.owner(Lid(static_cast<uint16_t>(lid))), f,
                               was.owner(Lid(static_cast<uint16_t>(lid))), before);
    const std::vector<bool> moved(touched);
    // Where the owner moved, every switch's route may have changed; where the proof lists a
    // turn, a route CA traffic takes may be off-rule anywhere. Those LIDs are followed from
    // every switch.
    std::vector<bool> whole(touched);
    if (proven_before) {
      for (const RouteTurn& t : before_proof->turns)
        if (t.lid <= max_lid) whole[t.lid] = true;
    }
    // Per switch, on the workers: the LIDs of its old entries into a port whose cable is
    // gone or leads elsewhere (ascending); joined in switch order.
    std::vector<std::vector<uint32_t>> dead_lids(S);
    ParallelFor(S, threads, [&](size_t s) {
      const NodeId n = g.node[s];
      const NodeId then = g.before[s];
      std::array<bool, 256> dead{};
      bool any = false;
      for (uint32_t p = 1; p <= g.num_ports[s]; ++p) {
        const PortNum num(static_cast<uint8_t>(p));
        dead[p] = p > before.node(then).num_ports ||
                  !same_end(f.port_id(n, num), f, before.port_id(then, num), before);
        any = any || dead[p];
      }
      if (!any) return;
      const std::vector<uint8_t>& row = *g.old[s];
      const size_t end = std::min(row.size(), size_t{max_lid} + 1);
      for (size_t lid = 1; lid < end; ++lid)
        if (dead[row[lid]]) dead_lids[s].push_back(static_cast<uint32_t>(lid));
    });
    for (uint32_t s = 0; s < S; ++s) {
      for (uint32_t lid : dead_lids[s]) {
        touched[lid] = true;
        if (proven_before) dead_entries.emplace_back(lid, s);
      }
    }
    std::vector<uint32_t> at(size_t{max_lid} + 1, kNone);  // LID -> index in `examine`
    for (uint32_t lid = 1; lid <= max_lid; ++lid) {
      if (!touched[lid]) continue;
      at[lid] = static_cast<uint32_t>(examine.size());
      examine.push_back(lid);
      partial.push_back(proven_before && !whole[lid]);
      same_owner.push_back(proven_before && !moved[lid]);
    }
    // dead_entries is by switch, then LID: a counting sort makes it by LID, then switch.
    seed_begin.assign(examine.size() + 1, 0);
    for (const auto& [lid, s] : dead_entries) ++seed_begin[at[lid] + 1];
    for (size_t i = 0; i < examine.size(); ++i) seed_begin[i + 1] += seed_begin[i];
    seeds.resize(dead_entries.size());
    std::vector<uint32_t> next(seed_begin.begin(), seed_begin.end() - 1);
    for (const auto& [lid, s] : dead_entries) seeds[next[at[lid]]++] = s;
  } else {
    for (uint32_t lid = 1; lid <= max_lid; ++lid) examine.push_back(lid);
  }
  // The new tables start as the old ones (LIDs past their end dropped), on the workers: at
  // 3-tier k=48 that is 86 MB, written once, unless `start` holds them already (the copy made
  // ahead of time; its rows are taken over, and it is left without them).
  const bool take = start && !all && start->switches.size() == old.switches.size();
  ParallelFor(S, threads, [&](size_t s) {
    std::vector<uint8_t>& lft = out.tables.switches[s].lft;
    const std::vector<uint8_t>& prev = *g.old[s];
    std::vector<uint8_t>* ready = nullptr;
    if (take) {
      ready = &start->switches[old.switch_index[g.before[s]]].lft;
      if (ready->size() != prev.size()) ready = nullptr;
    }
    if (all) {
      lft.assign(size_t{max_lid} + 1, kDropPort);
    } else if (ready) {
      lft = std::move(*ready);
      lft.resize(size_t{max_lid} + 1, kDropPort);
    } else {
      lft.assign(prev.begin(), prev.begin() + std::min(prev.size(), size_t{max_lid} + 1));
      lft.resize(size_t{max_lid} + 1, kDropPort);
    }
  });

  // One column: LID examine[i] on every switch, the `j`th of the worker's tile: its old entries
  // gathered there row by row, its new ones written there (the tables are row-major; a column
  // read straight from them misses the cache once a switch).
  // Switch `sw`'s old entries for the worker's run of LIDs, into its row of the tile.
  auto gather = [&](RerouteScratch& w, uint32_t sw) {
    const std::vector<uint8_t>& row = *g.old[sw];
    uint8_t* dst = &w.tile_old[size_t{sw} * 64];
    const uint32_t lo = w.run_lo, n = w.run_n;
    if (w.run_contiguous) {
      const size_t have = lo < row.size() ? std::min<size_t>(n, row.size() - lo) : 0;
      if (have) std::memcpy(dst, row.data() + lo, have);
      std::fill(dst + have, dst + n, kDropPort);
      return;
    }
    // Picked into a local first: the tile's stores are bytes, which the compiler must assume
    // alias anything it would otherwise keep in registers.
    uint8_t picked[64];
    if (lo + w.run_off[n - 1] < row.size()) {
      const uint8_t* from = row.data() + lo;
      for (size_t j = 0; j < n; ++j) picked[j] = from[w.run_off[j]];
    } else {
      for (size_t j = 0; j < n; ++j)
        picked[j] = lo + w.run_off[j] < row.size() ? row[lo + w.run_off[j]] : kDropPort;
    }
    std::memcpy(dst, picked, n);
  };

  auto column = [&](RerouteScratch& w, size_t i, size_t j) {
    const uint32_t lid = examine[i];
    auto old_at = [&](uint32_t s) {
      if (w.lazy && !w.loaded[s]) w.loaded[s] = 1, gather(w, s);
      return w.tile_old[size_t{s} * 64 + j];
    };
    const PortId owner = lids.owner(Lid(static_cast<uint16_t>(lid)));
    uint32_t target = kNone;
    uint8_t final_port = 0;
    bool switch_lid = false;
    if (owner != kNoPort) {
      const Port& o = f.port(owner);
      if (f.node(o.node).is_switch()) {
        target = g.index[o.node];
        switch_lid = true;
      } else if (o.connected() && f.node(f.port(o.peer).node).is_switch()) {
        target = g.index[f.port(o.peer).node];
        final_port = f.port(o.peer).num.value();
      }
    }
    w.changed.clear();
    // Examining only some LIDs, the new tables start as the old ones, and an entry is written
    // straight into them; examining all, they start empty, and the tile is written back whole.
    auto entry = [&](uint32_t s) {
      return all ? w.tile_new[size_t{s} * 64 + j] : out.tables.switches[s].lft[lid];
    };
    auto set = [&](uint32_t s, uint8_t e) {
      if (all) w.tile_new[size_t{s} * 64 + j] = e;
      else out.tables.switches[s].lft[lid] = e;
      if (e == old_at(s)) return;
      ++w.entries_changed;
      w.changed.push_back(s);
      if (!all) w.blocks.add(s, lid >> 6);
    };
    if (target == kNone) {
      bool changed = false;
      for (uint32_t s = 0; s < S; ++s) {
        changed = changed || old_at(s) != kDropPort;
        set(s, kDropPort);
      }
      w.lids_rerouted += changed;
      return;
    }
    // Old routes, followed hop by hop and memoised: the shape of the old route from s0.
    std::fill(w.raw.begin(), w.raw.end(), kShapeUnknown);
    std::fill(w.shape.begin(), w.shape.end(), kShapeUnknown);
    if (!hubs.empty()) {
      std::fill(w.counted.begin(), w.counted.end(), 0);
      std::fill(w.hubbed.begin(), w.hubbed.end(), 0);
    }
    auto follow = [&](uint32_t s0) {
      if (w.raw[s0] != kShapeUnknown) return;
      if (g.component[s0] != g.component[target]) {
        w.raw[s0] = w.shape[s0] = kShapeCutOff;
        return;
      }
      w.stack.clear();
      uint32_t s = s0;
      uint8_t val;
      for (;;) {
        const uint8_t st = w.raw[s];
        if (st == kShapeBusy) {
          val = kShapeBroken;
          break;
        }
        if (st != kShapeUnknown) {
          val = st;
          break;
        }
        const uint8_t e = old_at(s);
        if (e == 0 || e > g.num_ports[s]) {
          val = e == 0 && s == target && final_port == 0 ? kShapeDown : kShapeBroken;
          w.raw[s] = w.shape[s] = val;
          break;
        }
        const RerouteLink& l = g.link(s, e);
        if (l.kind != RerouteLink::kSwitch) {
          val = l.kind == RerouteLink::kEnd && l.peer_port == owner ? kShapeDown : kShapeBroken;
          w.raw[s] = w.shape[s] = val;
          break;
        }
        w.raw[s] = kShapeBusy;
        w.stack.emplace_back(s, l.up);
        s = l.peer;
      }
      while (!w.stack.empty()) {
        const auto [x, up] = w.stack.back();
        w.stack.pop_back();
        if (val == kShapeDown) {
          val = up ? kShapeUpDown : kShapeDown;
        } else if (val == kShapeUpDown) {
          val = up ? kShapeUpDown : kShapeOffRule;
        }
        w.raw[x] = w.shape[x] = val;
      }
    };
    // Only the switches whose old route runs into a changed cable, found backwards from the
    // entries into one (reroute.h): every other route is the old one, up*/down*, delivering.
    const bool part = !all && partial[i];
    if (part) {
      ++w.followed_partly;
      std::fill(w.reached.begin(), w.reached.end(), 0);
      w.affected.assign(seeds.begin() + seed_begin[i], seeds.begin() + seed_begin[i + 1]);
      for (uint32_t s : w.affected) w.reached[s] = 1;
      for (size_t k = 0; k < w.affected.size(); ++k) {
        const uint32_t x = w.affected[k];
        // Towards a host every route was up*/down* (the proof lists no turn for the LID): a
        // switch above x that went down into x, where x's route climbs on, was not. So where
        // x's old next hop is a cable up, only the switches below it can lead into it (a
        // leaf's 24 spines at 3-tier k=48 are not read).
        const uint8_t ex = old_at(x);
        const bool climbs = !switch_lid && ex >= 1 && ex <= g.num_ports[x] &&
                            g.link(x, ex).kind == RerouteLink::kSwitch && g.link(x, ex).up;
        for (const auto* list : {&g.up[x], &g.down[x]}) {
          if (climbs && list == &g.up[x]) continue;
          for (const RerouteNeighbour& nb : *list) {
            const uint32_t y = nb.sw;
            if (w.reached[y]) continue;
            const uint8_t e = old_at(y);
            if (e == 0 || e > g.num_ports[y]) continue;
            const RerouteLink& l = g.link(y, e);
            if (l.kind != RerouteLink::kSwitch || l.peer != x) continue;
            w.reached[y] = 1;
            w.affected.push_back(y);
          }
        }
      }
      std::sort(w.affected.begin(), w.affected.end());
      for (uint32_t s : w.affected) follow(s);
    } else {
      for (uint32_t s0 = 0; s0 < S; ++s0) follow(s0);
    }
    // What must be up*/down*: towards a CA every switch's route; towards a switch the routes
    // from switches with a CA cabled (the only ones CA traffic takes; the rest carry what
    // switches send themselves, and need only deliver).
    // The switches routed again, those whose kept route is not up*/down*, and those cut off
    // are listed; every other entry stays as the tile holds it (the tile starts as the old
    // entries), so the passes below visit only the lists.
    w.broken.clear();
    w.offrule.clear();
    w.cutoff.clear();
    auto classify = [&](uint32_t s) {
      uint8_t& st = w.shape[s];
      if (st == kShapeOffRule && (!switch_lid || leaf[s])) st = kShapeBroken;
      if (st == kShapeBroken) w.broken.push_back(s);
      else if (st == kShapeOffRule) w.offrule.push_back(s);
      else if (st == kShapeCutOff) w.cutoff.push_back(s);
    };
    if (part) {
      for (uint32_t s : w.affected) classify(s);
    } else {
      for (uint32_t s = 0; s < S; ++s) classify(s);
    }
    for (uint32_t s : w.cutoff) set(s, kDropPort);
    if (w.broken.empty()) {
      w.routes_kept += S - w.cutoff.size();
      return;
    }
    // Shortest up*/down* distances. Pure down: a breadth-first walk up from the owner's
    // switch (only the switches above it). Up* then down*: computed on demand, memoised,
    // for the few switches that are built again and their up-neighbours.
    if (w.distances_for != target) {
      w.distances_for = target;
      std::fill(w.d_down.begin(), w.d_down.end(), kRerouteInf);
      w.d_down[target] = 0;
      w.queue.assign(1, target);
      for (size_t i = 0; i < w.queue.size(); ++i) {
        const uint32_t x = w.queue[i];
        for (const RerouteNeighbour& nb : g.up[x])
          if (w.d_down[nb.sw] == kRerouteInf)
            w.d_down[nb.sw] = w.d_down[x] + 1, w.queue.push_back(nb.sw);
      }
      // A switch without a cable up (on a fat tree, every core) has no route that climbs.
      w.above.clear();
      for (uint32_t x : w.queue)
        if (!g.up[x].empty()) w.above.push_back(x);
      w.over.assign(w.queue.begin(), w.queue.end());
      std::fill(w.d_any.begin(), w.d_any.end(), kRerouteUnset);
    }
    auto any = [&](uint32_t s0) {
      if (w.d_any[s0] != kRerouteUnset) return w.d_any[s0];
      // Up-neighbours rank higher, so the walk ends; each switch is finished once all of
      // its up-neighbours are.
      w.walk.assign(1, s0);
      while (!w.walk.empty()) {
        const uint32_t x = w.walk.back();
        if (w.d_any[x] != kRerouteUnset) {  // reached twice, finished the first time
          w.walk.pop_back();
          continue;
        }
        bool ready = true;
        uint32_t best = w.d_down[x];
        for (const RerouteNeighbour& nb : g.up[x]) {
          const uint32_t d = w.d_any[nb.sw];
          if (d == kRerouteUnset) {
            w.walk.push_back(nb.sw);
            ready = false;
          } else if (d != kRerouteInf) {
            best = std::min(best, d + 1);
          }
        }
        if (!ready) continue;
        w.d_any[x] = best;
        w.walk.pop_back();
      }
      return w.d_any[s0];
    };
    // A switch that can go down towards the owner must (a packet may reach it on its way
    // down): an old route from it that goes up first, or down then up, is built again. A kept
    // off-rule route (towards a switch's own LID, from a switch without CAs) that a built
    // route climbs into is built again where it enters it (`enter`, below). Kept routes are
    // then pure down wherever a hop down may enter them, and up*/down* wherever a hop up may;
    // an off-rule route no route enters stays as it was (it carries only what its switch
    // sends, and delivers).
    // Partly followed, a switch not followed yet is followed and classified where a rule
    // below needs its shape: above the owner's switch here, and where a built route climbs
    // into it or a walk below passes it. `raw` keeps what following gave, so that following
    // later through a switch built again reads its old route's shape, as the whole walk did.
    auto reach = [&](uint32_t s) {
      if (!part || w.reached[s]) return;
      w.reached[s] = 1;
      follow(s);
      classify(s);
    };
    // The switches above the owner's that can climb; partly following a switch's own LID,
    // every switch above it: one whose old route goes down, then up (not up*/down*: it
    // carries what switches send themselves) must be found to be built again below.
    for (uint32_t s : part && switch_lid ? w.over : w.above) {
      if (part && !switch_lid && !w.reached[s] && w.shape[s] == kShapeUnknown) {
        // Not reached backwards from a changed cable, so its old route runs over none, and
        // it delivered up*/down* (the proof): pure down exactly when its first hop is. The
        // first hop says it without the walk (at 3-tier k=48, 600 switches above each LID).
        w.reached[s] = 1;
        const uint8_t e = old_at(s);
        const bool climbs = e >= 1 && e <= g.num_ports[s] &&
                            g.link(s, e).kind == RerouteLink::kSwitch && g.link(s, e).up;
        w.raw[s] = w.shape[s] = climbs ? kShapeUpDown : kShapeDown;
      } else {
        reach(s);
      }
      if (w.shape[s] == kShapeUpDown) w.shape[s] = kShapeBroken, w.broken.push_back(s);
    }
    for (uint32_t s : w.offrule)
      if (w.d_down[s] != kRerouteInf) w.shape[s] = kShapeBroken, w.broken.push_back(s);
    bool plain = false;
    for (uint32_t s : w.broken) plain = plain || any(s) == kRerouteInf;
    // Built routes without an up*/down* route follow shortest paths of any kind, so a kept
    // route of that kind that runs into one could be led back to where it started: it is
    // built again too. (Up*/down* routes, kept or built, never enter a switch without one.)
    if (plain) {
      for (size_t k = 0; k < w.offrule.size(); ++k) {  // reach() may list more
        const uint32_t s0 = w.offrule[k];
        if (w.shape[s0] != kShapeOffRule) continue;
        w.stack.clear();
        uint32_t s = s0;
        bool touches = false;
        for (;;) {
          reach(s);  // partly followed: classified as the whole walk would have
          const uint8_t st = w.shape[s];
          if (st == kShapeBroken && any(s) == kRerouteInf) {
            touches = true;
            break;
          }
          if (st != kShapeOffRule) break;  // kept and up*/down*, or already seen clear
          w.shape[s] = kShapeBusy;
          w.stack.emplace_back(s, false);
          const RerouteLink& l = g.link(s, old_at(s));
          s = l.peer;
        }
        for (const auto& [x, up] : w.stack) {
          w.shape[x] = touches ? kShapeBroken : kShapeClear;
          if (touches) w.broken.push_back(x);
        }
      }
      for (uint32_t x : w.offrule)
        if (w.shape[x] == kShapeClear) w.shape[x] = kShapeOffRule;
    }
    // Distances for the switches built without an up*/down* route: one more than a
    // neighbour's up*/down* distance, or than another such switch's; the few of them relax
    // until nothing changes. A kept route of any kind (towards a switch LID, from a switch
    // without CAs) delivers and enters none of them, so it ends such a route too, as a last
    // choice (counted S hops). Where one is still left without (nothing of that kind near), a
    // breadth-first walk from the owner's switch gives every switch its shortest distance of
    // any kind instead (`exact`).
    bool exact = false;
    auto plain_distance = [&](uint32_t n) {
      if (exact) return w.d_plain[n];
      const uint32_t a = any(n);
      if (a != kRerouteInf) return a;
      if (w.shape[n] == kShapeOffRule) return S;
      // Not followed: its old route delivers and, without an up*/down* route, is off-rule.
      if (part && !w.reached[n]) return S;
      return w.shape[n] == kShapeBroken ? w.d_plain[n] : kRerouteInf;
    };
    if (plain) {
      w.plain.clear();
      for (uint32_t s : w.broken)
        if (any(s) == kRerouteInf) {
          w.plain.push_back(s);
          w.d_plain[s] = kRerouteInf;
        }
      for (bool changed = true; changed;) {
        changed = false;
        for (uint32_t s : w.plain)
          for (const auto* list : {&g.up[s], &g.down[s]})
            for (const RerouteNeighbour& nb : *list) {
              const uint32_t d = plain_distance(nb.sw);
              if (d != kRerouteInf && d + 1 < w.d_plain[s]) w.d_plain[s] = d + 1, changed = true;
            }
      }
      for (uint32_t s : w.plain) exact = exact || w.d_plain[s] == kRerouteInf;
      if (exact) {
        std::fill(w.d_plain.begin(), w.d_plain.end(), kRerouteInf);
        w.d_plain[target] = 0;
        w.queue.assign(1, target);
        for (size_t i = 0; i < w.queue.size(); ++i)
          for (const auto* list : {&g.up[w.queue[i]], &g.down[w.queue[i]]})
            for (const RerouteNeighbour& nb : *list)
              if (w.d_plain[nb.sw] == kRerouteInf)
                w.d_plain[nb.sw] = w.d_plain[w.queue[i]] + 1, w.queue.push_back(nb.sw);
      }
    }
    w.routes_kept += S - w.cutoff.size() - w.broken.size();
    // Partly followed, a switch a built route may enter and not followed yet is followed now.
    // An off-rule route a built route climbs into is built again (an up*/down* one is there);
    // a route to the hub takes the hub's way on from every switch it enters that has no
    // up*/down* route of its own, so it turns only where it meets one (on a fat tree, at the
    // hub): a kept off-rule route there is built again too.
    auto enter = [&](uint32_t u, bool to_hub = false) {
      // Towards a host, a switch not reached yet has a kept route that delivers up*/down*
      // (its old one, over no changed cable): following it would list nothing.
      if (part && !switch_lid && !to_hub && !w.reached[u]) return;
      const size_t listed = w.broken.size();
      reach(u);
      if (w.shape[u] == kShapeOffRule && (to_hub || any(u) != kRerouteInf)) {
        w.shape[u] = kShapeBroken;
        w.broken.push_back(u);
      }
      w.routes_kept -= w.broken.size() - listed;  // counted as kept above
    };
    for (size_t b = 0; b < w.broken.size(); ++b) {
      const uint32_t s = w.broken[b];
      if (s == target) {
        set(s, final_port);
        continue;
      }
      // A hop down to a switch one closer, or up to one whose up*/down* distance is one
      // less, continues as a legal route (built ones follow these same rules); equal
      // candidates are spread by LID.
      w.candidates.clear();
      if (w.d_down[s] != kRerouteInf) {
        for (const RerouteNeighbour& nb : g.down[s])
          if (w.d_down[nb.sw] + 1 == w.d_down[s]) w.candidates.push_back(nb.port);
      } else if (any(s) != kRerouteInf) {
        for (const RerouteNeighbour& nb : g.up[s]) {
          if (any(nb.sw) == kRerouteInf || any(nb.sw) + 1 != any(s)) continue;
          w.candidates.push_back(nb.port);
          enter(nb.sw);
        }
      } else {
        // No up*/down* route (a core that lost its one cable into a pod, towards that pod; a
        // pod's switches towards that core): a shortest route of any kind. Unless it only
        // carries what a switch sends to another switch's own LID, the construction proves
        // nothing for it: the result is not proven free of credit loops.
        if (!switch_lid || leaf[s]) w.unproven = true;
        // A route that counts (CheckCreditLoops's rule: towards a CA every switch's, towards
        // a switch from a switch with a CA cabled and on from there) goes towards the hub,
        // which has an up*/down* route to every switch, so that every such route turns at the
        // one switch (on a fat tree), where no chain of turns can close a credit loop. Every
        // switch on its way without an up*/down* route of its own takes the hub's way on too:
        // a kept off-rule route there is built again, and so is one built before a route that
        // counts entered it. The others only deliver, and keep to their old ways below.
        // The first hub that both this switch and the owner's reach up* then down*.
        auto hub_for = [&](uint32_t x) {
          uint8_t h = 0;
          while (h < no_hub && !(hubs[h].cover[x] && hubs[h].cover[target])) ++h;
          return h;
        };
        const uint8_t h = hubs.empty() ? no_hub : hub_for(s);
        if (h != no_hub && (!switch_lid || leaf[s] || w.counted[s])) {
          set(s, hubs[h].port[s]);
          w.hubbed[s] = kToHub;
          w.hub[s] = h;
          w.counted[s] = 1;
          for (uint32_t x = s;;) {
            const Hub& via = hubs[w.hub[x]];
            const uint32_t v = g.link(x, via.port[x]).peer;
            if (w.counted[v]) break;
            w.counted[v] = 1;
            enter(v, /*to_hub=*/true);
            if (w.hubbed[v] == kOwnWay) {
              if (entry(v) != old_at(v)) {  // set() counts and lists it again where it differs
                --w.entries_changed;
                w.changed.erase(std::find(w.changed.begin(), w.changed.end(), v));
              }
              set(v, via.port[v]);  // v is on the way to that hub, so that hub covers it
              w.hubbed[v] = kToHub;
              w.hub[v] = w.hub[x];
            }
            if (w.hubbed[v] != kToHub) break;  // up*/down* from v, or v is built later
            x = v;
          }
          continue;
        }
        if (!hubs.empty()) w.hubbed[s] = kOwnWay;
        for (const auto* list : {&g.up[s], &g.down[s]})
          for (const RerouteNeighbour& nb : *list) {
            const uint32_t d = plain_distance(nb.sw);
            if (d != kRerouteInf && d + 1 == w.d_plain[s]) w.candidates.push_back(nb.port);
          }
        // One candidate: the old next hop where it is one, else the lowest port, as updn
        // does: the turns such routes make stay few and the same for every LID, where
        // spreading them closes credit loops through the legal routes between them.
        std::sort(w.candidates.begin(), w.candidates.end());
        const uint8_t was = old_at(s);
        if (std::find(w.candidates.begin(), w.candidates.end(), was) != w.candidates.end())
          w.candidates.assign(1, was);
        if (!w.candidates.empty()) {
          w.candidates.resize(1);
          enter(g.link(s, w.candidates[0]).peer);
        }
      }
      if (w.candidates.empty()) {
        if (lid < w.error_lid) {
          w.error_lid = lid;
          w.error = fmt::format("switch {} has no up*/down* route to LID {}",
                                f.node(g.node[s]).description, lid);
        }
        set(s, kDropPort);
        continue;
      }
      // The old next hop, where it is one of them: only what is downstream changes.
      const uint8_t was = old_at(s);
      const bool again =
          std::find(w.candidates.begin(), w.candidates.end(), was) != w.candidates.end();
      set(s, again ? was : w.candidates[lid % w.candidates.size()]);
    }
    ++w.lids_rerouted;
  };

  // Per examined LID with the same owner: the switches (indices) whose entry may differ.
  std::vector<std::vector<uint32_t>> changed_at(same_owner.size());
  // Examining every LID, the rows start empty: no block is known to hold the old entries.
  const size_t block_words = all ? 0 : (size_t{max_lid} / 64 + 1 + 63) / 64;
  out.blocks_changed.resize(S, block_words);
  // Columns in runs of 64, so workers mostly write disjoint cache lines.
  const size_t runs = (examine.size() + 63) / 64;
  std::mutex mu;
  RerouteStats stats;
  std::string error;
  uint32_t error_lid = kRerouteInf;
  struct RerouteWorker {
    RerouteScratch w;
    RerouteStats* stats;
    std::string* error;
    uint32_t* error_lid;
    std::mutex* mu;
    BlockSet* blocks;
    ~RerouteWorker() {
      std::lock_guard<std::mutex> lock(*mu);
      for (size_t i = 0; i < w.blocks.bits.size(); ++i) blocks->bits[i] |= w.blocks.bits[i];
      stats->lids_rerouted += w.lids_rerouted;
      stats->entries_changed += w.entries_changed;
      stats->routes_kept += w.routes_kept;
      stats->lids_followed_partly += w.followed_partly;
      stats->unproven = stats->unproven || w.unproven;
      // The lowest LID's, whatever the thread count.
      if (w.error_lid < *error_lid) *error = w.error, *error_lid = w.error_lid;
    }
  };
  ParallelFor(
      runs, threads,
      [&] {
        auto worker = std::make_unique<RerouteWorker>();
        worker->w.raw.resize(S);
        worker->w.shape.resize(S);
        worker->w.reached.resize(S);
        worker->w.counted.resize(S);
        worker->w.hubbed.resize(S);
        worker->w.hub.resize(S);
        worker->w.d_down.resize(S);
        worker->w.d_any.resize(S);
        worker->w.d_plain.resize(S);
        worker->w.tile_old.resize(size_t{S} * 64);
        worker->w.loaded.resize(S);
        if (all) worker->w.tile_new.resize(size_t{S} * 64);
        worker->stats = &stats;
        worker->error = &error;
        worker->error_lid = &error_lid;
        worker->mu = &mu;
        worker->w.blocks.resize(S, block_words);
        worker->blocks = &out.blocks_changed;
        return worker;
      },
      [&](std::unique_ptr<RerouteWorker>& worker, size_t b) {
        RerouteScratch& w = worker->w;
        const size_t first = b * 64, n = std::min(examine.size(), first + 64) - first;
        // LIDs in a run (every LID examined, or a block of them): 64 bytes of a row at once.
        w.run_lo = examine[first];
        w.run_n = static_cast<uint32_t>(n);
        w.run_contiguous = examine[first + n - 1] - w.run_lo == n - 1;
        for (size_t j = 0; j < n; ++j) w.run_off[j] = examine[first + j] - w.run_lo;
        w.lazy = !all;
        for (size_t j = 0; j < n && w.lazy; ++j) w.lazy = partial[first + j];
        if (w.lazy) {
          std::fill(w.loaded.begin(), w.loaded.end(), 0);
        } else {
          for (uint32_t sw = 0; sw < S; ++sw) gather(w, sw);
        }
        if (all) std::copy_n(w.tile_old.begin(), size_t{S} * 64, w.tile_new.begin());
        for (size_t j = 0; j < n; ++j) {
          const size_t i = first + j;
          column(w, i, j);
          if (i < same_owner.size() && same_owner[i]) {
            std::vector<uint32_t>& list = changed_at[i];
            list.assign(seeds.begin() + seed_begin[i], seeds.begin() + seed_begin[i + 1]);
            list.insert(list.end(), w.changed.begin(), w.changed.end());
          }
        }
        for (uint32_t sw = 0; sw < S && all; ++sw) {
          std::vector<uint8_t>& lft = out.tables.switches[sw].lft;
          for (size_t j = 0; j < n; ++j) lft[examine[first + j]] = w.tile_new[size_t{sw} * 64 + j];
        }
      });
  if (!error.empty()) return Status(StatusCode::kFailedPrecondition, error);
  stats.lids_examined = examine.size();
  // Switch indices ascend with NodeIds, so a sorted list of indices is a sorted list of nodes.
  EntryChanges& changes = out.changes;
  changes.known.assign(examine.size(), 0);
  changes.begin.assign(1, 0);
  for (size_t i = 0; i < examine.size(); ++i) {
    if (i < same_owner.size() && same_owner[i]) {
      std::vector<uint32_t>& list = changed_at[i];
      std::sort(list.begin(), list.end());
      list.erase(std::unique(list.begin(), list.end()), list.end());
      changes.known[i] = 1;
      for (uint32_t s : list) changes.nodes.push_back(g.node[s]);
    }
    changes.begin.push_back(static_cast<uint32_t>(changes.nodes.size()));
  }
  out.examined = std::move(examine);
  stats.proven = all && !stats.unproven;
  out.stats = stats;
  return out;
}

}  // namespace ibsm::routing
