// Deterministic fabric generators. Each builds exactly the fabric that
// the reference generator gen_topology.py writes for the same arguments: same node names,
// NodeDescriptions, GUIDs and port numbering (fabric/generators_test.cc checks digests recorded from it).
//
// GUIDs: switch n (1-based, in creation order) is 0x0002c90200000000 + n and all its ports
// carry that GUID; HCA n is 0x0002c90300000000 + 16 * n with port GUID = node GUID + 1.
// Names: leaf-003, spine-01, pod02-leaf-03, pod02-spine-03, core-012, rail3-leaf-001, sw-017;
// HCAs node-0012/hca1 (server-0012/hca3 in rail fabrics) with description
// "node-0012 HCA-1". Every cabled port gets the options' width and speed.
//
// Randomness comes only from the seed (a PyRandom stream, CPython's MT19937), never from
// the environment: the same arguments always give the same fabric.
#pragma once

#include <cstdint>
#include <vector>

#include "base/status.h"
#include "fabric/fabric.h"
#include "fabric/py_random.h"

namespace ibsm {

inline constexpr uint64_t kGenSwitchGuidBase = 0x0002c90200000000ull;
inline constexpr uint64_t kGenCaGuidBase = 0x0002c90300000000ull;

struct FatTree2Options {
  int hosts_per_leaf = 0;         // 0: derived from oversubscription
  double oversubscription = 1.0;  // hosts:uplinks per leaf; <= 1 means k/2 hosts
  int leaves = 0;                 // 0: k leaves
  LinkWidth width = LinkWidth::k4x;
  LinkSpeed speed = LinkSpeed::kEdr;
};

struct LinkRateOptions {
  LinkWidth width = LinkWidth::k4x;
  LinkSpeed speed = LinkSpeed::kEdr;
};

enum class RailMode { kPlanes, kSuperpod };

struct RailOptions {
  int hosts_per_leaf = 0;
  double oversubscription = 1.0;
  LinkWidth width = LinkWidth::k4x;
  LinkSpeed speed = LinkSpeed::kEdr;
};

struct RandomGraphOptions {
  int links = -1;  // inter-switch links to aim for; -1: 3/4 of the free switch ports
  LinkWidth width = LinkWidth::k4x;
  LinkSpeed speed = LinkSpeed::kEdr;
};

// 2-tier fat tree of k-port switches: `leaves` leaves (default k), each with h host ports
// (1..h) and k-h uplinks (h+1..k), one to each of the k-h spines; leaf i uses spine port i+1.
// Default h = k/2 (k=32: 512 hosts, 48 switches). InvalidArgument on impossible shapes.
Result<Fabric> FatTree2(int k, const FatTree2Options& options = {});

// k-ary 3-tier fat tree: `pods` pods (0 = all k) of k/2 leaves + k/2 pod spines, (k/2)^2
// cores, k/2 hosts per leaf (k=8: 128 hosts, 80 switches). REQUIRES k even.
Result<Fabric> FatTree3(int k, int pods = 0, const LinkRateOptions& options = {});

// Rail-optimized: `servers` servers with `rails` HCAs each; HCA r of every server is cabled
// into rail r. kPlanes: one separate 2-tier plane per rail (one subnet each);
// kSuperpod: rail-aligned leaves sharing one spine layer.
Result<Fabric> RailOptimized(int k, int servers, int rails, RailMode mode,
                             const RailOptions& options = {});

// Random connected graph of `switches` k-port switches with hosts on ports
// 1..hosts_per_switch: a random spanning tree, then random extra links (no doubles).
Result<Fabric> RandomGraph(int switches, int k, int hosts_per_switch, uint64_t seed,
                           const RandomGraphOptions& options = {});
// Same, drawing from `rng` (so a following Degrade can continue the same stream, as
// gen_topology.py does for `random --drop-links`).
Result<Fabric> RandomGraph(int switches, int k, int hosts_per_switch, PyRandom& rng,
                           const RandomGraphOptions& options = {});

struct DroppedLink {
  NodeId a = kNoNode;
  PortNum a_port{0};
  NodeId b = kNoNode;
  PortNum b_port{0};
};

// Removes up to `drop_links` random switch-to-switch links, skipping any whose removal
// would split the switches. Returns the links removed, in removal order; fewer than asked
// only when no further link can go without partitioning the fabric.
std::vector<DroppedLink> Degrade(Fabric& fabric, int drop_links, uint64_t seed);
std::vector<DroppedLink> Degrade(Fabric& fabric, int drop_links, PyRandom& rng);

// `f` without node `gone` and its cables, as the SM's model has it once a repair took a dead
// switch out: every other node, port, LID and cable as it was (NodeIds renumbered densely).
Fabric WithoutNode(const Fabric& f, NodeId gone);

// True if every switch reaches every other over switch-to-switch links.
bool SwitchesConnected(const Fabric& fabric);
// True if every node reaches every other node (an empty fabric is connected).
bool IsConnected(const Fabric& fabric);

}  // namespace ibsm
