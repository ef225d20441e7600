// The engine registry (one explicit table, as OpenSM's static_routing_modules) and the
// fallback chain.
#include <fmt/format.h>

#include "routing/ar_engine.h"
#include "routing/ftree_engine.h"
#include "routing/minhop_engine.h"
#include "routing/routing_engine.h"
#include "routing/updn_engine.h"

namespace ibsm::routing {
namespace {

constexpr std::string_view kNoFallback = "no_fallback";

std::string_view Trim(std::string_view s) {
  const auto first = s.find_first_not_of(" \t\r\n");
  if (first == std::string_view::npos) return {};
  const auto last = s.find_last_not_of(" \t\r\n");
  return s.substr(first, last - first + 1);
}

std::string KnownEngines() {
  std::string out;
  for (const EngineEntry& e : EngineRegistry()) {
    if (!out.empty()) out += ", ";
    out += e.name;
  }
  return out;
}

}  // namespace

const std::vector<EngineEntry>& EngineRegistry() {
  static const std::vector<EngineEntry> kRegistry = {
      {"minhop", MakeMinHop},
      {"ftree", MakeFTree},
      {"updn", MakeUpDn},
      {"dnup", MakeDnUp},
      {"ar_updn", MakeArUpDn},
      {"ar_ftree", MakeArFTree},
  };
  return kRegistry;
}

std::unique_ptr<RoutingEngine> MakeEngine(std::string_view name) {
  for (const EngineEntry& e : EngineRegistry())
    if (e.name == name) return e.make();
  return nullptr;
}

bool SameRoutingInputs(const Fabric& a, const Fabric& b) {
  if (a.node_count() != b.node_count() || a.port_count() != b.port_count()) return false;
  for (NodeId n = 0; n < a.node_count(); ++n) {
    const Node& x = a.node(n);
    const Node& y = b.node(n);
    if (x.kind != y.kind || x.num_ports != y.num_ports || x.guid != y.guid ||
        x.system_image_guid != y.system_image_guid || x.first_port != y.first_port)
      return false;
  }
  for (PortId p = 0; p < a.port_count(); ++p) {
    const Port& x = a.port(p);
    const Port& y = b.port(p);
    if (x.node != y.node || x.num != y.num || x.guid != y.guid || x.peer != y.peer ||
        x.lid != y.lid || x.lmc != y.lmc)
      return false;
  }
  return true;
}

bool SameNodeIds(const Fabric& a, const Fabric& b) {
  if (a.node_count() != b.node_count()) return false;
  for (NodeId n = 0; n < a.node_count(); ++n)
    if (a.node(n).guid != b.node(n).guid) return false;
  return true;
}

RoutingTables TablesForNodeIds(const RoutingTables& tables, const Fabric& from, const Fabric& to) {
  RoutingTables out;
  out.engine = tables.engine;
  out.switch_index.assign(to.node_count(), SIZE_MAX);
  for (NodeId n = 0; n < to.node_count(); ++n) {
    if (!to.node(n).is_switch()) continue;
    const std::optional<NodeId> was = from.FindNode(to.node(n).guid);
    const SwitchTable* t = was ? tables.table(*was) : nullptr;
    if (!t) continue;
    out.switch_index[n] = out.switches.size();
    out.switches.push_back(SwitchTable{n, t->lft});
  }
  return out;
}

bool ChainNamesMinHop(std::string_view chain) {
  while (true) {
    const size_t comma = chain.find(',');
    if (Trim(chain.substr(0, comma)) == "minhop") return true;
    if (comma == std::string_view::npos) return false;
    chain.remove_prefix(comma + 1);
  }
}

Result<ChainResult> RouteChain(std::string_view chain, const Fabric& fabric, const LidMap& lids,
                               const RoutingOptions& options) {
  std::vector<std::unique_ptr<RoutingEngine>> engines;
  bool fallback = true;
  bool has_minhop = false;
  while (true) {
    const size_t comma = chain.find(',');
    const std::string_view token = Trim(chain.substr(0, comma));
    if (token == kNoFallback) {
      fallback = false;
    } else if (!token.empty()) {
      auto engine = MakeEngine(token);
      if (!engine)
        return InvalidArgument(fmt::format("unknown routing engine '{}' (known: {}; and {})",
                                           token, KnownEngines(), kNoFallback));
      has_minhop |= engine->name() == "minhop";
      engines.push_back(std::move(engine));
    }
    if (comma == std::string_view::npos) break;
    chain.remove_prefix(comma + 1);
  }
  // An empty chain (routing_engine unset) means minhop, as in OpenSM; "no_fallback" alone
  // (every engine named was unknown and dropped) routes nothing.
  if (engines.empty() && !fallback)
    return InvalidArgument(
        "routing_engine names no engine ibsm knows and no_fallback forbids the minhop "
        "fallback: nothing routed");
  if (fallback && !has_minhop) engines.push_back(MakeMinHop());

  ChainResult out;
  for (const auto& engine : engines) {
    Result<RoutingTables> r = engine->Route(fabric, lids, options);
    if (r.ok()) {
      out.tables = std::move(r).value();
      out.tables.engine = std::string(engine->name());
      return out;
    }
    out.declined.emplace_back(std::string(engine->name()), r.status());
  }
  const auto& [name, last] = out.declined.back();
  return Status(last.code(), fmt::format("every routing engine declined; last, {}: {}", name,
                                         last.message()));
}

}  // namespace ibsm::routing
