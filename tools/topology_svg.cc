// TopologySvg (tools/topology_view.h): rows of boxes, one row per switch tier and one for the
// hosts, each box an "item" (one node, or a group of nodes drawn as one), cables between the
// items' centres, a legend on the right.
#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <vector>

#include <fmt/format.h>

#include "base/json.h"
#include "base/text.h"
#include "tools/topology_style.h"
#include "tools/topology_view.h"

namespace ibsm::tools {

using nlohmann::json;

namespace {

constexpr double kCharW = 5.5;        // a character of the 9-unit sans-serif font, roughly
constexpr size_t kLabelChars = 20;    // names longer than this are cut, whole in <title>
constexpr double kLeft = 80;          // the row names' column
constexpr double kLegendW = 300;
constexpr size_t kListedUnhealthy = 40;  // unhealthy cables listed under the legend

// At most `max` characters (code points) of `raw` made valid UTF-8, "…" ending a cut one.
std::string SvgShorten(const std::string& raw, size_t max) {
  const std::string s = ValidUtf8(raw);
  size_t chars = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    if ((static_cast<unsigned char>(s[i]) & 0xC0) == 0x80) continue;
    if (chars == max - 1) {
      // Cut here only if more than one character follows.
      size_t rest = 0;
      for (size_t j = i; j < s.size(); ++j)
        rest += (static_cast<unsigned char>(s[j]) & 0xC0) != 0x80;
      if (rest > 1) return s.substr(0, i) + "\u2026";
      return s;
    }
    ++chars;
  }
  return s;
}

size_t SvgChars(const std::string& s) {
  size_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

struct SvgNode {
  std::string guid, name;
  bool sw = false;
  int tier = 0;
};

// One box: a node, or nodes drawn as one.
struct SvgItem {
  std::string key;
  std::vector<std::string> members;  // GUIDs
  bool group = false;
  bool sw = false;
  bool wide = false;     // a group box with its label inside (the aggregated view)
  std::string label;     // as drawn, not yet escaped
  std::string title;     // the full text, not yet escaped
  double min_w = 26;     // slot width wanted
  double x = 0, y = 0;
  bool vertical = false;  // label turned to run down from the box
};

struct SvgRow {
  std::string name;
  std::vector<SvgItem> items;
  double extent = 0;  // how far labels reach below the boxes
};

double BoxW(const SvgItem& it) {
  if (it.wide) return it.min_w - 12;
  return it.group ? 20 : it.sw ? 16 : 8;
}
double BoxH(const SvgItem& it) {
  if (it.wide) return 22;
  return it.group ? 14 : it.sw ? 12 : 8;
}

const char* BoxFill(const SvgItem& it) {
  if (it.group) return it.sw ? kSwitchGroupFill : kHostGroupFill;
  return it.sw ? kSwitchFill : kHostFill;
}

std::string SvgText(const std::string& s) { return XmlText(s); }

}  // namespace

TopoView ChosenView(const json& topo, const SvgOptions& o) {
  if (o.view != TopoView::kAuto) return o.view;
  return topo.value("nodes", json::array()).size() > o.aggregate_above ? TopoView::kAggregate
                                                                       : TopoView::kFull;
}

std::string TopologySvg(const json& topo, const SvgOptions& o) {
  const bool aggregate = ChosenView(topo, o) == TopoView::kAggregate;
  const int tiers = std::max(1, topo.value("tiers", 1));
  std::map<std::string, SvgNode> node;
  size_t hosts = 0, switches = 0;
  for (const auto& n : topo["nodes"]) {
    SvgNode s{n["guid"], n["name"], n["kind"] == "SW", n["tier"].get<int>()};
    (s.sw ? switches : hosts)++;
    node[s.guid] = s;
  }
  // Each host's leaf, and the ends of every cable that is not "ok": those are drawn one by
  // one, named, in every view.
  std::map<std::string, std::string> host_leaf;
  std::set<std::string> named;
  std::map<std::string, size_t> by_health;
  for (const auto& l : topo["links"]) {
    const std::string a = l["a"], b = l["b"], h = l["health"];
    ++by_health[h];
    if (!node[a].sw && node[b].sw) host_leaf[a] = b;
    if (!node[b].sw && node[a].sw) host_leaf[b] = a;
    if (h != "ok") named.insert(a), named.insert(b);
  }
  // Pods (the aggregated view of 3 tiers or more): switches below the top tier that cables
  // among themselves join, with their hosts. With fewer tiers, one group per tier.
  std::map<std::string, std::string> parent;
  auto pod_root = [&](std::string g) {
    while (parent.count(g) && parent[g] != g) g = parent[g] = parent[parent[g]];
    return g;
  };
  const bool pods = aggregate && tiers >= 3;
  if (pods) {
    for (const auto& [g, n] : node)
      if (n.sw && n.tier < tiers - 1) parent[g] = g;
    for (const auto& l : topo["links"]) {
      const std::string a = l["a"], b = l["b"];
      if (parent.count(a) && parent.count(b)) parent[pod_root(a)] = pod_root(b);
    }
  }
  // Pods numbered in name order of their first switch.
  std::map<std::string, std::string> first_name;  // pod root -> smallest member name
  for (const auto& [g, p] : parent) {
    const std::string root = pod_root(g);
    auto [it, fresh] = first_name.try_emplace(root, node[g].name);
    if (!fresh && node[g].name < it->second) it->second = node[g].name;
  }
  std::vector<std::pair<std::string, std::string>> order;
  for (const auto& [root, name] : first_name) order.emplace_back(name, root);
  std::sort(order.begin(), order.end());
  std::map<std::string, size_t> pod_no;
  for (size_t i = 0; i < order.size(); ++i) pod_no[order[i].second] = i + 1;
  auto pod_of = [&](const std::string& g) -> size_t {
    const SvgNode& n = node[g];
    std::string sw = n.sw ? g : host_leaf.count(g) ? host_leaf[g] : "";
    if (sw.empty() || !parent.count(sw)) return 0;
    return pod_no[pod_root(sw)];
  };

  // Rows, top tier first, hosts last; in each, the entries sorted and then gathered into
  // items (a group's members become one item).
  const bool host_boxes = !aggregate && hosts <= o.max_hosts;
  std::vector<SvgRow> rows(static_cast<size_t>(tiers) + (hosts ? 1 : 0));
  for (int t = 0; t < tiers; ++t) {
    rows[static_cast<size_t>(tiers - 1 - t)].name =
        t == 0 ? "tier 0 (leaves)" : t == tiers - 1 ? fmt::format("tier {} (top)", t)
                                                    : fmt::format("tier {}", t);
  }
  if (hosts) rows.back().name = "hosts";
  // Leaves in name order: the host row follows them.
  std::map<std::string, size_t> leaf_order;
  {
    std::vector<std::pair<std::string, std::string>> leaves;
    for (const auto& [g, n] : node)
      if (n.sw && n.tier == 0) leaves.emplace_back(n.name, g);
    std::sort(leaves.begin(), leaves.end());
    for (size_t i = 0; i < leaves.size(); ++i) leaf_order[leaves[i].second] = i;
  }
  struct Entry {
    size_t major;
    bool single;
    std::string name, guid, group;
  };
  std::vector<std::vector<Entry>> entries(rows.size());
  for (const auto& [g, n] : node) {
    const size_t row = n.sw ? static_cast<size_t>(tiers - 1 - std::min(n.tier, tiers - 1))
                            : rows.size() - 1;
    Entry e{0, true, n.name, g, ""};
    if (aggregate) {
      const size_t pod = pod_of(g);
      e.major = pod;
      if (!named.count(g)) {
        e.single = false;
        e.group = n.sw ? fmt::format("sw/{}/{}", pod, n.tier) : fmt::format("hosts/{}", pod);
      }
    } else if (!n.sw) {
      const std::string leaf = host_leaf.count(g) ? host_leaf[g] : "";
      e.major = leaf.empty() ? leaf_order.size() : leaf_order[leaf];
      if (!host_boxes && !named.count(g) && !leaf.empty()) {
        e.single = false;
        e.group = "leaf/" + leaf;
      }
    }
    entries[row].push_back(e);
  }
  std::map<std::string, std::pair<size_t, size_t>> item_of;  // GUID -> (row, item)
  for (size_t r = 0; r < rows.size(); ++r) {
    auto& es = entries[r];
    std::sort(es.begin(), es.end(), [](const Entry& x, const Entry& y) {
      return std::tie(x.major, x.single, x.name, x.guid) <
             std::tie(y.major, y.single, y.name, y.guid);
    });
    std::map<std::string, size_t> group_at;
    for (const Entry& e : es) {
      auto& items = rows[r].items;
      size_t at;
      if (e.single) {
        at = items.size();
        SvgItem it;
        it.key = e.guid;
        it.sw = node[e.guid].sw;
        it.label = SvgShorten(e.name, kLabelChars);
        it.title = fmt::format("{} ({})", e.name, e.guid);
        it.min_w = it.sw ? 26 : 16;
        items.push_back(it);
      } else {
        auto [g, fresh] = group_at.try_emplace(e.group, items.size());
        if (fresh) {
          SvgItem it;
          it.key = e.group;
          it.group = true;
          it.sw = node[e.guid].sw;
          items.push_back(it);
        }
        at = g->second;
      }
      items[at].members.push_back(e.guid);
      item_of[e.guid] = {r, at};
    }
    // Group labels and titles, once the members are known.
    for (SvgItem& it : rows[r].items) {
      if (!it.group) continue;
      const size_t n = it.members.size();
      const std::string what =
          it.sw ? (n == 1 ? "switch" : "switches") : (n == 1 ? "host" : "hosts");
      if (aggregate) {
        const size_t pod = pod_of(it.members.front());
        const std::string where = pods && pod    ? fmt::format("pod {}", pod)
                                  : pods && it.sw ? std::string("top")
                                                  : rows[r].name;
        it.label = fmt::format("{}: {} {}", where, n, what);
        it.wide = true;
        it.min_w = std::max(70.0, static_cast<double>(SvgChars(it.label)) * kCharW + 16);
      } else {
        it.label = fmt::format("{} {}", n, what);
        const std::string& leaf = it.key.substr(5);
        it.title = fmt::format("{} on {}", it.label, node[leaf].name);
        it.min_w = 26;
      }
      if (it.title.empty()) it.title = it.label;
      it.title += ":";
      for (const std::string& m : it.members) it.title += "\n" + node[m].name;
    }
  }

  // Geometry: rows as wide as the widest, slots in proportion to what each item wants.
  double width = 300;
  for (const SvgRow& r : rows) {
    double w = 0;
    for (const SvgItem& it : r.items) w += it.min_w;
    width = std::max(width, w);
  }
  double y = 30;
  for (SvgRow& r : rows) {
    double want = 0;
    for (const SvgItem& it : r.items) want += it.min_w;
    const double scale = want > 0 ? width / want : 1;
    double at = kLeft;
    r.extent = 0;
    for (SvgItem& it : r.items) {
      const double slot = it.min_w * scale;
      it.x = at + slot / 2;
      it.y = y + 12;
      at += slot;
      if (it.wide) continue;
      const double text = static_cast<double>(SvgChars(it.label)) * kCharW;
      it.vertical = text + 4 > slot;
      r.extent = std::max(r.extent, it.vertical ? text + 6 : 14.0);
    }
    y += 24 + r.extent + 40;
  }
  const double height = std::max(y, 200.0);

  // Cables: each one that is not "ok" on its own, between its two (single) ends; "ok" ones
  // between two single nodes on their own too, else bundled per pair of items.
  std::string lines;
  struct Bundle {
    size_t cables = 0;
  };
  std::map<std::pair<std::pair<size_t, size_t>, std::pair<size_t, size_t>>, Bundle> bundles;
  size_t inside = 0;
  auto item = [&](const std::pair<size_t, size_t>& at) -> SvgItem& {
    return rows[at.first].items[at.second];
  };
  std::vector<const json*> unhealthy;
  for (const char* pass : kHealthDrawOrder) {
    const CableStyle st = StyleOf(pass);
    for (const auto& l : topo["links"]) {
      if (l["health"] != pass) continue;
      auto ia = item_of.find(l["a"]), ib = item_of.find(l["b"]);
      if (ia == item_of.end() || ib == item_of.end()) continue;
      const SvgItem& a = item(ia->second);
      const SvgItem& b = item(ib->second);
      if (std::string(pass) != "ok") unhealthy.push_back(&l);
      if (a.group || b.group) {
        if (ia->second == ib->second) {
          ++inside;
        } else {
          ++bundles[std::minmax(ia->second, ib->second)].cables;
        }
        continue;
      }
      std::string why;
      for (const auto& w : l.value("why", json::array())) why += "\n" + w.get<std::string>();
      lines += fmt::format(
          "<line class=\"cable {}\" x1=\"{:.1f}\" y1=\"{:.1f}\" x2=\"{:.1f}\" y2=\"{:.1f}\" "
          "stroke=\"{}\" stroke-width=\"{}\"{}><title>{} port {} - {} port {}: {}{}</title>"
          "</line>\n",
          pass, a.x, a.y, b.x, b.y, st.colour, st.width,
          *st.dash ? fmt::format(" stroke-dasharray=\"{}\"", st.dash) : "",
          SvgText(node[l["a"]].name), DumpJson(l["a_port"]), SvgText(node[l["b"]].name),
          DumpJson(l["b_port"]), pass, SvgText(why));
    }
    if (std::string(pass) == "ok") {
      // Bundles under every single cable.
      std::string drawn;
      for (const auto& [ends, bundle] : bundles) {
        const SvgItem& a = item(ends.first);
        const SvgItem& b = item(ends.second);
        drawn += fmt::format(
            "<line class=\"bundle ok\" x1=\"{:.1f}\" y1=\"{:.1f}\" x2=\"{:.1f}\" y2=\"{:.1f}\" "
            "stroke=\"{}\" stroke-width=\"{:.1f}\"><title>{} healthy cable{} between {} and "
            "{}</title></line>\n",
            a.x, a.y, b.x, b.y, st.colour,
            0.8 + std::min(4.0, std::log2(static_cast<double>(bundle.cables))), bundle.cables,
            bundle.cables == 1 ? "" : "s", SvgText(a.label), SvgText(b.label));
      }
      lines = drawn + lines;
    }
  }

  std::string boxes;
  for (const SvgRow& r : rows) {
    if (!r.items.empty())
      boxes += fmt::format(
          "<text class=\"row\" x=\"8\" y=\"{:.1f}\" dominant-baseline=\"central\" "
          "font-weight=\"bold\">{}</text>\n",
          r.items.front().y, SvgText(r.name));
    for (const SvgItem& it : r.items) {
      const double w = BoxW(it), h = BoxH(it);
      const char* cls = it.group ? (it.sw ? "switch-group" : "host-group")
                        : it.sw    ? "switch"
                                   : "host";
      boxes += fmt::format(
          "<g class=\"{}\"><title>{}</title><rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.0f}\" "
          "height=\"{:.0f}\" fill=\"{}\" stroke=\"#333\"/>",
          cls, SvgText(it.title), it.x - w / 2, it.y - h / 2, w, h, BoxFill(it));
      if (it.wide) {
        boxes += fmt::format(
            "<text class=\"label\" x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\" "
            "dominant-baseline=\"central\">{}</text>",
            it.x, it.y, SvgText(it.label));
      } else if (it.vertical) {
        const double ty = it.y + h / 2 + 4;
        boxes += fmt::format(
            "<text class=\"label\" x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"end\" "
            "dominant-baseline=\"central\" transform=\"rotate(-90 {:.1f} {:.1f})\">{}</text>",
            it.x, ty, it.x, ty, SvgText(it.label));
      } else {
        boxes += fmt::format(
            "<text class=\"label\" x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\">{}</text>",
            it.x, it.y + h / 2 + 11, SvgText(it.label));
      }
      boxes += "</g>\n";
    }
  }

  // The legend: what the boxes and lines mean, the counts, the unhealthy cables by name.
  const double lx = kLeft + width + 30;
  std::string legend = fmt::format("<g id=\"legend\" transform=\"translate({:.1f} 20)\">\n", lx);
  double ly = 0;
  auto text_line = [&](const std::string& s, const char* extra = "") {
    legend += fmt::format("<text x=\"0\" y=\"{:.1f}\"{}>{}</text>\n", ly, extra, SvgText(s));
    ly += 14;
  };
  text_line(aggregate ? "aggregated view" : "full view", " font-weight=\"bold\" font-size=\"11\"");
  text_line(fmt::format("{} switches, {} hosts, {} cables", switches, hosts,
                        topo["links"].size()));
  ly += 4;
  for (const char* h : {"ok", "errors", "degraded", "down"}) {
    const CableStyle st = StyleOf(h);
    legend += fmt::format(
        "<g class=\"legend-cable {}\"><line x1=\"0\" y1=\"{:.1f}\" x2=\"30\" y2=\"{:.1f}\" "
        "stroke=\"{}\" stroke-width=\"{}\"{}/><text x=\"38\" y=\"{:.1f}\" "
        "dominant-baseline=\"central\">{} ({})</text></g>\n",
        h, ly, ly, st.colour, st.width,
        *st.dash ? fmt::format(" stroke-dasharray=\"{}\"", st.dash) : "", ly, st.legend,
        by_health.count(h) ? by_health[h] : 0);
    ly += 16;
  }
  if (!bundles.empty()) {
    legend += fmt::format(
        "<g class=\"legend-bundle\"><line x1=\"0\" y1=\"{:.1f}\" x2=\"30\" y2=\"{:.1f}\" "
        "stroke=\"{}\" stroke-width=\"3\"/><text x=\"38\" y=\"{:.1f}\" "
        "dominant-baseline=\"central\">healthy cables between groups (wider: more)</text></g>\n",
        ly, ly, StyleOf("ok").colour, ly);
    ly += 16;
  }
  auto box_line = [&](const char* fill, double w, double h, const std::string& what) {
    legend += fmt::format(
        "<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.0f}\" height=\"{:.0f}\" fill=\"{}\" "
        "stroke=\"#333\"/><text x=\"38\" y=\"{:.1f}\" dominant-baseline=\"central\">{}</text>\n",
        15 - w / 2, ly - h / 2, w, h, fill, ly, SvgText(what));
    ly += 18;
  };
  box_line(kSwitchFill, 16, 12, "a switch");
  if (hosts) box_line(kHostFill, 8, 8, "a host");
  if (aggregate) {
    box_line(kSwitchGroupFill, 24, 12, "switches of one pod and tier, counted");
    if (hosts) box_line(kHostGroupFill, 24, 12, "hosts of one pod, counted");
  } else if (!host_boxes) {
    box_line(kHostGroupFill, 20, 14, "the hosts of the leaf above, counted");
  }
  text_line("names in full in each box's tooltip");
  ly += 6;
  if (unhealthy.empty()) {
    text_line("every cable healthy", " class=\"unhealthy-none\"");
  } else {
    text_line(fmt::format("unhealthy cables ({}):", unhealthy.size()), " font-weight=\"bold\"");
    size_t listed = 0;
    for (const json* l : unhealthy) {
      if (listed++ == kListedUnhealthy) {
        text_line(fmt::format("... and {} more (ibsmctl health, links --errors)",
                              unhealthy.size() - kListedUnhealthy));
        break;
      }
      text_line(fmt::format("{} p{} - {} p{}: {}", SvgShorten(node[(*l)["a"]].name, kLabelChars),
                            DumpJson((*l)["a_port"]), SvgShorten(node[(*l)["b"]].name, kLabelChars),
                            DumpJson((*l)["b_port"]), (*l)["health"].get<std::string>()),
                " class=\"unhealthy\"");
    }
  }
  if (inside) text_line(fmt::format("{} healthy cables inside groups, not drawn", inside));
  legend += "</g>\n";

  const double total_w = lx + kLegendW;
  const double total_h = std::max(height, ly + 40);
  std::string out = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"ibsm-topo {}\" viewBox=\"0 0 {:.0f} "
      "{:.0f}\" width=\"100%\" font-family=\"sans-serif\" font-size=\"9\">\n"
      "<title>ibsm fabric: {} switches, {} hosts, {} cables</title>\n"
      "<style>.label{{paint-order:stroke;stroke:#fff;stroke-width:2px;stroke-linejoin:round}}"
      "</style>\n"
      "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n",
      aggregate ? "view-aggregate" : "view-full", total_w, total_h, switches, hosts,
      topo["links"].size());
  return out + lines + boxes + legend + "</svg>\n";
}

}  // namespace ibsm::tools
