#include "sm/vendor/sharp_manager.h"

#include <fmt/format.h>

#include <algorithm>
#include <set>

#include "base/log.h"
#include "fabric/aggregation_node.h"
#include "mad/attr/path_record.h"
#include "sm/sa/sa_server.h"

namespace ibsm::sm {

// A window of class 0x0B requests in flight, LID-routed to the ANs.
class SharpManager::GmpWindow {
 public:
  using Callback = std::function<void(Result<mad::AmMad>)>;
  GmpWindow(mad::Transport& t, mad::SendOptions send, size_t max, SharpCounters* counters)
      : transport_(t), send_(send), max_(max ? max : 1), counters_(counters) {}

  // `send` other than the window's: a Set that is not idempotent goes once (retries 0).
  void Send(Lid dlid, const mad::AmMad& request, Callback cb,
            std::optional<mad::SendOptions> send = std::nullopt) {
    queue_.push_back({dlid, request, std::move(cb), send.value_or(send_)});
    Pump();
  }
  void WhenIdle(std::function<void()> fn) {
    idle_fn_ = std::move(fn);
    CheckIdle();
  }
  std::shared_ptr<bool> alive() const { return alive_; }
  size_t in_flight() const { return in_flight_; }

 private:
  struct Request {
    Lid dlid;
    mad::AmMad mad;
    Callback cb;
    mad::SendOptions send;
  };
  void Pump() {
    while (in_flight_ < max_ && !queue_.empty()) {
      Request req = std::move(queue_.front());
      queue_.pop_front();
      ++in_flight_;
      ++counters_->mads_sent;
      mad::MadMessage msg;
      msg.bytes.assign(mad::kMadSize, 0);
      mad::EncodeAm(req.mad, msg.bytes);
      msg.addr.lid = req.dlid;
      const uint16_t attr = req.mad.hdr.attr_id;
      std::weak_ptr<bool> alive = alive_;
      transport_.Send(std::move(msg), req.send,
                      [this, alive, attr, cb = std::move(req.cb)](Result<mad::MadMessage> r) {
                        if (alive.expired()) return;
                        --in_flight_;
                        Result<mad::AmMad> out = [&]() -> Result<mad::AmMad> {
                          if (!r.ok()) return r.status();
                          mad::AmMad m;
                          IBSM_RETURN_IF_ERROR(mad::DecodeAm(r->bytes, &m));
                          if (m.hdr.attr_id != attr)
                            return Corrupt(fmt::format("answer names attribute {:#06x}, not {:#06x}",
                                                       m.hdr.attr_id, attr));
                          if (m.hdr.status != mad::mad_status::kOk)
                            return FailedPrecondition(fmt::format("MAD status {:#06x}", m.hdr.status));
                          return m;
                        }();
                        if (!out.ok()) ++counters_->mads_failed;
                        if (cb) cb(std::move(out));
                        Pump();
                        CheckIdle();
                      });
    }
  }
  void CheckIdle() {
    if (!queue_.empty() || in_flight_ != 0 || !idle_fn_) return;
    auto fn = std::move(idle_fn_);
    idle_fn_ = nullptr;
    fn();
  }

  mad::Transport& transport_;
  mad::SendOptions send_;
  size_t max_;
  SharpCounters* counters_;
  std::deque<Request> queue_;
  size_t in_flight_ = 0;
  std::function<void()> idle_fn_;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

struct SharpManager::Run_ {
  std::shared_ptr<const DiscoveryResult> sweep;
  std::function<void()> done;
  struct An {
    NodeId an = kNoNode;
    NodeId sw = kNoNode;
    PortNum sw_port{0};
    Guid port_guid{0};
    Lid lid{0};
    bool capable = false;
    bool enabled = false;
    bool usable = false;
  };
  std::vector<An> ans;
  std::map<Guid, size_t> by_guid;  // AN port GUID -> ans index
  routing::SharpInput input;
  routing::SharpPlan plan;
  std::map<uint16_t, std::map<Guid, SharpAnTree>> intent;
  std::set<uint16_t> dirty;     // trees to (re)write
  std::set<uint16_t> failed;    // trees a write or read-back failed for
  std::vector<uint8_t> link_mtu;  // by PortId: min of both ends' MTUCap; 0 unknown (LinkMtus)
  const Fabric& fabric() const { return sweep->fabric; }
  Lid LidOf(Guid port_guid) const {
    auto p = fabric().FindPort(port_guid);
    return p ? fabric().port(*p).lid : Lid{0};
  }
};

namespace {
std::string Hosts(const Fabric& f, const std::vector<PortId>& ports, size_t max = 8) {
  std::string s;
  for (size_t i = 0; i < ports.size() && i < max; ++i) {
    const Node& n = f.node(f.port(ports[i]).node);
    s += fmt::format("{}{} ({})", s.empty() ? "" : ", ", ToString(f.port(ports[i]).guid),
                     n.description.empty() ? n.name : n.description);
  }
  if (ports.size() > max) s += fmt::format(" and {} more", ports.size() - max);
  return s;
}

// One QP of an AN's share of a tree: the QPN and the far end it connects to.
struct QpEdge {
  uint32_t qpn = 0;
  Guid remote{0};
  uint32_t remote_qpn = 0;  // the far AN's QP for the same edge; 0 for a host
};

// The QPs AN `me` holds for a tree (parent first, then children in index order), with the
// far end of each, from the per-AN view `per_an` (QPNs as allocated).
std::vector<QpEdge> EdgesOf(const std::map<Guid, SharpAnTree>& per_an, Guid me) {
  std::vector<QpEdge> out;
  auto it = per_an.find(me);
  if (it == per_an.end()) return out;
  const SharpAnTree& at = it->second;
  if (at.parent.value()) {
    // The parent's QP for this edge: its child slot holding us.
    uint32_t rq = 0;
    auto p = per_an.find(at.parent);
    if (p != per_an.end()) {
      auto pos = std::find(p->second.children.begin(), p->second.children.end(), me);
      const size_t idx = static_cast<size_t>(pos - p->second.children.begin());
      if (idx < p->second.child_qpn.size()) rq = p->second.child_qpn[idx];
    }
    out.push_back({at.parent_qpn, at.parent, rq});
  }
  for (size_t c = 0; c < at.children.size() && c < at.child_qpn.size(); ++c) {
    auto child = per_an.find(at.children[c]);
    out.push_back({at.child_qpn[c], at.children[c], child != per_an.end() ? child->second.parent_qpn : 0});
  }
  return out;
}
}  // namespace

uint32_t SharpPsn(Guid sender, uint32_t sender_qpn, uint16_t tree_id) {
  // splitmix64's finaliser over the three: deterministic, and neighbouring QPNs differ.
  uint64_t x = sender.value() ^ (uint64_t{sender_qpn & 0xFFFFFF} << 16) ^ tree_id;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  x ^= x >> 31;
  const uint32_t psn = static_cast<uint32_t>(x % (mad::kPsnLimit - 1)) + 1;
  return psn;
}

// The path between two end ports (AN or host) of a tree edge: both cables to their
// switches, and between two different switches the links joining them (a tree edge joins
// adjacent tiers; the smallest of parallel links is taken, as the LFTs may use any). With
// no direct link, every link of both switches bounds it. Unknown MTUs do not count.
uint8_t SharpManager::PathMtu(Guid a, Guid b) const {
  const Fabric& f = run_->fabric();
  uint8_t m = mad::IsValidMtu(options_.mtu) ? options_.mtu : mad::mtu::k4096;
  auto mtu_of = [&](PortId p) -> uint8_t {
    const uint8_t v = p < run_->link_mtu.size() ? run_->link_mtu[p] : 0;
    return mad::IsValidMtu(v) ? v : 0;
  };
  auto pa = f.FindPort(a), pb = f.FindPort(b);
  if (!pa || !pb) return m;
  for (PortId p : {*pa, *pb})
    if (uint8_t v = mtu_of(p)) m = std::min(m, v);
  if (!f.port(*pa).connected() || !f.port(*pb).connected()) return m;
  const NodeId sa = f.port(f.port(*pa).peer).node;
  const NodeId sb = f.port(f.port(*pb).peer).node;
  if (sa == sb) return m;
  uint8_t direct = UINT8_MAX, around = UINT8_MAX;
  for (NodeId sw : {sa, sb}) {
    for (uint32_t i = 1; i <= f.node(sw).num_ports; ++i) {
      const PortId p = f.port_id(sw, PortNum{static_cast<uint8_t>(i)});
      const uint8_t v = mtu_of(p);
      if (!v || !f.port(p).connected()) continue;
      around = std::min(around, v);
      if (f.port(f.port(p).peer).node == (sw == sa ? sb : sa)) direct = std::min(direct, v);
    }
  }
  const uint8_t between = direct != UINT8_MAX ? direct : around;
  return between != UINT8_MAX ? std::min(m, between) : m;
}

mad::QpcConfig SharpManager::QpContext(uint16_t tree_id, Guid me, uint32_t qpn, Guid remote,
                                       uint32_t remote_qpn) const {
  mad::QpcConfig c;
  c.qpn = qpn;
  c.state = mad::qp_state::kReady;
  c.transport = mad::qp_transport::kRc;
  c.remote_qpn = remote_qpn;
  c.remote_lid = run_->LidOf(remote).value();
  c.tree_id = tree_id;
  c.mtu = PathMtu(me, remote);
  c.sl = options_.sl;
  c.retry_count = options_.retry_count;
  c.rnr_retry = options_.rnr_retry;
  c.rnr_min_timer = options_.rnr_min_timer;
  c.local_ack_timeout = options_.local_ack_timeout;
  c.remote_guid = remote.value();
  c.pkey = options_.pkey;
  c.qkey = options_.qkey;
  c.send_psn = SharpPsn(me, qpn, tree_id);
  c.recv_psn = SharpPsn(remote, remote_qpn, tree_id);
  c.max_rd_atomic = options_.max_rd_atomic;
  c.max_dest_rd_atomic = options_.max_dest_rd_atomic;
  return c;
}

SharpManager::SharpManager(mad::Transport& transport, SmpPipeline& pipeline, SharpOptions options)
    : transport_(transport),
      pipeline_(pipeline),
      options_(options),
      gmp_(std::make_unique<GmpWindow>(transport, options.send, options.window, &counters_)) {}

size_t SharpManager::Stop() {
  if (!running_) return 0;
  running_ = false;
  ++gen_;
  // A new window: the old one's queued requests go with it, and the answers to those in
  // flight find it gone (GmpWindow::alive) and run nothing.
  const size_t let_go = pipeline_.Abandon(this) + gmp_->in_flight();
  gmp_ = std::make_unique<GmpWindow>(transport_, options_.send, options_.window, &counters_);
  if (run_) run_->sweep = nullptr;
  return let_go;
}

SharpManager::~SharpManager() = default;

void SharpManager::Note(const std::string& id, const std::string& text) {
  Log(LogName::kSm).warn("{} {}", id, text);
  summary_.notes.push_back(id + " " + text);
}

void SharpManager::Run(std::shared_ptr<const DiscoveryResult> sweep, std::function<void()> done) {
  run_ = std::make_unique<Run_>();
  running_ = true;
  ++gen_;
  run_->sweep = std::move(sweep);
  run_->done = std::move(done);
  summary_ = SharpSummary{};
  summary_.ran = true;
  if (!announced_) {
    announced_ = true;
    Log(LogName::kSm).info("SM-SHARP-009 the class 0x0B field layouts (ANInfo, TreeConfig, "
                           "QPAllocation, QPCConfig, ResourceCleanup) are ibsm's own (ibsm "
                           "encoding v2, mad/attr/sharp.h), unverified against a real "
                           "aggregation node");
  }
  const Fabric& f = run_->sweep->fabric;
  run_->link_mtu = LinkMtus(f, run_->sweep->nodes);
  for (NodeId n = 0; n < f.node_count(); ++n) {
    auto sp = AggregationNodeSwitchPort(f, n);
    if (!sp) continue;
    Run_::An an;
    an.an = n;
    an.sw = f.port(*sp).node;
    an.sw_port = f.port(*sp).num;
    const Port& ap = f.port(f.port(*sp).peer);
    an.port_guid = ap.guid;
    an.lid = ap.lid;
    run_->by_guid[an.port_guid] = run_->ans.size();
    run_->ans.push_back(an);
  }
  summary_.ans = run_->ans.size();
  Probe();
}

// GeneralInfo capability bit 18, then SHArPANEn on the switch's AN port. A node is taken
// for an AN by its NodeDescription ("Aggregation Node"); where the switch marks special
// ports (GeneralInfo bit 21), its port must also read as a special port of type AN
// (MlnxExtendedPortInfo byte 47), as NVIDIA's SM identifies ANs (docs/ar-sharp.md "SHARP").
void SharpManager::Probe() {
  const Fabric& f = run_->fabric();
  for (size_t i = 0; i < run_->ans.size(); ++i) {
    const Run_::An& an = run_->ans[i];
    const DrPath path = run_->sweep->nodes[an.sw].path;
    const std::string sw = fmt::format("{} ({})", ToString(f.node(an.sw).guid), f.node(an.sw).description);
    pipeline_.Get(path, mad::attr::kGeneralInfo, mad::kGeneralInfoCapabilityModifier,
                  [this, i, path, sw, gen = gen_](Result<mad::Smp> r) {
                    if (gen != gen_) return;  // stopped (Stop)
                    auto caps = r.ok() ? mad::Decode<mad::GeneralInfoCapabilities>(r->data)
                                       : Result<mad::GeneralInfoCapabilities>(r.status());
                    if (!caps.ok() || !caps->Has(mad::general_cap::kSharpAggregationNode)) {
                      Note("SM-SHARP-002",
                           fmt::format("switch {} has an aggregation node but does not report "
                                       "SHARP capability (GeneralInfo bit 18: {}): not used",
                                       sw, caps.ok() ? "clear" : caps.status().ToString()));
                      return;
                    }
                    run_->ans[i].capable = true;
                    const bool marking = caps->Has(mad::general_cap::kSpecialPortsMarking);
                    const uint32_t port = run_->ans[i].sw_port.value();
                    pipeline_.Get(path, mad::vendor_attr::kMlnxExtendedPortInfo, port,
                                  [this, i, path, port, sw, marking, gen](Result<mad::Smp> r) {
                      if (gen != gen_) return;
                      if (!r.ok()) {
                        Note("SM-SHARP-003", fmt::format("MlnxExtendedPortInfo of {} port {} "
                                                         "failed: {}", sw, port, r.status().ToString()));
                        return;
                      }
                      auto m = mad::Decode<mad::MlnxExtendedPortInfo>(r->data);
                      if (marking && m.ok() &&
                          !(m->is_special_port &&
                            m->special_port_type == mad::special_port_type::kAggregationNode)) {
                        ++summary_.ans_unmarked;
                        Note("SM-SHARP-010",
                             fmt::format("switch {} port {} leads to a node described as an "
                                         "aggregation node, but the switch marks the port {}: "
                                         "not used",
                                         sw, port,
                                         m->is_special_port
                                             ? fmt::format("as special port type {}",
                                                           m->special_port_type)
                                             : std::string("as no special port")));
                        return;
                      }
                      if (!marking) {
                        ++summary_.ans_by_description;
                        if (!description_only_logged_) {
                          description_only_logged_ = true;
                          Log(LogName::kSm).info(
                              "SM-SHARP-011 switch {} marks no special ports (GeneralInfo bit "
                              "21 clear): its aggregation node, and those of switches like it, "
                              "are recognised by their NodeDescription alone",
                              sw);
                        }
                      }
                      if (m.ok() && m->sharp_an_en) {
                        run_->ans[i].enabled = true;
                        return;
                      }
                      // Read-modify-write: SHArPANEn set, port_recovered written as 0 (the
                      // only value a Set may carry, docs/ar-sharp.md "SHARP").
                      std::array<uint8_t, mad::kSmpDataSize> data = r->data;
                      mad::SetBits(data, 1, 1, 1);
                      mad::SetBits(data, mad::kMlnxExtPortInfoPortRecoveredBit, 1, 0);
                      pipeline_.Set(path, mad::vendor_attr::kMlnxExtendedPortInfo, port, data,
                                    [this, i, port, sw, gen](Result<mad::Smp> r) {
                        if (gen != gen_) return;
                        auto m = r.ok() ? mad::Decode<mad::MlnxExtendedPortInfo>(r->data)
                                        : Result<mad::MlnxExtendedPortInfo>(r.status());
                        if (!m.ok() || !m->sharp_an_en) {
                          Note("SM-SHARP-003",
                               fmt::format("enabling the aggregation node of {} (port {}) failed: {}",
                                           sw, port, m.ok() ? "bit still clear" : m.status().ToString()));
                          return;
                        }
                        ++counters_.ans_enabled;
                        run_->ans[i].enabled = true;
                      }, this, /*abandonable=*/true);
                    }, this, /*abandonable=*/true);
                  }, this, /*abandonable=*/true);
  }
  std::weak_ptr<bool> alive = gmp_->alive();
  pipeline_.WhenIdle([this, alive] {
    if (!alive.expired()) QueryAnInfo();
  });
}

void SharpManager::QueryAnInfo() {
  const Fabric& f = run_->fabric();
  for (size_t i = 0; i < run_->ans.size(); ++i) {
    const Run_::An& an = run_->ans[i];
    summary_.sharp_switches += an.capable;
    summary_.ans_enabled += an.enabled;
    if (!an.enabled) continue;
    if (an.lid.value() == 0) {
      Note("SM-SHARP-004", fmt::format("aggregation node {} has no LID: not used",
                                       ToString(an.port_guid)));
      continue;
    }
    const NodeId node = an.an;
    gmp_->Send(an.lid, mad::MakeAmRequest(mad::method::kGet, mad::am_attr::kAnInfo, 0),
               [this, i, node, &f](Result<mad::AmMad> r) {
                 auto info = r.ok() ? mad::Decode<mad::AnInfo>(r->data)
                                    : Result<mad::AnInfo>(r.status());
                 if (!info.ok() || info->tree_radix == 0 || info->tree_table_size == 0) {
                   Note("SM-SHARP-004",
                        fmt::format("ANInfo of aggregation node {} at LID {}: {}: not used",
                                    ToString(f.node(node).guid), run_->ans[i].lid.value(),
                                    info.ok() ? "radix or tree table is 0" : info.status().ToString()));
                   return;
                 }
                 run_->ans[i].usable = true;
                 run_->input.ans[node] = {info->tree_radix, info->tree_table_size};
               });
  }
  gmp_->WhenIdle([this] { Plan(); });
}

void SharpManager::Plan() {
  Run_& run = *run_;
  const Fabric& f = run.fabric();
  if (run.input.ans.empty()) {
    // Nothing to build on: one line, not one per switch and host.
    Note("SM-SHARP-008", run.ans.empty() ? "sharp_enable is set but the fabric has no aggregation node"
                                         : "no aggregation node is usable (see the lines above)");
    Write();  // cleans up what earlier sweeps wrote, if anything still answers
    return;
  }
  run.input.previous_ids = tree_ids_;
  run.plan = routing::BuildSharpTrees(f, run.input);
  for (const std::string& n : run.plan.notes) Note("SM-SHARP-007", n);
  for (const routing::SharpTree& t : run.plan.trees) {
    tree_ids_[f.node(t.root_switch).guid] = t.id;
    auto& per_an = run.intent[t.id];
    for (const routing::SharpTreeNode& n : t.nodes) {
      SharpAnTree at;
      const Guid me = f.port(f.port_id(n.an, PortNum{1})).guid;
      if (n.parent >= 0) at.parent = f.port(f.port_id(t.nodes[n.parent].an, PortNum{1})).guid;
      for (uint32_t c : n.children) at.children.push_back(f.port(f.port_id(t.nodes[c].an, PortNum{1})).guid);
      for (PortId h : n.hosts) at.children.push_back(f.port(h).guid);
      per_an[me] = std::move(at);
    }
  }
  for (const auto& [id, per_an] : run.intent) {
    auto it = programmed_.find(id);
    if (it == programmed_.end() || it->second.size() != per_an.size()) {
      run.dirty.insert(id);
      continue;
    }
    for (const auto& [an, at] : per_an) {
      auto p = it->second.find(an);
      if (p == it->second.end() || !(p->second == at)) {
        run.dirty.insert(id);
        break;
      }
    }
  }
  Verify(/*after_write=*/false);
}

// Reads back the trees this SM wrote (before writing: the unchanged ones, to find ANs that
// lost them; after: the ones just written) and compares with what it wrote.
void SharpManager::Verify(bool after_write) {
  Run_& run = *run_;
  auto mismatch = std::make_shared<std::set<uint16_t>>();
  for (const auto& [id, per_an] : run.intent) {
    if (after_write != (run.dirty.count(id) > 0) || run.failed.count(id)) continue;
    auto prog = programmed_.find(id);
    if (prog == programmed_.end()) continue;
    for (const auto& [an_guid, intent] : per_an) {
      auto pa = prog->second.find(an_guid);
      if (pa == prog->second.end()) {
        mismatch->insert(id);
        continue;
      }
      const SharpAnTree& want = pa->second;
      const Lid lid = run.LidOf(an_guid);
      const uint16_t tid = id;
      for (size_t first = 0; first == 0 || first < want.child_qpn.size(); first += mad::kTreeConfigMaxChildren) {
        mad::AmMad get = mad::MakeAmRequest(mad::method::kGet, mad::am_attr::kTreeConfig, 0);
        mad::TreeConfig which;  // the Get names the tree and its first child in its data
        which.tree_id = tid;
        which.record_locator = static_cast<uint8_t>(first);
        mad::EncodeTo(which, get.data);
        gmp_->Send(lid, get, [mismatch, tid, first, want](Result<mad::AmMad> r) {
                     auto t = r.ok() ? mad::Decode<mad::TreeConfig>(r->data)
                                     : Result<mad::TreeConfig>(r.status());
                     bool same = t.ok() && t->tree_id == tid && t->parent_qpn == want.parent_qpn &&
                                 t->state == mad::tree_state::kEnabled;
                     const size_t n = std::min(want.child_qpn.size() - std::min(first, want.child_qpn.size()),
                                               mad::kTreeConfigMaxChildren);
                     same = same && t->num_children == n;
                     for (size_t i = 0; same && i < n; ++i)
                       same = t->child_index[i] == first + i && t->child_qpn[i] == want.child_qpn[first + i];
                     if (!same) mismatch->insert(tid);
                   });
      }
      // Each QP's context must still be the whole context this sweep's fabric gives it.
      for (const QpEdge& e : EdgesOf(prog->second, an_guid)) {
        const mad::QpcConfig want_ctx = QpContext(tid, an_guid, e.qpn, e.remote, e.remote_qpn);
        mad::AmMad m = mad::MakeAmRequest(mad::method::kGet, mad::am_attr::kQpcConfig, 0);
        mad::QpcConfig which;  // the Get names the QP in its data
        which.qpn = e.qpn;
        mad::EncodeTo(which, m.data);
        gmp_->Send(lid, m, [mismatch, tid, want_ctx](Result<mad::AmMad> r) {
          auto q = r.ok() ? mad::Decode<mad::QpcConfig>(r->data) : Result<mad::QpcConfig>(r.status());
          if (!q.ok() || !(*q == want_ctx)) mismatch->insert(tid);
        });
      }
    }
  }
  gmp_->WhenIdle([this, mismatch, after_write] {
    Run_& run = *run_;
    for (uint16_t id : *mismatch) {
      if (after_write) {
        ++counters_.readback_mismatches;
        run.failed.insert(id);
        Note("SM-SHARP-006", fmt::format("tree {} reads back different from what was written", id));
      } else {
        Log(LogName::kSm).info("SHARP tree {} no longer held as written (AN reset?): rewriting", id);
        run.dirty.insert(id);
      }
    }
    if (after_write) {
      Finish();
    } else {
      Write();
    }
  });
}

void SharpManager::Write() {
  Run_& run = *run_;
  // 1. Clean up: vanished trees on the ANs that held them; dirty trees on old and new ANs.
  std::set<std::pair<Guid, uint16_t>> cleanup;
  for (const auto& [id, per_an] : programmed_) {
    const bool gone = !run.intent.count(id);
    if (!gone && !run.dirty.count(id)) continue;
    for (const auto& [an, at] : per_an) cleanup.insert({an, id});
    if (gone) ++counters_.trees_removed;
  }
  for (uint16_t id : run.dirty)
    for (const auto& [an, at] : run.intent[id]) cleanup.insert({an, id});
  for (const auto& [an, id] : cleanup) {
    auto it = run.by_guid.find(an);
    if (it == run.by_guid.end() || !run.ans[it->second].usable) continue;  // gone or not answering
    CleanUpTree(run.ans[it->second].lid, id, [](Result<mad::AmMad>) {});  // failures counted
  }
  for (auto it = programmed_.begin(); it != programmed_.end();)
    it = (!run.intent.count(it->first) || run.dirty.count(it->first)) ? programmed_.erase(it) : std::next(it);

  // 2. QPs: one per edge (the parent first, then the children in index order).
  gmp_->WhenIdle([this] {
    Run_& run = *run_;
    for (uint16_t id : run.dirty)
      for (const auto& entry : run.intent[id]) AllocateQps(id, entry.first, 0);
    // 3. Each QP's context names the far end: an AN's QP for the same edge, or a host.
    gmp_->WhenIdle([this] {
      Run_& run = *run_;
      for (uint16_t id : run.dirty) {
        if (run.failed.count(id)) continue;
        const auto& per_an = run.intent[id];
        for (const auto& entry : per_an) {
          // Not a structured binding: clang before 16 cannot capture one in the lambda below.
          const Guid an_guid = entry.first;
          const Lid lid = run.LidOf(an_guid);
          for (const QpEdge& e : EdgesOf(per_an, an_guid)) {
            mad::AmMad m = mad::MakeAmRequest(mad::method::kSet, mad::am_attr::kQpcConfig, 0);
            mad::EncodeTo(QpContext(id, an_guid, e.qpn, e.remote, e.remote_qpn), m.data);
            const uint16_t tid = id;
            gmp_->Send(lid, m, [this, tid, an = an_guid](Result<mad::AmMad> r) {
              if (r.ok() || run_->failed.count(tid)) return;
              run_->failed.insert(tid);
              Note("SM-SHARP-005", fmt::format("QPCConfig for tree {} on AN {} failed: {}", tid,
                                               ToString(an), r.status().ToString()));
            });
          }
        }
      }
      // 4. The trees: write tree with the first 44 children, then add the rest.
      gmp_->WhenIdle([this] {
        Run_& run = *run_;
        for (uint16_t id : run.dirty) {
          if (run.failed.count(id)) continue;
          for (auto& [an_guid, at] : run.intent[id]) {
            const Lid lid = run.LidOf(an_guid);
            auto chunk = std::make_shared<std::function<void(size_t)>>();
            const uint16_t tid = id;
            const SharpAnTree want = at;
            std::weak_ptr<std::function<void(size_t)>> self = chunk;
            *chunk = [this, lid, tid, want, self, an = an_guid](size_t first) {
              mad::AmMad m = mad::MakeAmRequest(mad::method::kSet, mad::am_attr::kTreeConfig, 0);
              mad::TreeConfig t;
              t.opcode = first == 0 ? mad::tree_op::kWriteTree : mad::tree_op::kAddChildren;
              t.state = mad::tree_state::kEnabled;
              t.tree_id = tid;
              t.parent_qpn = want.parent_qpn;
              const size_t n = std::min(want.child_qpn.size() - first, mad::kTreeConfigMaxChildren);
              t.num_children = static_cast<uint8_t>(n);
              for (size_t i = 0; i < n; ++i) {
                t.child_index[i] = static_cast<uint8_t>(first + i);
                t.child_qpn[i] = want.child_qpn[first + i];
              }
              mad::EncodeTo(t, m.data);
              auto next = self.lock();
              gmp_->Send(lid, m, [this, tid, an, first, n, next, total = want.child_qpn.size()](Result<mad::AmMad> r) {
                if (!r.ok()) {
                  if (!run_->failed.count(tid))
                    Note("SM-SHARP-005", fmt::format("TreeConfig for tree {} on AN {} failed: {}", tid,
                                                     ToString(an), r.status().ToString()));
                  run_->failed.insert(tid);
                  return;
                }
                if (first == 0) ++counters_.trees_written;
                if (first + n < total && next) (*next)(first + n);
              });
            };
            (*chunk)(0);  // each MAD's callback holds the chain until the last is answered
          }
        }
        gmp_->WhenIdle([this] {
          Run_& run = *run_;
          for (uint16_t id : run.dirty)
            if (!run.failed.count(id)) programmed_[id] = run.intent[id];
          Verify(/*after_write=*/true);
        });
      });
    });
  });
}

// ResourceCleanup of tree `tid` on the AN at `lid`: its QPs and its entry freed. Idempotent,
// so it goes with the transport's retries.
void SharpManager::CleanUpTree(Lid lid, uint16_t tid,
                               std::function<void(Result<mad::AmMad>)> then) {
  mad::AmMad m = mad::MakeAmRequest(mad::method::kSet, mad::am_attr::kResourceCleanup, 0);
  mad::ResourceCleanup rc;
  rc.scope = mad::cleanup_scope::kTree;
  rc.tree_id = tid;
  rc.job_id = options_.job_id;
  mad::EncodeTo(rc, m.data);
  gmp_->Send(lid, m, std::move(then));
}

// QPAllocation is a Set that is not idempotent: an AN that took one whose answer was lost
// allocates again when it comes again, and the QPs of the first are held for nothing (a
// tree that then reads back right is never cleaned up). So it goes once, without the
// transport's retries. When an answer does not come, the tree's QPs on that AN are freed
// (ResourceCleanup of the tree, which is idempotent and goes with retries) and all of them
// are allocated again, up to SendOptions::retries times; then the tree fails for this sweep,
// and its QPs on that AN are freed once more. `attempt` counts the allocations before.
void SharpManager::AllocateQps(uint16_t tid, Guid an, int attempt) {
  Run_& run = *run_;
  const SharpAnTree& at = run.intent[tid][an];
  const size_t need = (at.parent.value() ? 1 : 0) + at.children.size();
  const size_t chunks = (need + mad::kQpAllocationMax - 1) / mad::kQpAllocationMax;
  if (chunks == 0) return;
  struct Allocation {
    std::vector<std::vector<uint32_t>> qpns;  // by MAD, in the order sent
    size_t waiting = 0;
    bool lost = false;  // some MAD not answered: the AN may hold what it allocated for it
    Status refused;     // an answer with an error, or one that does not decode
  };
  auto alloc = std::make_shared<Allocation>();
  alloc->qpns.resize(chunks);
  alloc->waiting = chunks;
  const Lid lid = run.LidOf(an);
  mad::SendOptions once = options_.send;
  once.retries = 0;
  auto done = [this, tid, an, lid, attempt, alloc] {
    Run_& run = *run_;
    if (!alloc->refused.ok() || alloc->lost) {
      const bool again = alloc->refused.ok() && attempt < options_.send.retries;
      if (!again) {
        if (!run.failed.count(tid))
          Note("SM-SHARP-005",
               fmt::format("QPAllocation for tree {} on AN {} failed: {}", tid, ToString(an),
                           alloc->refused.ok()
                               ? fmt::format("not answered in {} attempts", attempt + 1)
                               : alloc->refused.ToString()));
        run.failed.insert(tid);
        // What it allocated for the MADs not answered.
        if (alloc->lost) CleanUpTree(lid, tid, [](Result<mad::AmMad>) {});
        return;
      }
      ++counters_.qp_allocations_repeated;
      Log(LogName::kSm).info("SHARP tree {}: a QPAllocation on AN {} was not answered; its "
                             "QPs there are freed and allocated again",
                             tid, ToString(an));
      CleanUpTree(lid, tid, [this, tid, an, attempt](Result<mad::AmMad> r) {
        if (r.ok()) return AllocateQps(tid, an, attempt + 1);
        if (!run_->failed.count(tid))
          Note("SM-SHARP-005", fmt::format("ResourceCleanup of tree {} on AN {} failed: {}", tid,
                                           ToString(an), r.status().ToString()));
        run_->failed.insert(tid);
      });
      return;
    }
    SharpAnTree& at = run.intent[tid][an];
    std::vector<uint32_t> got;
    for (const std::vector<uint32_t>& q : alloc->qpns) got.insert(got.end(), q.begin(), q.end());
    size_t k = 0;
    at.parent_qpn = at.parent.value() ? got[k++] : 0;
    at.child_qpn.assign(got.begin() + static_cast<ptrdiff_t>(k), got.end());
  };
  for (size_t c = 0; c < chunks; ++c) {
    const size_t count = std::min(need - c * mad::kQpAllocationMax, mad::kQpAllocationMax);
    mad::AmMad m = mad::MakeAmRequest(mad::method::kSet, mad::am_attr::kQpAllocation, 0);
    mad::QpAllocation q;
    q.opcode = mad::qp_alloc_op::kAllocate;
    q.tree_id = tid;
    q.job_id = options_.job_id;
    q.count = static_cast<uint8_t>(count);
    mad::EncodeTo(q, m.data);
    gmp_->Send(
        lid, m,
        [alloc, c, count, done](Result<mad::AmMad> r) {
          auto a = r.ok() ? mad::Decode<mad::QpAllocation>(r->data)
                          : Result<mad::QpAllocation>(r.status());
          if (a.ok()) {
            for (size_t i = 0; i < count; ++i) alloc->qpns[c].push_back(a->qpn[i] & 0xFFFFFF);
          } else if (a.status().code() == StatusCode::kTimeout) {
            alloc->lost = true;
          } else if (alloc->refused.ok()) {
            alloc->refused = a.status();
          }
          if (--alloc->waiting == 0) done();
        },
        once);
  }
}

void SharpManager::Finish() {
  Run_& run = *run_;
  const Fabric& f = run.fabric();
  const routing::SharpPlan& plan = run.plan;
  summary_.ans_usable = run.input.ans.size();
  summary_.switch_tiers = plan.switch_tiers;
  summary_.hosts = plan.hosts.size();
  for (const routing::SharpTree& t : plan.trees) {
    SharpTreeSummary s;
    s.id = t.id;
    s.root_switch = f.node(t.root_switch).guid;
    s.root_name = f.node(t.root_switch).description.empty() ? f.node(t.root_switch).name
                                                            : f.node(t.root_switch).description;
    s.root_an = f.port(f.port_id(t.nodes[0].an, PortNum{1})).guid;
    s.depth = t.depth;
    s.hosts = t.host_count;
    s.switches = t.nodes.size();
    for (PortId h : t.missing_hosts) s.missing_hosts.push_back(f.port(h).guid);
    s.programmed = programmed_.count(t.id) && !run.failed.count(t.id);
    summary_.trees.push_back(std::move(s));
  }
  for (PortId h : plan.uncovered) summary_.uncovered.push_back(f.port(h).guid);
  for (PortId h : plan.never_covered) summary_.never_covered.push_back(f.port(h).guid);
  size_t ok = 0;
  std::string ids;
  for (const auto& t : summary_.trees) {
    ok += t.programmed;
    ids += fmt::format("{}{}", ids.empty() ? "" : ",", t.id);
  }
  Log(LogName::kSm)
      .info("SHARP: {} aggregation nodes ({} on SHARP-capable switches, {} enabled, {} usable), "
            "{} switch tiers; {} trees [{}] over {} hosts, {} programmed and read back "
            "({} rewritten this sweep)",
            summary_.ans, summary_.sharp_switches, summary_.ans_enabled, summary_.ans_usable,
            summary_.switch_tiers, summary_.trees.size(), ids, summary_.hosts, ok,
            run.dirty.size());
  if (!plan.never_covered.empty() && !plan.trees.empty()) {
    Note("SM-SHARP-001", fmt::format("{} of {} hosts are in no SHARP tree: {}", plan.never_covered.size(),
                                     plan.hosts.size(), Hosts(f, plan.never_covered)));
  }
  if (plan.uncovered.size() > plan.never_covered.size()) {
    Note("SM-SHARP-001", fmt::format("{} of {} hosts are missing from some SHARP tree: {}",
                                     plan.uncovered.size(), plan.hosts.size(), Hosts(f, plan.uncovered)));
    for (const auto& t : summary_.trees)
      if (!t.missing_hosts.empty())
        Log(LogName::kSm).info("SHARP tree {} (root {}) reaches {} of {} hosts", t.id, t.root_name,
                               t.hosts, summary_.hosts);
  }
  if (summary_.trees.empty() && !run.input.ans.empty())
    Note("SM-SHARP-008", "no SHARP tree could be built (see the lines above)");
  auto done = std::move(run.done);
  run_->sweep = nullptr;
  running_ = false;
  if (done) done();
}

}  // namespace ibsm::sm
