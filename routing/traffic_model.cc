#include "routing/traffic_model.h"

#include <algorithm>
#include <numeric>
#include <vector>

#include "routing/split_mix.h"

namespace ibsm::routing {
namespace {

constexpr int kMaxHopsFollowed = 64;
constexpr double kTiny = 1e-12;

struct TrafficHost {
  PortId port = kNoPort;
  NodeId leaf = kNoNode;
  uint16_t lid = 0;
};

struct Flow {
  uint32_t src, dst;
  double amount;
};

class Model {
 public:
  Model(const Fabric& f, const LidMap& lids, const RoutingTables& st, const ArTables* ar)
      : f_(f), st_(st), ar_(ar) {
    for (NodeId n = 0; n < f.node_count(); ++n) {
      const Node& node = f.node(n);
      if (!node.is_switch()) continue;
      for (uint32_t p = 1; p <= node.num_ports; ++p) {
        const Port& port = f.port(node.first_port + p);
        if (!port.connected()) continue;
        const PortId q = port.peer;
        const Port& host = f.port(q);
        if (f.node(host.node).is_switch() || !IsUnicast(host.lid) || lids.owner(host.lid) != q)
          continue;
        hosts_.push_back({q, n, host.lid.value()});
      }
    }
    load_.assign(f.port_count(), 0.0);
    slot_.assign(f.node_count(), -1);
  }

  size_t hosts() const { return hosts_.size(); }

  // Places `flows` with static routes or AR; adds this matrix's figures to `out`.
  void RunMatrix(const std::vector<Flow>& flows, bool use_ar, LoadFigures& out,
                 double& ebb_sum) {
    used_.clear();
    offsets_.assign(1, 0);
    std::vector<uint32_t> placed;
    for (uint32_t i = 0; i < flows.size(); ++i) {
      const size_t begin = used_.size();
      if (!Place(hosts_[flows[i].src], hosts_[flows[i].dst], flows[i].amount, use_ar)) {
        used_.resize(begin);
        ++out.unrouted;
        continue;
      }
      offsets_.push_back(static_cast<uint32_t>(used_.size()));
    }
    double worst = 0;
    for (PortId c : touched_) worst = std::max(worst, load_[c]);
    out.max_link_load = std::max(out.max_link_load, worst);
    const size_t n = offsets_.size() - 1;
    out.flows += n;
    if (n) {
      double sum = 0;
      for (size_t k = 0; k < n; ++k) {
        double m = 0;
        for (uint32_t j = offsets_[k]; j < offsets_[k + 1]; ++j) m = std::max(m, load_[used_[j]]);
        sum += m <= 1.0 ? 1.0 : 1.0 / m;
      }
      ebb_sum += sum / static_cast<double>(n);
    } else {
      ebb_sum += 1.0;
    }
    for (PortId c : touched_) load_[c] = 0;
    touched_.clear();
  }

 private:
  void Add(PortId c, double a) {
    if (load_[c] == 0) touched_.push_back(c);
    load_[c] += a;
    used_.push_back(c);
  }

  // The ports switch `sw` sends `amount` of a flow towards `lid` on, with their shares.
  void Choose(NodeId sw, uint16_t lid, double amount, bool use_ar) {
    choice_.clear();
    const ArSwitchTable* t = use_ar && ar_ ? ar_->table(sw) : nullptr;
    if (t && lid < t->lft.size()) {
      const ArEntry& e = t->lft[lid];
      const std::vector<uint8_t>* g =
          e.mode != ArLidMode::kStatic && e.group < t->groups.size() ? &t->groups[e.group]
                                                                      : nullptr;
      if (g && !g->empty()) {
        const PortId first = f_.node(sw).first_port;
        if (e.mode == ArLidMode::kBounded) {
          uint8_t best = e.default_port;
          double best_load = 1e300;
          for (uint8_t p : *g) {
            const double l = load_[first + p];
            if (l < best_load - kTiny ||
                (l < best_load + kTiny && p == e.default_port)) {
              best = p;
              best_load = l;
            }
          }
          if (std::find(g->begin(), g->end(), e.default_port) != g->end() &&
              load_[first + e.default_port] <= best_load + kTiny)
            best = e.default_port;
          choice_.push_back({best, amount});
          return;
        }
        // Free: water-filling. Sort by load, raise the lowest to a common level.
        order_.assign(g->begin(), g->end());
        std::stable_sort(order_.begin(), order_.end(), [&](uint8_t a, uint8_t b) {
          return load_[first + a] < load_[first + b];
        });
        double sum = 0, level = 0;
        size_t j = 0;
        for (; j < order_.size(); ++j) {
          sum += load_[first + order_[j]];
          level = (amount + sum) / static_cast<double>(j + 1);
          if (j + 1 == order_.size() || level <= load_[first + order_[j + 1]]) break;
        }
        for (size_t i = 0; i <= j && i < order_.size(); ++i) {
          const double s = level - load_[first + order_[i]];
          if (s > kTiny) choice_.push_back({order_[i], s});
        }
        if (choice_.empty()) choice_.push_back({order_[0], amount});
        return;
      }
      choice_.push_back({e.default_port, amount});
      return;
    }
    const SwitchTable* s = st_.table(sw);
    choice_.push_back({s && lid < s->lft.size() ? s->lft[lid] : kDropPort, amount});
  }

  bool Fail() {
    for (const auto& x : next_) slot_[x.first] = -1;
    return false;
  }

  bool Place(const TrafficHost& src, const TrafficHost& dst, double amount, bool use_ar) {
    Add(src.port, amount);
    frontier_.assign(1, {src.leaf, amount});
    for (int hop = 0; hop < kMaxHopsFollowed && !frontier_.empty(); ++hop) {
      next_.clear();
      for (const auto& [sw, a] : frontier_) {
        Choose(sw, dst.lid, a, use_ar);
        const Node& node = f_.node(sw);
        for (const auto& [p, share] : choice_) {
          if (p == 0 || p > node.num_ports) return Fail();
          const PortId c = node.first_port + p;
          const Port& out = f_.port(c);
          if (!out.connected()) return Fail();
          Add(c, share);
          if (out.peer == dst.port) continue;
          const NodeId nn = f_.port(out.peer).node;
          if (!f_.node(nn).is_switch()) return Fail();
          int32_t& slot = slot_[nn];
          if (slot < 0) {
            slot = static_cast<int32_t>(next_.size());
            next_.push_back({nn, share});
          } else {
            next_[slot].second += share;
          }
        }
      }
      for (const auto& x : next_) slot_[x.first] = -1;
      frontier_.swap(next_);
    }
    return frontier_.empty();
  }

  const Fabric& f_;
  const RoutingTables& st_;
  const ArTables* ar_;
  std::vector<TrafficHost> hosts_;
  std::vector<double> load_;
  std::vector<PortId> touched_;
  std::vector<PortId> used_;
  std::vector<uint32_t> offsets_;
  std::vector<std::pair<uint8_t, double>> choice_;
  std::vector<uint8_t> order_;
  std::vector<std::pair<NodeId, double>> frontier_, next_;
  std::vector<int32_t> slot_;  // by NodeId: index in next_, -1 when absent
};

}  // namespace

std::string_view TrafficPatternName(TrafficPattern p) {
  switch (p) {
    case TrafficPattern::kShift: return "shift";
    case TrafficPattern::kRandom: return "random";
    case TrafficPattern::kAllToAll: return "alltoall";
  }
  return "?";
}

Result<TrafficPattern> ParseTrafficPattern(std::string_view s) {
  if (s == "shift") return TrafficPattern::kShift;
  if (s == "random") return TrafficPattern::kRandom;
  if (s == "alltoall") return TrafficPattern::kAllToAll;
  return InvalidArgument("traffic pattern must be shift, random or alltoall, not '" +
                         std::string(s) + "'");
}

TrafficReport RunTraffic(const Fabric& fabric, const LidMap& lids,
                         const RoutingTables& static_tables, const ArTables* ar,
                         const TrafficOptions& options) {
  Model model(fabric, lids, static_tables, ar);
  TrafficReport report;
  const uint32_t N = static_cast<uint32_t>(model.hosts());
  report.hosts = N;
  if (N < 2) return report;
  uint32_t matrices = 1;
  if (options.pattern == TrafficPattern::kShift) matrices = std::clamp(options.count, 1u, N - 1);
  if (options.pattern == TrafficPattern::kRandom) matrices = std::max(options.count, 1u);
  report.matrices = matrices;
  std::vector<Flow> flows;
  std::vector<uint32_t> dst(N);
  double static_ebb = 0, ar_ebb = 0;
  uint32_t done = 0;
  for (uint32_t m = 0; m < matrices; ++m) {
    if (options.cancel != nullptr && options.cancel->load(std::memory_order_relaxed)) {
      report.cancelled = true;
      break;
    }
    flows.clear();
    if (options.pattern == TrafficPattern::kAllToAll) {
      const double a = 1.0 / (N - 1);
      for (uint32_t i = 0; i < N; ++i)
        for (uint32_t j = 0; j < N; ++j)
          if (i != j) flows.push_back({i, j, a});
    } else {
      if (options.pattern == TrafficPattern::kShift) {
        for (uint32_t i = 0; i < N; ++i) dst[i] = (i + m + 1) % N;
      } else {
        RandomPermutation(options.seed, m, &dst);
      }
      for (uint32_t i = 0; i < N; ++i)
        if (dst[i] != i) flows.push_back({i, dst[i], 1.0});
    }
    model.RunMatrix(flows, false, report.static_routes, static_ebb);
    model.RunMatrix(flows, true, report.ar, ar_ebb);
    ++done;
  }
  report.static_routes.ebb = done ? static_ebb / done : 0;
  report.ar.ebb = done ? ar_ebb / done : 0;
  return report;
}

}  // namespace ibsm::routing
