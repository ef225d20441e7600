// Helpers shared by the fabric tests (header-only, test code only).
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "fabric/fabric.h"

namespace ibsm::testing {

inline std::string SourceDir() {
  const char* env = std::getenv("IBSM_SOURCE_DIR");
  return env && *env ? env : IBSM_SOURCE_DIR;
}
inline std::string FixturePath(const std::string& name) {
  return SourceDir() + "/tests/fixtures/" + name;
}
inline std::string ReadFileOrEmpty(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// Asserts that two fabrics hold the same nodes (matched by name) with the same kind, GUIDs,
// port count, description, and per port the same GUID, peer (node name and port), width
// and speed.
inline void ExpectSameFabric(const Fabric& want, const Fabric& got) {
  ASSERT_EQ(want.node_count(), got.node_count());
  ASSERT_EQ(want.link_count(), got.link_count());
  for (const Node& w : want.nodes()) {
    auto id = got.FindNodeByName(w.name);
    ASSERT_TRUE(id.has_value()) << "missing node " << w.name;
    const Node& g = got.node(*id);
    ASSERT_EQ(w.kind, g.kind) << w.name;
    ASSERT_EQ(w.guid, g.guid) << w.name;
    ASSERT_EQ(w.num_ports, g.num_ports) << w.name;
    ASSERT_EQ(w.description, g.description) << w.name;
    for (uint32_t p = w.is_switch() ? 0 : 1; p <= w.num_ports; ++p) {
      const Port& wp = want.port(w.first_port + p);
      const Port& gp = got.port(g.first_port + p);
      ASSERT_EQ(wp.guid, gp.guid) << w.name << "[" << p << "]";
      ASSERT_EQ(wp.connected(), gp.connected()) << w.name << "[" << p << "]";
      if (!wp.connected()) continue;
      const Port& wr = want.port(wp.peer);
      const Port& gr = got.port(gp.peer);
      ASSERT_EQ(want.node(wr.node).name, got.node(gr.node).name) << w.name << "[" << p << "]";
      ASSERT_EQ(wr.num, gr.num) << w.name << "[" << p << "]";
      ASSERT_EQ(wp.width, gp.width) << w.name << "[" << p << "]";
      ASSERT_EQ(wp.speed, gp.speed) << w.name << "[" << p << "]";
    }
  }
}

// Everything ExpectSameFabric compares, as one text (nodes by name, ports in order), and its
// FNV-1a digest: how a fabric's identity with a reference is kept without the reference.
inline std::string CanonicalFabric(const Fabric& f) {
  std::vector<const Node*> nodes;
  for (const Node& n : f.nodes()) nodes.push_back(&n);
  std::sort(nodes.begin(), nodes.end(), [](const Node* a, const Node* b) { return a->name < b->name; });
  std::ostringstream out;
  for (const Node* n : nodes) {
    out << n->name << ' ' << static_cast<int>(n->kind) << ' ' << n->guid.value() << ' '
        << static_cast<int>(n->num_ports) << " \"" << n->description << "\"\n";
    for (uint32_t p = n->is_switch() ? 0 : 1; p <= n->num_ports; ++p) {
      const Port& port = f.port(n->first_port + p);
      out << "  " << p << ' ' << port.guid.value();
      if (port.connected()) {
        const Port& r = f.port(port.peer);
        out << " -> " << f.node(r.node).name << '[' << static_cast<int>(r.num.value()) << "] "
            << static_cast<int>(port.width) << ' ' << static_cast<int>(port.speed);
      }
      out << '\n';
    }
  }
  return out.str();
}

inline uint64_t FabricDigest(const Fabric& f) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : CanonicalFabric(f)) h = (h ^ c) * 0x100000001b3ull;
  return h;
}

}  // namespace ibsm::testing
