#include "routing/updown_proof.h"

#include <algorithm>
#include <deque>
#include <mutex>
#include <unordered_map>

#include <fmt/format.h>

#include "fabric/aggregation_node.h"
#include "routing/parallel.h"

namespace ibsm::routing {

std::vector<uint32_t> LeafDistanceRanks(const Fabric& f) {
  std::vector<uint32_t> rank(f.node_count(), kNone);
  std::deque<NodeId> queue;
  for (NodeId n = 0; n < f.node_count(); ++n) {
    const Node& node = f.node(n);
    if (!node.is_switch()) continue;
    for (uint32_t p = 1; p <= node.num_ports; ++p) {
      const Port& port = f.port(node.first_port + p);
      if (port.connected() && !f.node(f.port(port.peer).node).is_switch()) {
        rank[n] = 0;
        queue.push_back(n);
        break;
      }
    }
  }
  while (!queue.empty()) {
    const NodeId n = queue.front();
    queue.pop_front();
    const Node& node = f.node(n);
    for (uint32_t p = 1; p <= node.num_ports; ++p) {
      const Port& port = f.port(node.first_port + p);
      if (!port.connected()) continue;
      const NodeId m = f.port(port.peer).node;
      if (!f.node(m).is_switch() || rank[m] != kNone) continue;
      rank[m] = rank[n] + 1;
      queue.push_back(m);
    }
  }
  return rank;
}

std::vector<uint32_t> UpDownRanks(const Fabric& f, const std::vector<Guid>& root_guids) {
  const std::vector<uint32_t> leaf = LeafDistanceRanks(f);
  std::vector<NodeId> tops, switches;
  for (NodeId n = 0; n < f.node_count(); ++n)
    if (f.node(n).is_switch()) switches.push_back(n);
  for (Guid g : root_guids) {
    const auto n = f.FindNode(g);
    if (n && f.node(*n).is_switch()) tops.push_back(*n);
  }
  auto bfs = [&f](const std::vector<NodeId>& from) {
    std::vector<uint32_t> d(f.node_count(), kNone);
    std::deque<NodeId> queue;
    for (NodeId n : from) d[n] = 0, queue.push_back(n);
    while (!queue.empty()) {
      const NodeId n = queue.front();
      queue.pop_front();
      for (uint32_t p = 1; p <= f.node(n).num_ports; ++p) {
        const Port& port = f.port(f.node(n).first_port + p);
        if (!port.connected()) continue;
        const NodeId m = f.port(port.peer).node;
        if (f.node(m).is_switch() && d[m] == kNone) d[m] = d[n] + 1, queue.push_back(m);
      }
    }
    return d;
  };
  if (tops.empty()) {
    uint32_t height = 0;
    for (NodeId n : switches)
      if (leaf[n] != kNone) height = std::max(height, leaf[n]);
    for (NodeId n : switches)
      if (leaf[n] == height) tops.push_back(n);
    if (tops.size() == switches.size() && switches.size() > 1) {
      NodeId centre = switches.front();
      uint32_t best = kNone;
      for (NodeId n : switches) {
        const auto d = bfs({n});
        uint32_t far = 0;
        for (NodeId m : switches) far = std::max(far, d[m]);
        if (far < best) best = far, centre = n;
      }
      tops.assign(1, centre);
    }
  }
  std::vector<uint32_t> rank = bfs(tops);
  // A component without a top: its own distance from the CAs, turned upside down.
  for (NodeId n : switches)
    if (rank[n] == kNone) rank[n] = leaf[n] == kNone ? 0 : kNone - 1 - leaf[n];
  return rank;
}

// Named, not anonymous: the unity build puts this file beside the other routing sources.
namespace updown_impl {

// Distinct turns related pairwise: past this many the proof is not attempted.
constexpr size_t kMaxDistinctTurns = 4096;

// The switches as dense indices, each port's far switch and direction under the ranking.
struct ProofGraph {
  std::vector<NodeId> node;      // switch index -> NodeId
  std::vector<uint32_t> index;   // NodeId -> switch index (kNone: not a switch)
  std::vector<size_t> base;      // per switch: port p at base + p
  std::vector<uint32_t> peer;    // switch index at the far end, or kNone
  std::vector<uint8_t> up;       // 1: the port leads to a higher switch
  std::vector<uint8_t> num_ports;
  std::vector<uint8_t> leaf;     // a CA or router cabled (not an aggregation node)
  std::vector<const std::vector<uint8_t>*> lft;

  ProofGraph(const Fabric& f, const RoutingTables& tables, const std::vector<uint32_t>& rank) {
    index.assign(f.node_count(), kNone);
    for (NodeId n = 0; n < f.node_count(); ++n)
      if (f.node(n).is_switch()) index[n] = static_cast<uint32_t>(node.size()), node.push_back(n);
    auto higher = [&](NodeId a, NodeId b) {
      return rank[a] != rank[b] ? rank[a] < rank[b] : f.node(a).guid < f.node(b).guid;
    };
    for (uint32_t s = 0; s < node.size(); ++s) {
      const Node& nd = f.node(node[s]);
      base.push_back(peer.size());
      num_ports.push_back(nd.num_ports);
      uint8_t has_ca = 0;
      for (uint32_t p = 0; p <= nd.num_ports; ++p) {
        const Port& port = f.port(nd.first_port + p);
        uint32_t far = kNone;
        uint8_t dir = 0;
        if (p != 0 && port.connected()) {
          const NodeId m = f.port(port.peer).node;
          if (f.node(m).is_switch()) {
            far = index[m];
            dir = higher(m, node[s]) ? 1 : 0;
          } else if (!IsAggregationNode(f.node(m))) {
            has_ca = 1;
          }
        }
        peer.push_back(far);
        up.push_back(dir);
      }
      leaf.push_back(has_ca);
      const SwitchTable* t = tables.table(node[s]);
      lft.push_back(t ? &t->lft : nullptr);
    }
  }
  size_t size() const { return node.size(); }
  uint8_t Entry(uint32_t s, uint32_t lid) const {
    return lft[s] && lid < lft[s]->size() ? (*lft[s])[lid] : kDropPort;
  }
  // The switch port `e` of switch s leads to, or kNone (port 0, out of range, uncabled, end).
  uint32_t Next(uint32_t s, uint8_t e) const {
    return e == 0 || e > num_ports[s] ? kNone : peer[base[s] + e];
  }
};

struct ProofTurn {
  uint16_t lid;
  uint32_t from, via, to;  // switch indices
};

// Per worker: one tile of up to 64 LIDs at a time, switch-major, read row by row (a column
// read straight from the row-major tables misses the cache once a switch).
struct ProofScratch {
  std::vector<uint8_t> tile;
  std::vector<uint8_t> carried;
  std::vector<ProofTurn> turns;
};

// Appends the turns of the `n` LIDs lids[0..n) (gathered into w.tile) to w.turns.
void TileTurns(const ProofGraph& g, const LidMap& lids, const Fabric& f, const uint32_t* col,
               size_t n, ProofScratch& w) {
  const uint32_t S = static_cast<uint32_t>(g.size());
  for (uint32_t s = 0; s < S; ++s)
    for (size_t j = 0; j < n; ++j) w.tile[size_t{s} * 64 + j] = g.Entry(s, col[j]);
  for (size_t j = 0; j < n; ++j) {
    const uint32_t lid = col[j];
    const PortId owner = lids.owner(Lid(static_cast<uint16_t>(lid)));
    if (owner == kNoPort) continue;
    auto at = [&](uint32_t s) { return w.tile[size_t{s} * 64 + j]; };
    const Node& on = f.node(f.port(owner).node);
    const bool all = !(on.is_switch() || IsAggregationNode(on));
    if (!all) {
      // Towards a switch: the switches on routes from the switches with a CA cabled.
      std::fill(w.carried.begin(), w.carried.end(), 0);
      for (uint32_t s = 0; s < S; ++s) {
        if (!g.leaf[s]) continue;
        for (uint32_t cur = s, hops = 0; cur != kNone && !w.carried[cur] && hops < S; ++hops) {
          w.carried[cur] = 1;
          cur = g.Next(cur, at(cur));
        }
      }
    }
    for (uint32_t x = 0; x < S; ++x) {
      if (!all && !w.carried[x]) continue;
      const uint8_t e = at(x);
      const uint32_t y = g.Next(x, e);
      if (y == kNone || g.up[g.base[x] + e]) continue;
      const uint8_t e2 = at(y);
      const uint32_t z = g.Next(y, e2);
      if (z == kNone || !g.up[g.base[y] + e2]) continue;
      w.turns.push_back({static_cast<uint16_t>(lid), x, y, z});
    }
  }
}

// The turns of the LIDs of `col` (ascending), in LID order.
std::vector<ProofTurn> ColumnTurns(const ProofGraph& g, const LidMap& lids, const Fabric& f,
                                   const std::vector<uint32_t>& col, unsigned threads) {
  const size_t tiles = (col.size() + 63) / 64;
  std::vector<std::vector<ProofTurn>> per_tile(tiles);
  ParallelFor(
      tiles, threads,
      [&] {
        auto w = std::make_unique<ProofScratch>();
        w->tile.resize(g.size() * 64);
        w->carried.resize(g.size());
        return w;
      },
      [&](std::unique_ptr<ProofScratch>& w, size_t t) {
        w->turns.clear();
        const size_t first = t * 64;
        TileTurns(g, lids, f, col.data() + first, std::min<size_t>(64, col.size() - first), *w);
        per_tile[t] = w->turns;
      });
  std::vector<ProofTurn> out;
  for (auto& v : per_tile) out.insert(out.end(), v.begin(), v.end());
  return out;
}

// The turns of the changed LIDs that `changes` knows the switches of, where neither prior
// lists a turn for the LID nor the LID is a switch's (whose counted routes depend on which
// switches CA traffic reaches): every switch's entry counts, and a turn (x, y, z) whose x and
// y both kept their entries over the same cables was one of the old tables, which prior would
// list. So only the turns at a listed switch or just after one are new. The other changed
// LIDs go to `whole` (ascending), to be read in full. In LID order, by `from` within a LID,
// as ColumnTurns gives them.
std::vector<ProofTurn> NearTurns(const ProofGraph& g, const LidMap& lids, const Fabric& f,
                                 const UpDownProof& prior, const std::vector<uint32_t>& changed,
                                 const EntryChanges& changes, std::vector<uint32_t>& whole,
                                 unsigned threads) {
  std::vector<uint8_t> turned(size_t{lids.max_lid()} + 1, 0);
  for (const RouteTurn& t : prior.turns)
    if (t.lid < turned.size()) turned[t.lid] = 1;
  // In chunks of LIDs on the workers (each entry read is a cache miss into another switch's
  // row: 13 ms for 27,648 LIDs at 3-tier k=48 on one thread), joined in LID order.
  constexpr size_t kChunk = 512;
  const size_t chunks = (changed.size() + kChunk - 1) / kChunk;
  struct Part {
    std::vector<ProofTurn> turns;
    std::vector<uint32_t> whole;
  };
  std::vector<Part> parts(chunks);
  ParallelFor(chunks, threads, [&](size_t c) {
    Part& part = parts[c];
    std::vector<ProofTurn> here;
    for (size_t i = c * kChunk; i < changed.size() && i < (c + 1) * kChunk; ++i) {
      const uint32_t lid = changed[i];
      const PortId owner = lid <= lids.max_lid() ? lids.owner(Lid(static_cast<uint16_t>(lid)))
                                                 : kNoPort;
      if (owner == kNoPort) continue;  // no routes towards it count
      const Node& on = f.node(f.port(owner).node);
      bool near = i < changes.known.size() && changes.known[i] && !turned[lid] &&
                  !on.is_switch() && !IsAggregationNode(on);
      here.clear();
      auto turn_at = [&](uint32_t x) {
        const uint8_t e = g.Entry(x, lid);
        const uint32_t y = g.Next(x, e);
        if (y == kNone || g.up[g.base[x] + e]) return;
        const uint8_t e2 = g.Entry(y, lid);
        const uint32_t z = g.Next(y, e2);
        if (z != kNone && g.up[g.base[y] + e2])
          here.push_back({static_cast<uint16_t>(lid), x, y, z});
      };
      for (uint32_t k = near ? changes.begin[i] : 0; near && k < changes.begin[i + 1]; ++k) {
        const NodeId n = changes.nodes[k];
        const uint32_t y = n < g.index.size() ? g.index[n] : kNone;
        if (y == kNone) {
          near = false;
          break;
        }
        turn_at(y);
        // Switches above y whose entry leads down into it.
        for (uint32_t p = 1; p <= g.num_ports[y]; ++p) {
          const uint32_t x = g.peer[g.base[y] + p];
          if (x == kNone || !g.up[g.base[y] + p]) continue;
          if (g.Next(x, g.Entry(x, lid)) == y) turn_at(x);
        }
      }
      if (!near) {
        part.whole.push_back(lid);
        continue;
      }
      std::sort(here.begin(), here.end(), [](const ProofTurn& a, const ProofTurn& b) {
        return a.from < b.from;
      });
      here.erase(std::unique(here.begin(), here.end(),
                             [](const ProofTurn& a, const ProofTurn& b) {
                               return a.from == b.from;
                             }),
                 here.end());
      part.turns.insert(part.turns.end(), here.begin(), here.end());
    }
  });
  std::vector<ProofTurn> out;
  for (Part& part : parts) {
    out.insert(out.end(), part.turns.begin(), part.turns.end());
    whole.insert(whole.end(), part.whole.begin(), part.whole.end());
  }
  return out;
}

// OK when no chain of the turns leads back to where it started (see the header).
Status TurnsCloseNoLoop(const ProofGraph& g, const Fabric& f, const std::vector<ProofTurn>& all) {
  struct Key {
    uint32_t from, via, to;
    bool operator==(const Key&) const = default;
  };
  std::vector<Key> turns;
  for (const ProofTurn& t : all) turns.push_back({t.from, t.via, t.to});
  std::sort(turns.begin(), turns.end(), [](const Key& a, const Key& b) {
    return std::tie(a.from, a.via, a.to) < std::tie(b.from, b.via, b.to);
  });
  turns.erase(std::unique(turns.begin(), turns.end()), turns.end());
  if (turns.empty()) return Status::Ok();
  if (turns.size() > kMaxDistinctTurns) {
    return Status(StatusCode::kFailedPrecondition,
                  fmt::format("{} distinct down-then-up turns, more than the proof relates",
                              turns.size()));
  }
  // For every distinct up channel (via -> to) of a turn: where a path of dependencies from it
  // can go before the next turn, climbing from `to` and then descending, never straight back
  // over the cable it came by (a route that did would visit a switch twice, and VerifyTables
  // passes no such route). A switch climbed to is entered up from below; if only ever from
  // one switch, a channel down from it back into that one cannot follow. So per up channel:
  // `free`, the switches every down channel of which can follow (descended to, or climbed to
  // from two or more switches), and `single`, (switch, the one switch it was climbed to from).
  // Telling these apart is what lets the detours of a dead aggregation switch's cores, which
  // all turn at one leaf (routing/reroute.h), be proven: past the turn up to one spine, no
  // path comes back down into the leaf but through the spine it just left.
  struct Reach {
    std::vector<uint64_t> free;
    std::vector<std::pair<uint32_t, uint32_t>> single;  // by switch
  };
  const size_t S = g.size(), words = (S + 63) / 64;
  auto key = [](const Key& t) { return uint64_t{t.via} << 32 | t.to; };
  std::unordered_map<uint64_t, Reach> heads;
  std::vector<uint32_t> ups, queue;
  std::vector<uint32_t> pred(S, kNone);
  std::vector<uint8_t> multi(S, 0);
  auto each = [&](uint32_t s, bool up, auto&& fn) {
    for (uint32_t p = 1; p <= g.num_ports[s]; ++p) {
      const uint32_t m = g.peer[g.base[s] + p];
      if (m != kNone && (g.up[g.base[s] + p] != 0) == up) fn(m);
    }
  };
  for (const Key& t : turns) {
    auto [it, fresh] = heads.try_emplace(key(t));
    if (!fresh) continue;
    Reach& r = it->second;
    r.free.assign(words, 0);
    auto mark = [&](uint32_t s) {
      if (r.free[s >> 6] >> (s & 63) & 1) return;
      r.free[s >> 6] |= uint64_t{1} << (s & 63);
      queue.push_back(s);
    };
    queue.clear();
    ups.assign(1, t.to);
    pred[t.to] = t.via;
    for (size_t i = 0; i < ups.size(); ++i)
      each(ups[i], true, [&](uint32_t m) {
        if (pred[m] == kNone) {
          pred[m] = ups[i];
          ups.push_back(m);
        } else if (pred[m] != ups[i]) {
          multi[m] = 1;
        }
      });
    for (uint32_t s : ups)
      each(s, false, [&](uint32_t m) {
        if (multi[s] || m != pred[s]) mark(m);
      });
    for (size_t i = 0; i < queue.size(); ++i) each(queue[i], false, mark);
    for (uint32_t s : ups) {
      if (multi[s]) r.free[s >> 6] |= uint64_t{1} << (s & 63);
      else r.single.emplace_back(s, pred[s]);
      pred[s] = kNone;
      multi[s] = 0;
    }
    std::sort(r.single.begin(), r.single.end());
  }
  // Turn i leads to turn j when j's down channel (from -> via) can follow i's up channel on
  // such a path. A cycle of that relation (a turn leading to itself included) may be a
  // credit loop.
  auto leads = [&](const Key& i, const Key& j) {
    const Reach& r = heads.at(key(i));
    if (r.free[j.from >> 6] >> (j.from & 63) & 1) return true;
    auto at = std::lower_bound(r.single.begin(), r.single.end(),
                               std::pair<uint32_t, uint32_t>(j.from, 0));
    return at != r.single.end() && at->first == j.from && at->second != j.via;
  };
  const size_t T = turns.size();
  std::vector<uint8_t> color(T, 0);
  struct Frame {
    size_t turn, next;
  };
  std::vector<Frame> stack;
  for (size_t root = 0; root < T; ++root) {
    if (color[root]) continue;
    color[root] = 1;
    stack.push_back({root, 0});
    while (!stack.empty()) {
      Frame& fr = stack.back();
      size_t j = fr.next;
      while (j < T && !leads(turns[fr.turn], turns[j])) ++j;
      if (j == T) {
        color[fr.turn] = 2;
        stack.pop_back();
        continue;
      }
      fr.next = j + 1;
      if (color[j] == 1) {
        const Key& t = turns[j];
        return Status(StatusCode::kFailedPrecondition,
                      fmt::format("routes turn up again at {} (down from {}, up to {}), and a "
                                  "chain of such turns may close a credit loop",
                                  f.node(g.node[t.via]).description,
                                  f.node(g.node[t.from]).description,
                                  f.node(g.node[t.to]).description));
      }
      if (color[j] == 0) {
        color[j] = 1;
        stack.push_back({j, 0});
      }
    }
  }
  return Status::Ok();
}

Result<UpDownProof> Finish(const ProofGraph& g, const Fabric& f, std::vector<uint32_t> rank,
                           const std::vector<ProofTurn>& turns) {
  if (Status s = TurnsCloseNoLoop(g, f, turns); !s.ok()) return s;
  UpDownProof proof;
  proof.rank = std::move(rank);
  proof.turns.reserve(turns.size());
  for (const ProofTurn& t : turns)
    proof.turns.push_back({t.lid, g.node[t.from], g.node[t.via], g.node[t.to]});
  std::stable_sort(proof.turns.begin(), proof.turns.end(),
                   [](const RouteTurn& a, const RouteTurn& b) { return a.lid < b.lid; });
  return proof;
}

}  // namespace updown_impl

Result<UpDownProof> ProveUpDown(const Fabric& f, const LidMap& lids, const RoutingTables& tables,
                                std::vector<uint32_t> rank, unsigned threads) {
  using namespace updown_impl;
  if (rank.size() != f.node_count())
    return Status(StatusCode::kInvalidArgument, "the ranking is for another fabric");
  const ProofGraph g(f, tables, rank);
  std::vector<uint32_t> col;
  for (uint32_t lid = 1; lid <= lids.max_lid(); ++lid)
    if (lids.owner(Lid(static_cast<uint16_t>(lid))) != kNoPort) col.push_back(lid);
  return Finish(g, f, std::move(rank), ColumnTurns(g, lids, f, col, threads));
}

Result<UpDownProof> ReproveUpDown(const Fabric& f, const LidMap& lids,
                                  const RoutingTables& tables, const Fabric& before,
                                  const UpDownProof& prior, const std::vector<uint32_t>& changed,
                                  unsigned threads, const EntryChanges* changes) {
  using namespace updown_impl;
  // prior's ranking, carried over by GUID; who had a CA cabled then.
  std::vector<uint32_t> rank(f.node_count(), kNone);
  std::vector<NodeId> now_of(before.node_count(), kNone);
  bool new_leaf = false;
  auto has_ca = [](const Fabric& fab, NodeId n) {
    const Node& nd = fab.node(n);
    for (uint32_t p = 1; p <= nd.num_ports; ++p) {
      const Port& port = fab.port(nd.first_port + p);
      if (!port.connected()) continue;
      const Node& m = fab.node(fab.port(port.peer).node);
      if (!m.is_switch() && !IsAggregationNode(m)) return true;
    }
    return false;
  };
  for (NodeId n = 0; n < f.node_count(); ++n) {
    if (!f.node(n).is_switch()) continue;
    const auto was = before.FindNode(f.node(n).guid);
    if (!was || *was >= prior.rank.size() || prior.rank[*was] == kNone) {
      return Status(StatusCode::kFailedPrecondition,
                    fmt::format("switch {} is not in the proof's ranking", f.node(n).description));
    }
    rank[n] = prior.rank[*was];
    now_of[*was] = n;
    new_leaf = new_leaf || (has_ca(f, n) && !has_ca(before, *was));
  }
  const ProofGraph g(f, tables, rank);
  std::vector<uint32_t> col = changed;
  // Changed LIDs read at only the switches the change touched (see the header); `col` keeps
  // every changed LID, for dropping prior's turns of them.
  std::vector<uint32_t> whole_col;
  std::vector<ProofTurn> near =
      changes ? NearTurns(g, lids, f, prior, changed, *changes, whole_col, threads)
              : std::vector<ProofTurn>{};
  if (!changes) whole_col = changed;
  if (new_leaf) {
    for (uint32_t lid = 1; lid <= lids.max_lid(); ++lid) {
      const PortId owner = lids.owner(Lid(static_cast<uint16_t>(lid)));
      if (owner == kNoPort) continue;
      const Node& on = f.node(f.port(owner).node);
      if (on.is_switch() || IsAggregationNode(on)) col.push_back(lid), whole_col.push_back(lid);
    }
    for (auto* v : {&col, &whole_col}) {
      std::sort(v->begin(), v->end());
      v->erase(std::unique(v->begin(), v->end()), v->end());
    }
  }
  std::vector<ProofTurn> turns;
  for (const RouteTurn& t : prior.turns) {
    if (std::binary_search(col.begin(), col.end(), uint32_t{t.lid})) continue;
    const NodeId from = t.from < now_of.size() ? now_of[t.from] : kNone;
    const NodeId via = t.via < now_of.size() ? now_of[t.via] : kNone;
    const NodeId to = t.to < now_of.size() ? now_of[t.to] : kNone;
    if (from == kNone) continue;  // that switch is gone, and its routes with it
    if (via == kNone || to == kNone) {
      // Its route ran through a switch that is gone, yet its LID is said not to have changed.
      return Status(StatusCode::kFailedPrecondition,
                    fmt::format("LID {} is said unchanged, but its route crossed a switch "
                                "that is gone",
                                t.lid));
    }
    turns.push_back({t.lid, g.index[from], g.index[via], g.index[to]});
  }
  std::vector<ProofTurn> fresh = ColumnTurns(g, lids, f, whole_col, threads);
  turns.insert(turns.end(), fresh.begin(), fresh.end());
  turns.insert(turns.end(), near.begin(), near.end());
  return Finish(g, f, std::move(rank), turns);
}

}  // namespace ibsm::routing
