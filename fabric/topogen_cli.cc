#include "fabric/topogen_cli.h"

#include "base/version.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "fabric/generators.h"
#include "fabric/topology_writer.h"

namespace ibsm {

namespace {

constexpr std::string_view kUsage =
    "usage: topogen {ftree2,ftree3,rail,random} [-k K] [-o FILE] [--oversub R]\n"
    "         [--hosts-per-leaf H] [--leaves L] [--scale F] [--pods P] [--servers N]\n"
    "         [--rails R] [--rail-mode planes|superpod] [--switches N]\n"
    "         [--hosts-per-switch H] [--links M] [--drop-links N] [--seed S]\n"
    "         [--roots FILE] [--width 1|2|4|8|12] [--speed SDR|DDR|QDR|FDR|EDR|HDR]\n"
    "Writes an ibsim net file (ibnetdiscover format); the first record is the SM host.\n";

struct Args {
  std::string topology;
  std::map<std::string, std::string> opts;
};

int Usage(const std::string& why) {
  std::cerr << "topogen: " << why << "\n" << kUsage;
  return 2;
}

std::optional<long> ToLong(const std::string& s) {
  if (s.empty()) return std::nullopt;
  size_t i = 0;
  long v = 0;
  bool neg = s[0] == '-';
  if (neg) i = 1;
  if (i == s.size()) return std::nullopt;
  for (; i < s.size(); ++i) {
    if (s[i] < '0' || s[i] > '9' || v > 100000000) return std::nullopt;
    v = v * 10 + (s[i] - '0');
  }
  return neg ? -v : v;
}

std::optional<double> ToDouble(const std::string& s) {
  char* end = nullptr;
  double v = std::strtod(s.c_str(), &end);
  if (s.empty() || end != s.c_str() + s.size() || !std::isfinite(v)) return std::nullopt;
  return v;
}

}  // namespace

int TopoGenMain(int argc, char** argv) {
  static const std::map<std::string, std::string> kAliases = {{"-k", "k"}, {"-o", "output"}};
  static const std::vector<std::string> kLong = {
      "output", "oversub", "hosts-per-leaf", "leaves", "scale", "pods", "servers",
      "rails", "rail-mode", "switches", "hosts-per-switch", "links", "drop-links",
      "seed", "roots", "width", "speed"};
  Args a;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "-h" || arg == "--help") {
      std::cout << kUsage;
      return 0;
    }
    if (arg == "--version") {
      std::cout << VersionLine("ibsm-topogen") << "\n";
      return 0;
    }
    if (!arg.empty() && arg[0] == '-') {
      std::string key, value;
      bool has_value = false;
      if (auto it = kAliases.find(arg); it != kAliases.end()) {
        key = it->second;
      } else if (arg.starts_with("--")) {
        size_t eq = arg.find('=');
        key = arg.substr(2, eq == std::string::npos ? std::string::npos : eq - 2);
        if (eq != std::string::npos) {
          value = arg.substr(eq + 1);
          has_value = true;
        }
        if (std::find(kLong.begin(), kLong.end(), key) == kLong.end()) {
          return Usage("unknown option " + arg);
        }
      } else {
        return Usage("unknown option " + arg);
      }
      if (!has_value) {
        if (i + 1 >= argc) return Usage("option " + arg + " needs a value");
        value = argv[++i];
      }
      a.opts[key] = value;
    } else if (a.topology.empty()) {
      a.topology = arg;
    } else {
      return Usage("unexpected argument " + arg);
    }
  }
  if (a.topology != "ftree2" && a.topology != "ftree3" && a.topology != "rail" &&
      a.topology != "random") {
    return Usage(a.topology.empty() ? "a topology is required"
                                    : "unknown topology " + a.topology);
  }
  auto integer = [&](const std::string& key, long def, long* out) -> bool {
    auto it = a.opts.find(key);
    if (it == a.opts.end()) {
      *out = def;
      return true;
    }
    auto v = ToLong(it->second);
    if (!v) return false;
    *out = *v;
    return true;
  };
  long k = 0, hpl = 0, leaves = 0, pods = 0, servers = 0, rails = 0, switches = 0, hps = 0,
       links = 0, drop = 0, seed = 0, width_lanes = 0;
  if (!integer("k", 8, &k) || !integer("hosts-per-leaf", 0, &hpl) ||
      !integer("leaves", 0, &leaves) || !integer("pods", 0, &pods) ||
      !integer("servers", 16, &servers) || !integer("rails", 4, &rails) ||
      !integer("switches", 16, &switches) || !integer("hosts-per-switch", 2, &hps) ||
      !integer("links", -1, &links) || !integer("drop-links", 0, &drop) ||
      !integer("seed", 1, &seed) || !integer("width", 4, &width_lanes)) {
    return Usage("an integer option has a non-integer value");
  }
  double oversub = 1.0, scale = 1.0;
  if (a.opts.count("oversub")) {
    auto v = ToDouble(a.opts["oversub"]);
    if (!v) return Usage("--oversub needs a number");
    oversub = *v;
  }
  if (a.opts.count("scale")) {
    auto v = ToDouble(a.opts["scale"]);
    if (!v) return Usage("--scale needs a number");
    scale = *v;
  }
  if (seed < 0) return Usage("--seed must be non-negative");
  std::optional<LinkWidth> width;
  switch (width_lanes) {
    case 1: width = LinkWidth::k1x; break;
    case 2: width = LinkWidth::k2x; break;
    case 4: width = LinkWidth::k4x; break;
    case 8: width = LinkWidth::k8x; break;
    case 12: width = LinkWidth::k12x; break;
    default: return Usage("--width must be 1, 2, 4, 8 or 12");
  }
  std::string speed_name = a.opts.count("speed") ? a.opts["speed"] : "EDR";
  auto speed = ParseLinkSpeed(speed_name);
  if (!speed || speed_name == "FDR10" || speed_name == "NDR" || speed_name == "XDR") {
    return Usage("--speed must be SDR, DDR, QDR, FDR, EDR or HDR");
  }
  std::string rail_mode = a.opts.count("rail-mode") ? a.opts["rail-mode"] : "planes";
  if (rail_mode != "planes" && rail_mode != "superpod") {
    return Usage("--rail-mode must be planes or superpod");
  }
  if (k < 0 || k > 1000 || hpl < 0 || leaves < 0 || pods < 0 || servers > 1000000 ||
      rails > 1000 || switches > 1000000 || hps < 0 || hps > 1000) {
    return Usage("an option is out of range");
  }

  PyRandom rng(static_cast<uint64_t>(seed));
  Result<Fabric> fabric = InvalidArgument("unreachable");
  if (a.topology == "ftree2") {
    FatTree2Options o;
    o.hosts_per_leaf = static_cast<int>(hpl);
    o.oversubscription = oversub;
    o.leaves = static_cast<int>(leaves);
    o.width = *width;
    o.speed = *speed;
    fabric = FatTree2(static_cast<int>(k), o);
  } else if (a.topology == "ftree3") {
    // Python's round(): ties to even, as std::nearbyint does in the default rounding mode.
    long p = pods ? pods : std::max(1L, static_cast<long>(std::nearbyint(k * scale)));
    fabric = FatTree3(static_cast<int>(k), static_cast<int>(p), LinkRateOptions{*width, *speed});
  } else if (a.topology == "rail") {
    RailOptions o;
    o.hosts_per_leaf = static_cast<int>(hpl);
    o.oversubscription = oversub;
    o.width = *width;
    o.speed = *speed;
    fabric = RailOptimized(static_cast<int>(k), static_cast<int>(servers),
                           static_cast<int>(rails),
                           rail_mode == "planes" ? RailMode::kPlanes : RailMode::kSuperpod, o);
  } else {
    RandomGraphOptions o;
    o.links = static_cast<int>(links);
    o.width = *width;
    o.speed = *speed;
    fabric = RandomGraph(static_cast<int>(switches), static_cast<int>(k),
                         static_cast<int>(hps), rng, o);
  }
  if (!fabric.ok()) {
    std::cerr << "topogen: error: " << fabric.status().message() << "\n";
    return 1;
  }
  Fabric& f = *fabric;
  std::vector<DroppedLink> dropped;
  if (drop > 0) {
    dropped = Degrade(f, static_cast<int>(drop), rng);  // continues the generator's stream
    if (static_cast<long>(dropped.size()) < drop) {
      std::cerr << fmt::format("warning: only {} links could be dropped without partitioning "
                               "the fabric\n",
                               dropped.size());
    }
  }
  std::string text;
  for (const DroppedLink& d : dropped) {
    text += fmt::format("# dropped link: {}[{}] <-> {}[{}]\n", f.node(d.a).name,
                        d.a_port.value(), f.node(d.b).name, d.b_port.value());
  }
  text += WriteTopology(f);

  if (a.opts.count("output")) {
    std::ofstream out(a.opts["output"], std::ios::binary);
    out << text;
    if (!out) {
      std::cerr << "topogen: error: cannot write " << a.opts["output"] << "\n";
      return 1;
    }
  } else {
    std::cout << text;
  }
  if (a.opts.count("roots")) {
    // The top tier, as gen_topology.py's --roots: cores for ftree3, the first switch of a
    // random graph, the spines otherwise.
    std::string roots;
    bool first = true;
    for (const Node& n : f.nodes()) {
      if (!n.is_switch()) continue;
      bool root = a.topology == "ftree3"   ? n.name.starts_with("core-")
                  : a.topology == "random" ? first
                                           : n.name.find("spine-") != std::string::npos;
      first = false;
      if (root) roots += fmt::format("{:#018x}\n", n.guid.value());
    }
    std::ofstream out(a.opts["roots"], std::ios::binary);
    out << roots;
    if (!out) {
      std::cerr << "topogen: error: cannot write " << a.opts["roots"] << "\n";
      return 1;
    }
  }
  std::cerr << fmt::format("{}: {} HCAs, {} switches, {} links\n", a.topology, f.ca_count(),
                           f.switch_count(), f.link_count());
  return 0;
}

}  // namespace ibsm
