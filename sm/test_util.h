// Small helpers the sm/ unit tests share: where the SM attaches, the CA ports, GIDs with the
// default subnet prefix, partitions.conf text parsed.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "conf/partitions.h"
#include "fabric/fabric.h"

namespace ibsm::sm::testutil {

inline constexpr uint64_t kDefaultPrefix = 0xfe80000000000000ull;

// The first CA's port 1: where tests attach the SM, as ibsim attaches its first client.
inline PortId FirstCaPort(const Fabric& f) {
  for (NodeId n = 0; n < f.node_count(); ++n)
    if (f.node(n).kind == NodeKind::kCa) return f.port_id(n, PortNum{1});
  return kNoPort;
}

// Port 1 of every CA, in NodeId order.
inline std::vector<PortId> CaPorts(const Fabric& f) {
  std::vector<PortId> out;
  for (NodeId n = 0; n < f.node_count(); ++n)
    if (f.node(n).kind == NodeKind::kCa) out.push_back(f.port_id(n, PortNum{1}));
  return out;
}

// The port GID of `g` under the default subnet prefix, as wire bytes.
inline std::array<uint8_t, 16> GidOf(Guid g) {
  std::array<uint8_t, 16> gid{};
  for (size_t i = 0; i < 8; ++i) {
    gid[i] = static_cast<uint8_t>(kDefaultPrefix >> (56 - 8 * i));
    gid[8 + i] = static_cast<uint8_t>(g.value() >> (56 - 8 * i));
  }
  return gid;
}

// The non-zero entries of a P_Key table, in index order.
inline std::vector<uint16_t> UsedPKeys(const std::vector<uint16_t>& t) {
  std::vector<uint16_t> out;
  for (uint16_t k : t)
    if (k) out.push_back(k);
  return out;
}

// partitions.conf text, parsed (the test fails if it does not parse).
inline std::shared_ptr<const conf::PartitionConfig> ParsePartitionsText(const std::string& text) {
  conf::PartitionsParse r = conf::ParsePartitions(text, "partitions.conf");
  EXPECT_TRUE(r.ok());
  return std::make_shared<const conf::PartitionConfig>(r.config);
}

}  // namespace ibsm::sm::testutil
