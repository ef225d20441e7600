#include "tools/routecheck.h"

#include "base/version.h"

#include <fmt/format.h>
#include <sys/resource.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <fstream>
#include <map>
#include <optional>
#include <ostream>
#include <sstream>
#include <unordered_map>
#include <unordered_set>

#include "fabric/generators.h"
#include "fabric/topology_reader.h"
#include "routing/quality.h"
#include "routing/verify.h"

namespace ibsm::tools {
namespace {

std::string_view Trim(std::string_view s) {
  const auto first = s.find_first_not_of(" \t\r\n");
  if (first == std::string_view::npos) return {};
  const auto last = s.find_last_not_of(" \t\r\n");
  return s.substr(first, last - first + 1);
}

// A whole unsigned number in `s`; "0x" prefix means hex.
std::optional<uint64_t> ParseNumber(std::string_view s) {
  int base = 10;
  if (s.size() > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
    s.remove_prefix(2);
    base = 16;
  }
  uint64_t v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v, base);
  if (ec != std::errc() || p != s.data() + s.size() || s.empty()) return std::nullopt;
  return v;
}

// The token after `key` in `s` (up to whitespace, ')' , ':' or ']'), or nothing.
std::optional<std::string_view> After(std::string_view s, std::string_view key) {
  const size_t at = s.find(key);
  if (at == std::string_view::npos) return std::nullopt;
  std::string_view rest = s.substr(at + key.size());
  const size_t end = rest.find_first_of(" \t)]:,(");
  return rest.substr(0, end);
}

double PeakRssMiB() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_maxrss) / 1024.0;  // KiB on Linux
}

double Since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

constexpr std::string_view kUsage =
    "usage: ibsm-routecheck (--fat-tree3 K | --fat-tree2 K | --topology FILE)\n"
    "         [--engine CHAIN | --lft-dump FILE] [--lmc N] [--threads N]\n"
    "         [--quality] [--permutations N] [--no-shifts] [--seed S] [--problems N]\n"
    "Routes the fabric with the engine chain (default ftree,updn, as ibsmd) or reads OpenSM's tables from\n"
    "an opensm-lfts.dump / dump_lfts file, then prints one line per step: fabric, routing,\n"
    "verification, credit loops and, with --quality, routes per link per tier, worst link\n"
    "sharing under shift and random permutations and effective bisection bandwidth.\n"
    "Exit status: 0 clean, 1 the tables fail verification or have a credit loop, 2 usage or\n"
    "input error.\n";

struct Options {
  std::string fat_tree3, fat_tree2, topology, engine, lft_dump;
  uint64_t lmc = 0, threads = 1, permutations = 1000, seed = 1, problems = 5;
  bool quality = false, shifts = true;
};

}  // namespace

Result<std::vector<LftDumpSwitch>> ParseLftDump(std::string_view text, std::string_view file_name) {
  std::vector<LftDumpSwitch> out;
  std::unordered_map<Guid, size_t> seen;  // guid -> header line
  size_t line_no = 0;
  auto error = [&](std::string what) {
    return Corrupt(fmt::format("{}:{}: {}", file_name, line_no, what));
  };
  while (!text.empty()) {
    const size_t nl = text.find('\n');
    const std::string_view raw = text.substr(0, nl);
    text.remove_prefix(nl == std::string_view::npos ? text.size() : nl + 1);
    ++line_no;
    const std::string_view line = Trim(raw);
    if (line.empty() || line[0] == '#') continue;
    if (line.starts_with("Unicast lids")) {
      auto guid_text = After(line, " guid ");
      if (!guid_text) return error("expected 'guid 0x...' in the switch header");
      auto guid = ParseNumber(*guid_text);
      if (!guid || !guid_text->starts_with("0x"))
        return error(fmt::format("expected a hex GUID after 'guid', got '{}'", *guid_text));
      LftDumpSwitch sw;
      sw.guid = Guid(*guid);
      sw.line = line_no;
      if (auto lid_text = After(line, "switch Lid ")) {
        auto lid = ParseNumber(*lid_text);
        if (!lid || *lid > kMaxUnicastLid)
          return error(fmt::format("expected a unicast LID after 'Lid', got '{}'", *lid_text));
        sw.lid = static_cast<uint16_t>(*lid);
      }
      if (auto [it, fresh] = seen.emplace(sw.guid, line_no); !fresh)
        return error(
            fmt::format("switch {} is dumped twice (first at line {})", sw.guid, it->second));
      out.push_back(std::move(sw));
      continue;
    }
    if (line.starts_with("Lid ") || line.starts_with("Port ") || line.ends_with("lids dumped"))
      continue;  // ibroute's column headings and every dump's block trailer
    if (line.starts_with("*** WARNING ***"))
      continue;  // dump_lfts (infiniband-diags) ends with a notice that dump_fts replaces it
    if (!line.starts_with("0x"))
      return error(fmt::format("expected a switch header or a '0xLID PORT' entry, got '{}'",
                               line.substr(0, 60)));
    if (out.empty()) return error("an LFT entry before the first switch header");
    const size_t sp = line.find_first_of(" \t");
    auto lid = ParseNumber(line.substr(0, sp));
    if (!lid || *lid == 0 || *lid > kMaxUnicastLid)
      return error(fmt::format("expected a unicast LID, got '{}'", line.substr(0, sp)));
    if (sp == std::string_view::npos) return error("expected an egress port after the LID");
    std::string_view rest = Trim(line.substr(sp));
    const size_t sp2 = rest.find_first_of(" \t");
    auto port = ParseNumber(rest.substr(0, sp2));
    if (!port || *port > 255)
      return error(fmt::format("expected an egress port 0..255, got '{}'", rest.substr(0, sp2)));
    LftDumpSwitch& sw = out.back();
    sw.entries.emplace_back(static_cast<uint16_t>(*lid), static_cast<uint8_t>(*port));
    if (auto g = After(rest, "portguid ")) {
      auto guid = ParseNumber(*g);
      if (!guid) return error(fmt::format("expected a hex GUID after 'portguid', got '{}'", *g));
      sw.owners.emplace_back(static_cast<uint16_t>(*lid), Guid(*guid));
    }
  }
  return out;
}

size_t LidsFromDump(Fabric& fabric, const std::vector<LftDumpSwitch>& dump) {
  std::map<PortId, std::vector<uint16_t>> lids_of;
  for (const LftDumpSwitch& sw : dump) {
    if (sw.lid)
      if (auto n = fabric.FindNode(sw.guid); n && fabric.node(*n).is_switch())
        lids_of[fabric.port_id(*n, PortNum(0))].push_back(sw.lid);
    for (const auto& [lid, guid] : sw.owners)
      if (auto p = fabric.FindPort(guid)) lids_of[*p].push_back(lid);
  }
  size_t given = 0;
  for (auto& [p, lids] : lids_of) {
    Port& port = fabric.mutable_port(p);
    if (port.lid.value() != 0) continue;
    std::sort(lids.begin(), lids.end());
    lids.erase(std::unique(lids.begin(), lids.end()), lids.end());
    const size_t n = lids.size();
    const bool contiguous = lids.back() - lids.front() + 1u == n;
    uint8_t lmc = 0;
    if (contiguous && (n & (n - 1)) == 0)
      while ((size_t{1} << lmc) < n && lmc < 7) ++lmc;
    port.lid = Lid(lids.front());
    port.lmc = lmc;
    ++given;
  }
  fabric.IndexLids();
  return given;
}

Result<routing::RoutingTables> TablesFromDump(const Fabric& fabric,
                                              const std::vector<LftDumpSwitch>& dump,
                                              uint16_t max_lid, std::string_view file_name) {
  routing::RoutingTables tables;
  tables.engine = "lft-dump";
  tables.switch_index.assign(fabric.node_count(), SIZE_MAX);
  for (NodeId n = 0; n < fabric.node_count(); ++n) {
    if (!fabric.node(n).is_switch()) continue;
    tables.switch_index[n] = tables.switches.size();
    tables.switches.push_back({n, {}});
  }
  for (const LftDumpSwitch& sw : dump) {
    auto n = fabric.FindNode(sw.guid);
    if (!n || !fabric.node(*n).is_switch())
      return NotFound(
          fmt::format("{}:{}: switch {} is not in the topology", file_name, sw.line, sw.guid));
    uint16_t top = max_lid;
    for (const auto& [lid, port] : sw.entries) top = std::max(top, lid);
    std::vector<uint8_t>& lft = tables.switches[tables.switch_index[*n]].lft;
    lft.assign(top + 1u, routing::kDropPort);
    for (const auto& [lid, port] : sw.entries) lft[lid] = port;
  }
  return tables;
}

size_t AssignLids(Fabric& fabric, uint8_t lmc) {
  uint32_t next = 1;
  const uint32_t step = 1u << lmc;
  size_t left = 0;
  for (NodeId n = 0; n < fabric.node_count(); ++n) {
    const Node& node = fabric.node(n);
    const uint32_t first = node.is_switch() ? 0 : 1;
    const uint32_t last = node.is_switch() ? 0 : node.num_ports;
    for (uint32_t num = first; num <= last; ++num) {
      Port& p = fabric.mutable_port(node.first_port + num);
      const uint32_t count = node.is_switch() ? 1 : step;
      const uint32_t base = (next + count - 1) / count * count;
      if (base + count - 1 > kMaxUnicastLid) {
        p.lid = Lid(0);
        ++left;
        continue;
      }
      p.lid = Lid(static_cast<uint16_t>(base));
      p.lmc = node.is_switch() ? 0 : lmc;
      next = base + count;
    }
  }
  fabric.IndexLids();
  return left;
}

int RouteCheckMain(int argc, char** argv, std::ostream& out, std::ostream& err) {
  auto usage = [&](const std::string& why) {
    err << "ibsm-routecheck: " << why << "\n" << kUsage;
    return 2;
  };
  Options o;
  const std::map<std::string_view, std::string*> strings = {{"fat-tree3", &o.fat_tree3},
                                                            {"fat-tree2", &o.fat_tree2},
                                                            {"topology", &o.topology},
                                                            {"engine", &o.engine},
                                                            {"lft-dump", &o.lft_dump}};
  const std::map<std::string_view, uint64_t*> numbers = {{"lmc", &o.lmc},
                                                         {"threads", &o.threads},
                                                         {"permutations", &o.permutations},
                                                         {"seed", &o.seed},
                                                         {"problems", &o.problems}};
  for (int i = 1; i < argc; ++i) {
    std::string_view arg = argv[i];
    if (arg == "-h" || arg == "--help") {
      out << kUsage;
      return 0;
    }
    if (arg == "--version") {
      out << VersionLine("ibsm-routecheck") << "\n";
      return 0;
    }
    if (!arg.starts_with("--")) return usage(fmt::format("unexpected argument '{}'", arg));
    std::string_view key = arg.substr(2);
    std::optional<std::string_view> value;
    if (const size_t eq = key.find('='); eq != std::string_view::npos) {
      value = key.substr(eq + 1);
      key = key.substr(0, eq);
    }
    if (key == "quality" || key == "no-shifts") {
      if (value) return usage(fmt::format("--{} takes no value", key));
      if (key == "quality")
        o.quality = true;
      else
        o.shifts = false;
      continue;
    }
    const auto s = strings.find(key);
    const auto n = numbers.find(key);
    if (s == strings.end() && n == numbers.end())
      return usage(fmt::format("unknown option '{}'", arg));
    if (!value) {
      if (i + 1 >= argc) return usage(fmt::format("--{} needs a value", key));
      value = argv[++i];
    }
    if (s != strings.end()) {
      *s->second = std::string(*value);
    } else {
      auto v = ParseNumber(*value);
      if (!v) return usage(fmt::format("--{} needs a number, got '{}'", key, *value));
      *n->second = *v;
    }
  }
  const int sources = !o.fat_tree3.empty() + !o.fat_tree2.empty() + !o.topology.empty();
  if (sources != 1) return usage("give exactly one of --fat-tree3, --fat-tree2, --topology");
  if (!o.engine.empty() && !o.lft_dump.empty())
    return usage("--engine and --lft-dump exclude each other");
  if (o.lmc > 7) return usage("--lmc must be 0..7");
  if (o.threads == 0 || o.threads > 1024) return usage("--threads must be 1..1024");
  if (o.permutations > 100000000) return usage("--permutations is too large");

  // ---- fabric
  auto t0 = std::chrono::steady_clock::now();
  Result<Fabric> fabric = InvalidArgument("no fabric");
  std::string what;
  bool generated = false;
  const std::pair<const std::string*, bool> generators[] = {{&o.fat_tree3, true},
                                                            {&o.fat_tree2, false}};
  for (const auto& [text, three] : generators) {
    if (text->empty()) continue;
    auto k = ParseNumber(*text);
    if (!k || *k < 2 || *k > 254)
      return usage(fmt::format("--fat-tree{} needs a port count 2..254", three ? 3 : 2));
    fabric = three ? FatTree3(static_cast<int>(*k)) : FatTree2(static_cast<int>(*k));
    what = fmt::format("fat-tree{} k={}", three ? 3 : 2, *k);
    generated = true;
  }
  if (!o.topology.empty()) {
    fabric = ReadTopologyFile(o.topology);
    what = o.topology;
  }
  if (!fabric.ok()) {
    err << "ibsm-routecheck: " << fabric.status().ToString() << "\n";
    return 2;
  }
  std::vector<LftDumpSwitch> dump;
  if (!o.lft_dump.empty()) {
    std::ifstream in(o.lft_dump, std::ios::binary);
    std::stringstream buf;
    if (in.is_open()) buf << in.rdbuf();
    if (!in.is_open() || in.bad()) {
      err << "ibsm-routecheck: cannot read " << o.lft_dump << "\n";
      return 2;
    }
    auto parsed = ParseLftDump(buf.str(), o.lft_dump);
    if (!parsed.ok()) {
      err << "ibsm-routecheck: " << parsed.status().ToString() << "\n";
      return 2;
    }
    dump = std::move(parsed).value();
  }
  std::string lid_source;
  bool has_lids = false;
  if (!generated)  // a generated fabric has none
    for (PortId p = 0; p < fabric->port_count() && !has_lids; ++p)
      has_lids = fabric->port(p).lid.value() != 0;
  if (has_lids) {
    fabric->IndexLids();
    lid_source = "LIDs from the topology";
  } else if (!dump.empty()) {
    lid_source = fmt::format("LIDs of {} ports from the dump", LidsFromDump(*fabric, dump));
  } else {
    const size_t left = AssignLids(*fabric, static_cast<uint8_t>(o.lmc));
    lid_source = fmt::format("LIDs assigned, lmc {}", o.lmc);
    if (left)
      lid_source += fmt::format(", {} end ports left without a LID (unicast range full)", left);
  }
  const routing::LidMap lids(*fabric);
  out << fmt::format(
      "fabric: {}: {} switches, {} CAs, {} cables, max LID {} ({}{}), {:.2f} s, peak RSS "
      "{:.1f} MiB\n",
      what, fabric->switch_count(), fabric->ca_count(), fabric->link_count(), lids.max_lid(),
      lid_source, lids.conflicts() ? fmt::format(", {} LID conflicts", lids.conflicts()) : "",
      Since(t0), PeakRssMiB());
  out.flush();

  // ---- routing or the dump
  const unsigned threads = static_cast<unsigned>(o.threads);
  routing::RoutingTables tables;
  t0 = std::chrono::steady_clock::now();
  if (!o.lft_dump.empty()) {
    auto t = TablesFromDump(*fabric, dump, lids.max_lid(), o.lft_dump);
    if (!t.ok()) {
      err << "ibsm-routecheck: " << t.status().ToString() << "\n";
      return 2;
    }
    tables = std::move(t).value();
    size_t entries = 0, with_table = 0;
    for (const LftDumpSwitch& sw : dump) entries += sw.entries.size();
    for (const auto& st : tables.switches) with_table += !st.lft.empty();
    out << fmt::format(
        "tables: {} switches from {} ({} entries), {} switches without a table, "
        "{:.2f} s, peak RSS {:.1f} MiB\n",
        with_table, o.lft_dump, entries, tables.switches.size() - with_table, Since(t0),
        PeakRssMiB());
  } else {
    routing::RoutingOptions options;
    options.lmc = static_cast<uint8_t>(o.lmc);
    options.threads = threads;
    const std::string engines = o.engine.empty() ? std::string(routing::kDefaultChain) : o.engine;
    auto chain = routing::RouteChain(engines, *fabric, lids, options);
    if (!chain.ok()) {
      err << "ibsm-routecheck: routing failed: " << chain.status().ToString() << "\n";
      return chain.status().code() == StatusCode::kInvalidArgument ? 2 : 1;
    }
    tables = std::move(chain->tables);
    std::string declined;
    for (const auto& [name, why] : chain->declined)
      declined += fmt::format("; {} declined: {}", name, why.message());
    out << fmt::format(
        "routing: engine {} (chain '{}'{}), {} threads, {:.2f} s, peak RSS {:.1f} MiB\n",
        tables.engine, engines, declined, threads, Since(t0),
        PeakRssMiB());
  }
  out.flush();

  // ---- verification
  t0 = std::chrono::steady_clock::now();
  const routing::VerifyReport v = routing::VerifyTables(*fabric, lids, tables, o.problems, o.threads);
  out << fmt::format(
      "verify: {}: {} missing entries, {} loops, {} misrouted entries, {} "
      "unreachable pairs, {:.2f} s, peak RSS {:.1f} MiB\n",
      v.ok ? "ok" : "FAILED", v.missing_entries, v.loops, v.misrouted_entries, v.unreachable_pairs,
      Since(t0), PeakRssMiB());
  for (const std::string& p : v.problems) out << "  " << p << "\n";
  out.flush();

  // ---- credit loops
  t0 = std::chrono::steady_clock::now();
  const routing::CreditLoopReport c = routing::CheckCreditLoops(*fabric, lids, tables, threads);
  out << fmt::format(
      "credit loops: {}: {} channels, {} dependencies, {:.2f} s, peak RSS {:.1f} "
      "MiB\n",
      c.acyclic ? "acyclic" : "CYCLE", c.channels, c.dependencies, Since(t0), PeakRssMiB());
  if (!c.acyclic) {
    std::string cycle = "  cycle: ";
    for (size_t i = 0; i < c.cycle.size(); ++i)
      cycle += fmt::format("{} -(LID {})-> ", c.cycle[i], c.cycle_lids[i]);
    out << cycle << c.cycle.front() << "\n";
  }
  out.flush();

  // ---- quality
  if (o.quality) {
    t0 = std::chrono::steady_clock::now();
    routing::QualityOptions q_options;
    q_options.shifts = o.shifts;
    q_options.random_permutations = static_cast<uint32_t>(o.permutations);
    q_options.seed = o.seed;
    q_options.threads = threads;
    const routing::QualityReport q = routing::MeasureQuality(*fabric, lids, tables, q_options);
    for (const routing::TierLinkStats& t : q.routes_per_link)
      out << fmt::format(
          "routes per link, tier {}{}: {} channels, min {}, max {}, mean {:.1f}, "
          "stddev {:.1f}\n",
          t.tier, t.tier == 0 ? " (host cables)" : "", t.channels, t.min_routes, t.max_routes,
          t.mean_routes, t.stddev_routes);
    out << fmt::format(
        "quality: {} hosts, shift max sharing {}{}, random max sharing {} over {} permutations "
        "(seed {}), effective bisection bandwidth {:.3f}, unrouted flows {}, {:.2f} s, peak RSS "
        "{:.1f} MiB\n",
        q.hosts, q.shift_max_sharing,
        o.shifts ? fmt::format(" (first at shift {})", q.shift_worst) : " (shifts off)",
        q.random_max_sharing, o.permutations, o.seed, q.effective_bisection_bandwidth,
        q.unrouted_flows, Since(t0), PeakRssMiB());
  }
  return v.ok && c.acyclic ? 0 : 1;
}

}  // namespace ibsm::tools
