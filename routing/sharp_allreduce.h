// Allreduce traffic over the programmed tables. Pure: fabric (with LIDs) + LFTs + a tree in,
// bytes per directed link out. Every flow follows the LFTs hop by hop, as the packets would.
//
//  - SHARP: every tree edge (host -> leaf AN, AN -> parent AN) carries S bytes up and the
//    result, S bytes, down; the root AN reduces in place.
//  - Ring (bandwidth-optimal reduce-scatter + allgather): host i sends 2(n-1)/n x S bytes to
//    host i+1 (ring order = the order given, PortId order by default), routed by the LFTs.
#pragma once

#include <cstdint>
#include <vector>

#include "fabric/fabric.h"
#include "routing/routing_engine.h"
#include "routing/sharp_trees.h"

namespace ibsm::routing {

struct AllreduceLoad {
  std::vector<double> bytes_out;  // by PortId: bytes sent out of that port
  size_t flows = 0;
  size_t unroutable = 0;          // flows the LFTs do not deliver
  double max_link_bytes = 0;      // busiest direction of any link
  // Per host: bytes on its link, both directions summed.
  double mean_host_link_bytes = 0;
  double max_host_link_bytes = 0;
};

AllreduceLoad SharpAllreduceLoad(const Fabric& fabric, const RoutingTables& tables,
                                 const SharpTree& tree, double bytes);
AllreduceLoad RingAllreduceLoad(const Fabric& fabric, const RoutingTables& tables,
                                const std::vector<PortId>& hosts, double bytes);

}  // namespace ibsm::routing
