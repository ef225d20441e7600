// The in-process fabric simulator. Every
// node runs a subnet management agent (SMA) that answers SMPs as IBA chapter 14 says;
// directed-route SMPs walk their path hop by hop (14.2.2), LID-routed MADs follow the LFTs
// that the SM programmed, so a wrong table is a lost MAD as on a real fabric.
//
// Threading: single-threaded. Every method must be called from one thread (the io_context
// thread that drives the SimTransports). Endpoint::Deliver is called synchronously from
// inside Simulator calls; an endpoint must not call back into the Simulator from Deliver
// (SimTransport posts the MAD to its io_context instead).
//
// Untrusted input: every MAD injected is untrusted bytes. A MAD that does not parse, names
// a port that does not exist or breaks a routing rule is dropped with a counter, never a
// crash.
#pragma once

#include <array>
#include <chrono>
#include <functional>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <random>
#include <string>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>

#include "base/status.h"
#include "base/types.h"
#include "fabric/fabric.h"
#include "mad/attr/general_info.h"
#include "mad/attr/notice.h"
#include "mad/attr/port_counters.h"
#include "mad/attr/port_counters_extended.h"
#include "mad/attr/port_info.h"
#include "mad/attr/sl_to_vl_table.h"
#include "mad/attr/switch_info.h"
#include "mad/attr/vl_arbitration_table.h"
#include "mad/mad.h"
#include "sim/ar_switch.h"
#include "sim/device_profile.h"

namespace ibsm::sim {

// Something bound at a port that receives MADs: an SM, an SA client, a test probe.
class Endpoint {
 public:
  virtual ~Endpoint() = default;
  // `msg` arrived at the bound port; `latency` is the simulated wire time it took (request
  // and response legs summed for a response). msg.addr.lid is the sender's LID (0 for a
  // directed-route SMP whose sender has none). Called synchronously from inside the
  // Simulator: must not re-enter it.
  virtual void Deliver(mad::MadMessage msg, std::chrono::nanoseconds latency) = 0;
};

// Answers what the core SMA and PMA do not model, for the nodes it claims: vendor SMP
// attributes and other management classes (SHARP aggregation nodes: sim/sharp_an.h). Runs
// synchronously inside Simulator calls; must not call back into the Simulator.
class NodeExtension {
 public:
  virtual ~NodeExtension() = default;
  // An SMP Get/Set of an attribute the SMA does not know reached `node` at port `arrival`.
  // Returns the MAD status with `data` (64 bytes) holding the answer, or nullopt when the
  // attribute is not this extension's (the SMA then answers "unsupported").
  virtual std::optional<uint16_t> HandleSmp(NodeId node, PortNum arrival, uint8_t method,
                                            uint16_t attr_id, uint32_t attr_mod,
                                            std::span<uint8_t> data) = 0;
  // A GMP request (not SMP, not PerfMgt) reached `node` at port `arrival`. True when `mad`
  // (256 bytes) now holds the response to route back; false when the extension does not
  // answer it (it goes on to an endpoint bound there, if any).
  virtual bool HandleGmp(NodeId node, PortNum arrival, std::span<uint8_t> mad) = 0;
  // `node` came back as a freshly powered node (AddNode, RebootSwitch): forget its state.
  virtual void OnNodeReset(NodeId node) = 0;
  // GeneralInfo (capability modifier) reached `node`: set the bits this extension gives it.
  // The simulator answers the union over the node's agents, or nothing when no bit is set.
  virtual void AddCapabilities(NodeId node, mad::GeneralInfoCapabilities& caps) const {
    (void)node;
    (void)caps;
  }
};

// Why a MAD was lost. Frozen order: tests and dumps index counters by it.
enum class DropReason: uint8_t {
  kMalformed = 0,   // not 256 bytes, bad header, unknown class/version
  kBadSource,       // injected at a port that does not exist or whose node is absent
  kBadPath,         // DR path names a port out of range, or hop counts are unreasonable
  kLinkDown,        // egress port uncabled, physically down, or the peer node absent
  kNotSwitch,       // DR path continues through a CA (C14-9:2)
  kMixedDr,         // DR SMP with non-permissive DrSLID/DrDLID (LID-routed DR legs)
  kNoRoute,         // LFT entry missing, 255, out of range, or no LID at the sender
  kLoop,            // LID-routed MAD exceeded 64 hops
  kPortState,       // a hop's logical port state too low for this kind of MAD
  kWrongDest,       // LID route ended at a port that does not own the LID
  kRandom,          // SetDropRate
  kNodeDrop,        // SetNodeDropRate
  kMKey,            // M_Key check failed (14.2.4)
  kNoAgent,         // no endpoint bound where one was needed
  kVendorAttr,      // vendor SMP attribute (0xFFxx) at a node without that agent (ibsim too)
  kOptionalAttr,    // an optional attribute this device does not answer (strict profile)
  kCount,
};

std::string_view DropReasonName(DropReason r);

struct SimCounters {
  uint64_t injected = 0;     // MADs handed to Inject
  uint64_t smps_handled = 0; // SMPs answered (or consumed) by an SMA
  uint64_t pma_handled = 0;  // PerfMgt requests answered by a PMA
  uint64_t delivered = 0;    // MADs handed to an endpoint
  uint64_t traps_sent = 0;   // trap MADs generated (resends included)
  uint64_t duplicated = 0;   // responses delivered twice (strict profile)
  uint64_t reordered = 0;    // responses held back behind later ones (strict profile)
  uint64_t dropped = 0;      // sum of by_reason
  std::array<uint64_t, static_cast<size_t>(DropReason::kCount)> by_reason{};

  uint64_t drops(DropReason r) const { return by_reason[static_cast<size_t>(r)]; }
};

struct SimOptions {
  // Strict by default (sim/device_profile.h): what a test on the simulator passes, it passes
  // on devices that forgive nothing the spec allows them not to.
  SimProfile profile = SimProfile::kStrict;
  // Strict profile: the share of responses delivered twice, and held back so that later
  // ones overtake them (by `reorder_delay`).
  double duplicate_rate = 0.02;
  // Strict profile: one CA in five gets a hostile NodeDescription (sim/device_profile.h).
  // Off only to compare against a fabric whose descriptions are the topology file's (ibsim).
  bool hostile_descriptions = true;
  double reorder_rate = 0.05;
  std::chrono::microseconds reorder_delay{300};
  uint64_t seed = 1;  // seeds the simulator's std::mt19937_64 (drops, jitter)
  // Latency model: every link traversal costs per_hop plus a uniform [0, jitter) extra.
  std::chrono::nanoseconds per_hop{0};
  std::chrono::nanoseconds jitter{0};
  // Switch caps reported in SwitchInfo (ibsim: MAXLINEARCAP 48K, MAXMCASTCAP 1024).
  uint16_t linear_fdb_cap = 49152;
  uint16_t multicast_fdb_cap = 1024;
  // Trap resend (IBA 13.4.9 / 14.2.5.x: a trap repeats until TrapRepress). Needs `io`;
  // without it each trap is sent once (ResendTraps() resends by hand).
  boost::asio::io_context* io = nullptr;
  std::chrono::milliseconds trap_resend_interval{1000};
  int trap_max_sends = 8;

  // The kind profile: every attribute answered, nothing duplicated or reordered.
  static SimOptions Kind() {
    SimOptions o;
    o.profile = SimProfile::kKind;
    return o;
  }
};

class Simulator {
 public:
  // Copies what it needs from `fabric` (nodes, cables, GUIDs, descriptions); the Fabric may
  // be destroyed afterwards. Every cabled port starts LinkUp/INIT with LID 0, every
  // uncabled one Polling/DOWN; switch tables are empty.
  explicit Simulator(const Fabric& fabric, SimOptions options = {});
  ~Simulator();
  Simulator(const Simulator&) = delete;
  Simulator& operator=(const Simulator&) = delete;

  // --- endpoints -------------------------------------------------------------------
  // REQUIRES: `ep` outlives the binding. InvalidArgument for an unknown port,
  // AlreadyExists if one is bound there already.
  Status Bind(PortId port, Endpoint* ep);
  void Unbind(PortId port);

  // Sends `msg` from `from` as the endpoint there would: requests are routed to their
  // destination (DR path or msg.addr.lid) and answered there by the SMA or handed to the
  // endpoint bound there; responses are routed back to the requester. Whatever reaches a
  // bound endpoint is given to its Deliver before Inject returns.
  void Inject(PortId from, mad::MadMessage msg);

  // --- faults (deterministic under SimOptions::seed) ---------------------------------
  // Physically fails / restores the cable at `port` (both ends change state).
  Status LinkDown(PortId port);
  Status LinkUp(PortId port);
  // Takes a node off the fabric (its links go down) / puts it back fresh (state as a
  // newly powered node: LIDs 0, tables empty) with its original cables.
  Status RemoveNode(NodeId node);
  Status AddNode(NodeId node);
  // Power-cycles a switch: LFT/MFT cleared, SwitchInfo reset, every port back to INIT
  // with LID 0; neighbours see their links bounce.
  Status RebootSwitch(NodeId node);
  // Swaps the far ends of the cables at `x` and `y` (a mis-cabling put right, or made):
  // both cables are pulled (every end DOWN), then x is cabled to y's old peer and y to x's;
  // the four ends train again to INIT. InvalidArgument for an unknown port, or when the two
  // cables are one; FailedPrecondition when either port has no cable.
  Status SwapCables(PortId x, PortId y);
  // Every MAD (request, response, trap) is lost with probability `p` in [0, 1].
  void SetDropRate(double p);
  // Every MAD that enters `node` is lost with probability `p` (1.0: a dead switch).
  Status SetNodeDropRate(NodeId node, double p);
  // Whether the traps `node` sends from now on are lost on their way (a trap is an
  // unacknowledged datagram until TrapRepress; congestion or a route through a failing
  // switch loses it). Resends are lost too while this holds.
  Status SetNodeTrapsLost(NodeId node, bool lost);
  void SetLatency(std::chrono::nanoseconds per_hop, std::chrono::nanoseconds jitter);

  // Extensions are consulted in the order added. REQUIRES: `ext` outlives the Simulator.
  void AddExtension(NodeExtension* ext) { extensions_.push_back(ext); }

  // Called for every SMP a node's SMA takes in (after its M_Key check), in arrival order:
  // tests see the order an SM programs things in. Empty: none.
  using SmpObserver =
      std::function<void(NodeId node, uint8_t method, uint16_t attr_id, uint32_t modifier)>;
  void SetSmpObserver(SmpObserver observer) { smp_observer_ = std::move(observer); }

  // Resends every trap not yet repressed (and under the send cap). Returns how many.
  size_t ResendTraps();
  // Sends `notice` as a Trap from `from` to that port's master SM LID, LID-routed, once,
  // whatever it claims (a forged IssuerLID or details naming another port): what a host's
  // root can send. InvalidArgument for a port without a LID or SM LID.
  Status InjectTrap(PortId from, const mad::Notice& notice);
  // CapabilityMask.IsSM of an end port, as the kernel's issm device sets it on hardware for
  // an SM's port (IBA 14.4.1): other SMs find it by this bit. Stays set when the SM dies
  // (as on ibsim). InvalidArgument for a port out of range.
  Status SetIsSm(PortId port, bool on);

  // --- inspection (tests, SimTransport::QueryLocalPort) -------------------------------
  const SimCounters& counters() const { return counters_; }
  size_t node_count() const { return nodes_.size(); }
  size_t port_count() const { return ports_.size(); }
  PortId port_id(NodeId node, PortNum num) const;
  // REQUIRES: port < port_count().
  const mad::PortInfo& port_info(PortId port) const { return ports_[port].info; }
  // What a Get would read: the SL-to-VL table of input port `in` towards output port `out`
  // (a CA port: its own table, out 0), and VLArb block `block` (0..3) of port `p`.
  mad::SlToVlTable sl_to_vl(PortId in, uint8_t out) const;
  mad::VlArbitrationTable vl_arb(PortId p, size_t block) const;
  NodeId port_node(PortId port) const { return ports_[port].node; }
  Guid node_guid(NodeId node) const { return Guid{nodes_[node].guid}; }
  // The NodeDescription the node answers (the strict profile's hostile ones included).
  const std::string& node_description(NodeId node) const { return nodes_[node].description; }
  const DeviceQuirks& quirks(NodeId node) const { return nodes_[node].quirks; }
  Guid port_guid(PortId port) const { return Guid{ports_[port].guid}; }
  bool is_switch(NodeId node) const { return nodes_[node].sw != kNoSwitch; }
  // REQUIRES: is_switch(node).
  const mad::SwitchInfo& switch_info(NodeId node) const;
  // Egress port for `lid` on a switch, 255 if unset.
  uint8_t lft_entry(NodeId node, Lid lid) const;
  // The port's whole P_Key table as a P_KeyTable Get reads it (capacity entries).
  std::vector<uint16_t> pkey_table(PortId port) const;
  // The ports a switch forwards multicast LID `mlid` to (its MFT entry, all positions);
  // empty for a CA, an MLID below 0xC000 or an entry never set.
  std::vector<uint8_t> mft_ports(NodeId node, Lid mlid) const;
  // Adaptive routing: makes a switch AR-capable (or legacy again). A capable switch
  // answers GeneralInfo and the AR attributes; a legacy one drops them. InvalidArgument for
  // a node that is not a switch.
  Status SetArCapable(NodeId node, bool capable, ArSwitchCaps caps = {});
  // The AR agent of a capable switch (its state as the SM programmed it), else nullptr.
  const ArSwitch* ar_switch(NodeId node) const;
  // Trap sends still waiting for a TrapRepress.
  size_t pending_traps() const;

  // PortInfo Sets with ClientReregister = 1 seen by CA ports.
  uint64_t client_reregisters() const { return client_reregisters_; }

  // Sets a port's M_Key and protect bits directly (tests; an SM does it by PortInfo Set).
  void SetMKey(PortId port, uint64_t m_key, uint8_t protect_bits);
  // Gives a port smaller capabilities (a 2 KiB-MTU adapter, a port with 2 data VLs): MTUCap
  // and VLCap codes as PortInfo holds them. What the port runs at stays the SM's to set.
  void SetPortCaps(PortId port, uint8_t mtu_cap, uint8_t vl_cap);

  // --- performance counters (the PMA, IBA 16.1) ------------------------------------------
  // Plants every counter of PortCounters at `port` (as ibsim's PerformanceSet): error
  // counters and the 32-bit data/packet views. PortSelect and CounterSelect are ignored.
  // PortCountersExtended keeps its own 64-bit view. InvalidArgument for an unknown port.
  Status SetPortCounters(PortId port, const mad::PortCounters& counters);
  // What a PMA Get of PortCounters / PortCountersExtended for `port` answers.
  // REQUIRES: port < port_count().
  mad::PortCounters port_counters(PortId port) const;
  mad::PortCountersExtended port_counters_extended(PortId port) const;

  // Bytes of per-port and per-switch state (tables included): the scale benchmark's
  // figure of how compact the model is.
  size_t state_bytes() const;

 private:
  static constexpr uint32_t kNoSwitch = UINT32_MAX;

  // Per-port tables an SM may program, allocated on the first Set that writes one: most
  // ports of a large fabric keep the defaults their whole life (k=64 fat tree: 400k ports).
  struct PortTables {
    std::vector<uint16_t> pkeys;              // P_KeyTable, partition cap entries; empty = default
    std::vector<mad::SlToVlTable> sl2vl;      // by output port (switch) or [0]; empty = default
    std::vector<mad::VlArbitrationTable> vlarb;  // blocks 1-4 as [0..3]; empty = default
    std::vector<uint64_t> alias_guids;        // GUIDInfo entries 1..GUIDCap-1; empty = zero
  };
  // Totals since power-on, in the units the PMA reports (data in 4-byte words).
  struct Traffic {
    uint64_t xmit_data = 0;
    uint64_t rcv_data = 0;
    uint64_t xmit_pkts = 0;
    uint64_t rcv_pkts = 0;
  };
  // Counter state beyond the running totals, allocated on the first reset, plant or error.
  // Each attribute's view of a total is total - base (modulo 2^64), so resetting one view
  // or planting a value in it leaves the other alone.
  struct PmState {
    mad::PortCounters errors;  // error counters at their wire widths; traffic fields unused
    Traffic pc_base;           // PortCounters view (saturates at 32 bits)
    Traffic ext_base;          // PortCountersExtended view
    uint64_t ext_unicast_xmit_base = 0;
    uint64_t ext_unicast_rcv_base = 0;
  };
  struct SimPort {
    mad::PortInfo info;
    uint64_t guid = 0;
    PortId peer = kNoPort;      // cable, as built; survives LinkDown
    NodeId node = kNoNode;
    bool cable_ok = true;       // false after LinkDown
    Traffic traffic;
    std::unique_ptr<PortTables> tables;
    std::unique_ptr<PmState> pm;
    // M_Key lease (14.2.4.2): running after a failed M_Key check with a non-zero lease
    // period; when it ends the protect bits drop to 0. A passing check with the key stops it.
    std::optional<std::chrono::steady_clock::time_point> lease_ends;
  };
  struct PendingTrap {
    uint64_t tid = 0;
    uint16_t trap_num = 0;
    int sends = 0;
  };
  struct SimSwitch {
    mad::SwitchInfo info;
    std::vector<uint8_t> lft;  // grows to the highest block set, capped at linear_fdb_cap
    // MFT port masks, [mlid - 0xC000][position]: grows to the highest block set, capped at
    // multicast_fdb_cap MLIDs. Unset entries read 0.
    std::vector<uint16_t> mft;
    std::vector<PendingTrap> traps;
    std::unique_ptr<ArSwitch> ar;  // set when AR-capable
  };
  struct SimNode {
    NodeKind kind = NodeKind::kCa;
    uint8_t num_ports = 0;
    bool present = true;
    uint64_t guid = 0;
    uint64_t system_image_guid = 0;
    uint32_t vendor_id = 0;
    uint16_t device_id = 0;
    uint32_t revision = 0;
    PortId first_port = kNoPort;
    uint32_t sw = kNoSwitch;
    double drop_rate = 0;
    bool traps_lost = false;  // SetNodeTrapsLost
    std::string description;
    DeviceQuirks quirks;
  };
  // Where a routed MAD came from and how far it went.
  struct Route {
    PortId arrival = kNoPort;  // port at which the MAD arrived
    uint32_t hops = 0;
  };

  friend class SimulatorPeer;

  void ResetPort(PortId p);
  void ResetNodeState(NodeId n);
  bool LinkShouldBeUp(PortId p) const;
  // Brings `p` and its peer to the physical state their cable and nodes imply.
  void RefreshLink(PortId p);
  void SetLinkState(PortId p, bool up);
  void MarkPortStateChange(NodeId n);

  bool Drop(DropReason r);
  bool RollDrop(NodeId n);  // random and per-node loss when entering `n`
  // Sends a MAD out of `out` across its cable: the port at the far end, or kNoPort after
  // counting why it was lost (link down, either end below `min_state`, loss entering the
  // far node). Counts the hop's traffic.
  PortId CrossLink(PortId out, uint8_t min_state);
  std::chrono::nanoseconds Latency(uint32_t hops);

  void HandleDr(PortId from, mad::MadMessage& msg);
  void ReturnDr(PortId from, mad::MadMessage& msg, uint32_t hops_so_far);
  void HandleLid(PortId from, mad::MadMessage& msg);
  // Walks the LFTs from `from` towards `dlid`. kNoPort and a counted drop on failure.
  PortId RouteLid(PortId from, uint16_t dlid, bool is_smp, uint32_t* hops);
  void ArriveAt(PortId dest, mad::MadMessage& msg, uint16_t slid, uint32_t hops,
                bool directed);
  void DeliverTo(PortId p, mad::MadMessage& msg, uint32_t hops);
  // A GMP answer (PMA, extension) back from `dest` to `slid` through the LFTs, if a path is
  // ACTIVE; `hops` so far (the request's) are added to the way back's for the latency.
  void ReturnGmp(PortId dest, uint16_t slid, mad::MadMessage& msg, uint32_t hops);

  // The SMA. Returns false when the SMP is consumed without a response (M_Key drop,
  // TrapRepress); else the bytes now hold the response.
  bool Sma(PortId arrival, std::span<uint8_t> smp);
  uint16_t SmaNodeInfo(PortId arrival, uint8_t method, std::span<uint8_t> data);
  uint16_t SmaNodeDescription(PortId arrival, uint8_t method, std::span<uint8_t> data);
  uint16_t SmaPortInfo(PortId arrival, uint8_t method, uint32_t mod, std::span<uint8_t> data,
                       bool key_ok);
  uint16_t SmaSwitchInfo(PortId arrival, uint8_t method, std::span<uint8_t> data);
  uint16_t SmaLft(PortId arrival, uint8_t method, uint32_t mod, std::span<uint8_t> data);
  uint16_t SmaMft(PortId arrival, uint8_t method, uint32_t mod, std::span<uint8_t> data);
  uint16_t SmaPKeyTable(PortId arrival, uint8_t method, uint32_t mod, std::span<uint8_t> data);
  uint16_t SmaSlToVl(PortId arrival, uint8_t method, uint32_t mod, std::span<uint8_t> data);
  uint16_t SmaVlArb(PortId arrival, uint8_t method, uint32_t mod, std::span<uint8_t> data);
  uint16_t SmaGuidInfo(PortId arrival, uint8_t method, uint32_t mod, std::span<uint8_t> data);
  PortTables& Tables(PortId p);
  size_t PKeyCap(PortId p) const;
  uint32_t MftPositions(NodeId n) const;

  // The PMA (IBA 16.1.3): Get/Set of PortCounters and PortCountersExtended in place. Returns
  // false when the MAD is consumed without a response.
  bool Pma(PortId arrival, std::span<uint8_t> mad);
  uint16_t PmaPortCounters(PortId arrival, uint8_t method, std::span<uint8_t> data);
  uint16_t PmaPortCountersExtended(PortId arrival, uint8_t method, std::span<uint8_t> data);
  PmState& Pm(PortId p);
  void ResetPortCounters(PortId p, uint16_t select, uint8_t select2);
  void ResetPortCountersExtended(PortId p, uint16_t select);
  // One MAD crossed the link from `out` to its peer `in`.
  void CountHop(PortId out, PortId in) {
    Traffic& o = ports_[out].traffic;
    Traffic& i = ports_[in].traffic;
    ++o.xmit_pkts;
    o.xmit_data += kMadWireWords;
    ++i.rcv_pkts;
    i.rcv_data += kMadWireWords;
  }
  // A MAD on the wire in 4-byte words as PortXmitData counts them (16.1.3.5: LRH to ICRC):
  // LRH 8 + BTH 12 + DETH 8 + MAD 256 + ICRC 4 bytes.
  static constexpr uint64_t kMadWireWords = (8 + 12 + 8 + 256 + 4) / 4;
  void SmaTrapRepress(PortId arrival, uint64_t tid);
  // A vendor SMP Get/Set: GeneralInfo answers the union of the capability bits of the node's
  // agents (its AR switch, the extensions); other attributes go to the extensions, then to
  // the AR switch. nullopt: no agent on the node knows it (the SMP is dropped, as on a
  // legacy switch).
  std::optional<uint16_t> VendorSmp(NodeId node, PortId arrival, ArSwitch* ar, uint8_t method,
                                    uint16_t attr_id, uint32_t mod, std::span<uint8_t> data);

  void SendTrap128(NodeId sw);
  void SendTrap(NodeId n, PendingTrap& t);
  void ArmTrapTimer();

  SimOptions options_;
  std::mt19937_64 rng_;
  double drop_rate_ = 0;
  std::vector<SimNode> nodes_;
  std::vector<SimPort> ports_;
  std::vector<SimSwitch> switches_;
  std::vector<Endpoint*> endpoints_;  // by PortId
  std::vector<NodeExtension*> extensions_;
  SmpObserver smp_observer_;
  SimCounters counters_;
  uint64_t client_reregisters_ = 0;
  uint64_t next_trap_tid_ = 0x5100000000000000ull;
  std::unique_ptr<boost::asio::steady_timer> trap_timer_;
  bool trap_timer_armed_ = false;
};

}  // namespace ibsm::sim
