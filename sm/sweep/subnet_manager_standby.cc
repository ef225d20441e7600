// SubnetManager, the warm standby: while STANDBY the SM keeps a current model of the fabric
// with SMP Gets alone (a discovery every sweep_interval, and the LFT blocks of every switch
// once the fabric held still between two of them), on a pipeline of its own that is always
// fenced. A takeover then starts from that model: every switch is re-read (SwitchInfo and
// every PortInfo) as a repair sweep re-reads the switches that report, so a change since the
// last refresh is taken out or looked behind; the LFT push compares with the blocks the
// standby read instead of reading every block back; and a heavy sweep after SUBNET UP reads
// back what that took on trust (ARCHITECTURE.md "Warm standby").
#include "sm/sweep/subnet_manager.h"

#include <boost/asio/post.hpp>
#include <fmt/format.h>

#include "base/log.h"
#include "sm/model/pkey_manager.h"
#include "routing/reroute.h"
#include "routing/updown_proof.h"

namespace ibsm::sm {
namespace {

// What the master would change after a change of the fabric: the cables, the LIDs the end
// ports hold and each switch's LinearFDBTop. Equal signatures of two refreshes mean the
// master had nothing new to write between them.
std::string ModelSignature(const DiscoveryResult& r) {
  const Fabric& f = r.fabric;
  std::string out = FormatFabric(f);
  for (NodeId n = 0; n < f.node_count(); ++n) {
    const Node& node = f.node(n);
    out += fmt::format("{} {}", ToString(node.guid),
                       node.is_switch() ? r.nodes[n].switch_info.linear_fdb_top : 0);
    for (uint32_t p = 0; p <= node.num_ports; ++p) {
      const Port& port = f.port(f.port_id(n, PortNum{static_cast<uint8_t>(p)}));
      if (port.lid.value() != 0) out += fmt::format(" {}:{}/{}", p, port.lid.value(), port.lmc);
    }
    out += '\n';
  }
  return out;
}

}  // namespace

void SubnetManager::ScheduleStandbyRefresh() {
  if (stopped_ || state() != mad::SmState::kStandby) return;
  if (!warm_ && discovered_ && discovered_->fabric.FindPort(sm_port_guid_)) {
    WarmModel w;
    w.model = discovered_;
    w.at = clock_.Now();
    w.signature = ModelSignature(*discovered_);
    warm_ = std::move(w);
    PublishStandbyModel();
  }
  if (options_.sweep_interval.count() == 0) return;
  standby_timer_.expires_after(options_.sweep_interval);
  standby_timer_.async_wait([this](boost::system::error_code ec) {
    if (!ec) RefreshStandbyModel();
  });
}

// What ibsmctl nodes, links and health and the metrics read of a standby: its latest model,
// without tables (it programs none). The SA, and ibsmctl route, lft and check, which need
// tables, keep the last snapshot this SM published after a sweep.
void SubnetManager::PublishStandbyModel() {
  auto s = std::make_shared<SubnetSnapshot>();
  s->sweep = last_.number;
  s->discovery = warm_->model;
  s->subnet_prefix = options_.subnet_prefix;
  s->sm_port_guid = sm_port_guid_;
  s->sm_priority = options_.sm_priority;
  s->sm_state = state();
  published_ = std::move(s);
}

void SubnetManager::RefreshStandbyModel() {
  if (stopped_ || state() != mad::SmState::kStandby || standby_refreshing_) return;
  standby_refreshing_ = true;
  standby_discovery_ = std::make_unique<Discovery>(standby_pipeline_);
  standby_discovery_->Run([this](DiscoveryResult r) {
    standby_refreshing_ = false;
    if (stopped_ || state() != mad::SmState::kStandby) return;
    ++counters_.standby_refreshes;
    if (r.smps_failed > 0 || !r.fabric.FindPort(sm_port_guid_)) {
      // Not a model to take over from; the last one stands until the next refresh.
      Log(LogName::kHa).info("standby: refresh of the fabric model had {} SMPs unanswered; "
                             "kept the model of {:.1f} s ago",
                             r.smps_failed,
                             warm_ ? std::chrono::duration<double>(clock_.Now() - warm_->at).count()
                                   : 0.0);
      ScheduleStandbyRefresh();
      return;
    }
    std::string signature = ModelSignature(r);
    auto model = std::make_shared<const DiscoveryResult>(std::move(r));
    if (!warm_ || warm_->signature != signature) {
      // The master is (or was) changing the fabric: its LFT writes may still be under way,
      // so the blocks are read once a refresh finds the same fabric again.
      WarmModel w;
      w.model = std::move(model);
      w.at = clock_.Now();
      w.signature = std::move(signature);
      Log(LogName::kHa).info("standby: fabric model refreshed ({} nodes, {} links); changed "
                             "since the last refresh, its LFT blocks are read at the next",
                             w.model->fabric.node_count(), w.model->fabric.link_count());
      warm_ = std::move(w);
      PublishStandbyModel();
      ScheduleStandbyRefresh();
      return;
    }
    warm_->model = std::move(model);
    warm_->at = clock_.Now();
    PublishStandbyModel();
    if (!warm_->lfts_current) {
      ReadStandbyLfts();
      return;
    }
    RouteStandbyModel();
    ScheduleStandbyRefresh();
  });
}

// The tables a takeover from this model would route, made now on the worker: verified, checked
// for credit loops and proven as a sweep's are. Only once per set of routing inputs; a takeover
// that finds the fabric unchanged takes them (Route, engine_tables_) instead of routing
// (0.25 s of a 3-tier k=32 takeover on ibsim).
void SubnetManager::RouteStandbyModel() {
  if (!warm_ || !warm_->model || !warm_->lfts_current || standby_routing_ || stopped_) return;
  const std::shared_ptr<const DiscoveryResult> model = warm_->model;
  if (engine_tables_ && routing::SameRoutingInputs(*engine_tables_->fabric, model->fabric)) return;
  standby_routing_ = true;
  RouteRequest request;
  request.fabric = std::shared_ptr<const Fabric>(model, &model->fabric);
  request.chain = RoutingChain();
  request.options = RoutingOpts();
  request.want_proof = options_.incremental_repair && options_.incremental_reroute;
  route_worker_.Route(std::move(request), io_, [this](Routed routed) {
    standby_routing_ = false;
    // Nothing kept when the tables did not pass: a takeover routes as it would have.
    if (stopped_ || !routed.passed()) return;
    // Kept whatever the state now: the tables passed on exactly these inputs.
    Log(LogName::kHa).info("standby: routed its model ({} engine); a takeover that finds "
                           "the fabric unchanged takes these tables",
                           routed.result->tables.engine);
    EngineTables e;
    e.fabric = std::move(routed.fabric);
    e.chain = std::move(routed.chain);
    e.verify = std::move(routed.verify);
    e.loops = std::move(routed.loops);
    e.proof = std::move(routed.proof);
    e.tables = std::make_shared<const routing::RoutingTables>(std::move(routed.result->tables));
    engine_tables_ = std::move(e);
  });
}

// Every block up to each switch's LinearFDBTop, on the standby's pipeline (fed, so 190,000
// blocks at 3-tier k=32 are not queued at once), and the P_Key tables.
void SubnetManager::ReadStandbyLfts() {
  auto model = warm_->model;
  auto lfts = std::make_shared<std::unordered_map<Guid, WarmLft>>();
  const Fabric& f = model->fabric;
  struct Cursor {
    NodeId node = 0;
    size_t block = 0;
  };
  auto cursor = std::make_shared<Cursor>();
  auto blocks_of = [model](NodeId n) {
    return static_cast<size_t>(model->nodes[n].switch_info.linear_fdb_top) / 64 + 1;
  };
  for (NodeId n = 0; n < f.node_count(); ++n) {
    if (!f.node(n).is_switch() || model->nodes[n].switch_info.linear_fdb_top == 0) continue;
    WarmLft& w = (*lfts)[f.node(n).guid];
    w.top = model->nodes[n].switch_info.linear_fdb_top;
    w.blocks.assign(blocks_of(n), {});
    w.known.assign(blocks_of(n), false);
  }
  standby_pipeline_.Feed([this, model, lfts, cursor, blocks_of]() {
    const Fabric& f = model->fabric;
    while (cursor->node < f.node_count()) {
      const NodeId n = cursor->node;
      auto it = lfts->find(f.node(n).guid);
      if (!f.node(n).is_switch() || it == lfts->end() || cursor->block >= blocks_of(n)) {
        ++cursor->node;
        cursor->block = 0;
        continue;
      }
      const size_t b = cursor->block++;
      ++counters_.standby_lft_blocks_read;
      standby_pipeline_.Get(model->nodes[n].path, mad::attr::kLinearForwardingTable,
                            static_cast<uint32_t>(b), [lfts, g = f.node(n).guid, b](Result<mad::Smp> r) {
                              if (!r.ok()) return;
                              auto blk = mad::Decode<mad::LinearForwardingTable>(r->data);
                              auto it = lfts->find(g);
                              if (!blk.ok() || it == lfts->end() || b >= it->second.known.size())
                                return;
                              it->second.blocks[b] = blk->port;
                              it->second.known[b] = true;
                            });
      return true;
    }
    return false;
  });
  // The P_Key tables the partition stage would read (PartitionEndPorts, and the enforcing
  // switch ports), each by the path ProgramPKeys takes.
  auto pkeys = std::make_shared<std::map<std::pair<Guid, uint8_t>, PKeyCache>>();
  std::vector<PortId> ports = PartitionEndPorts(*model);
  if (options_.partitions.enforce != PartEnforce::kOff)
    for (PortId p : EnforcingSwitchPorts(*model)) ports.push_back(p);
  for (PortId p : ports) {
    const size_t cap = PKeyCapacity(*model, p);
    auto target = PKeyTarget(*model, p);
    if (cap == 0 || !target) continue;
    const Port& port = f.port(p);
    const auto key = std::make_pair(f.node(port.node).guid, port.num.value());
    PKeyCache& c = (*pkeys)[key];
    const size_t blocks = (cap + mad::kPKeyBlockSize - 1) / mad::kPKeyBlockSize;
    c.keys.assign(cap, 0);
    c.known.assign(blocks, false);
    for (size_t b = 0; b < blocks; ++b) {
      standby_pipeline_.Get(target->first, mad::attr::kPKeyTable,
                            mad::PKeyAttrMod(static_cast<uint32_t>(b), target->second),
                            [pkeys, key, b](Result<mad::Smp> r) {
                              if (!r.ok()) return;
                              auto blk = mad::Decode<mad::PKeyTable>(r->data);
                              auto it = pkeys->find(key);
                              if (blk.ok() && it != pkeys->end()) it->second.Store(b, *blk);
                            });
    }
  }
  standby_pipeline_.WhenIdle([this, model, lfts, pkeys] {
    if (stopped_ || state() != mad::SmState::kStandby) return;
    // Kept only if the model is still the one they were read on.
    if (warm_ && warm_->model == model) {
      warm_->pkeys = std::move(*pkeys);
      size_t known = 0, blocks = 0;
      for (const auto& [g, w] : *lfts) {
        blocks += w.known.size();
        for (bool k : w.known) known += k;
      }
      warm_->lfts = std::move(*lfts);
      warm_->lfts_current = true;
      warm_->lfts_at = clock_.Now();
      Log(LogName::kHa).info("standby: read the LFT blocks of {} switches ({} of {} answered) "
                             "and the P_Key tables of {} ports; a takeover starts from this "
                             "model",
                             warm_->lfts.size(), known, blocks, warm_->pkeys.size());
      RouteStandbyModel();
    }
    ScheduleStandbyRefresh();
  });
}

// A model from at most three refreshes ago, with the blocks read on it.
bool SubnetManager::WarmUsable() const {
  if (!warm_ || !warm_->lfts_current || !options_.incremental_repair ||
      options_.sweep_interval.count() == 0)
    return false;
  return clock_.Now() - warm_->at <= 3 * options_.sweep_interval + std::chrono::seconds(5);
}

// The takeover's first sweep: a repair of every switch over the standby's model (it re-reads
// what a discovery reads of a switch, and takes out, or looks behind, what changed), routed
// by the engine, its LFT push compared with the blocks the standby read.
void SubnetManager::BeginWarmTakeover() {
  WarmModel w = std::move(*warm_);
  warm_.reset();
  standby_timer_.cancel();
  ++counters_.warm_takeovers;
  const Fabric& f = w.model->fabric;
  Log(LogName::kHa).info("takeover from the standby's model of {:.1f} s ago ({} nodes, {} "
                         "links; LFT blocks of {} switches read {:.1f} s ago): every switch is "
                         "re-read instead of a discovery, and a heavy sweep once the subnet "
                         "is up reads back what was taken on trust",
                         std::chrono::duration<double>(clock_.Now() - w.at).count(),
                         f.node_count(), f.link_count(), w.lfts.size(),
                         std::chrono::duration<double>(clock_.Now() - w.lfts_at).count());
  discovered_ = w.model;
  sm_port_ = *f.FindPort(sm_port_guid_);
  warm_lfts_ = std::move(w.lfts);
  // The LinearFDBTop each switch held when the standby read it stands for the one written,
  // as for a switch this SM programmed: a switch that answers another (it rebooted) is
  // known to hold nothing of it.
  for (const auto& [guid, lft] : warm_lfts_) lfts_.set_top(guid, lft.top);
  // The P_Key tables the standby read stand for what the ports hold, as the blocks do.
  partitions_.Assume(std::move(w.pkeys));
  warm_takeover_ = true;
  repair_pending_.clear();
  for (const Node& n : f.nodes())
    if (n.is_switch()) repair_pending_.insert(n.guid);
  repair_reason_ = "takeover from the standby's model";
  repair_posted_ = false;
  BeginRepair();
}

std::optional<SubnetManager::StandbyModel> SubnetManager::standby_model() const {
  if (state() != mad::SmState::kStandby || !warm_ || !warm_->model) return std::nullopt;
  StandbyModel m;
  const auto now = clock_.Now();
  m.age_s = std::chrono::duration<double>(now - warm_->at).count();
  m.nodes = warm_->model->fabric.node_count();
  m.links = warm_->model->fabric.link_count();
  m.tables_read = warm_->lfts_current;
  if (m.tables_read) m.tables_age_s = std::chrono::duration<double>(now - warm_->lfts_at).count();
  m.usable = WarmUsable();
  return m;
}

}  // namespace ibsm::sm
