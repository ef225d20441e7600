// The snapshot texts the daemon stores (Stream*Answer) are built one node
// or cable at a time to keep a large fabric's snapshot cheap; they must be byte for byte the
// dumps of the answers the control socket gives, or ibsmctl --state-db would print something
// else than the daemon did.
#include "sm/record/control_answers.h"

#include <gtest/gtest.h>

#include "fabric/generators.h"
#include "sm/model/discovery.h"

namespace ibsm::sm {
namespace {

// The whole text a Stream*Answer call hands out in pieces.
template <typename Stream>
std::string Collect(Stream&& stream) {
  std::string out;
  stream([&](std::string_view piece) { out += piece; });
  return out;
}

std::string NodesText(const Fabric& f) {
  return Collect([&](const AnswerSink& sink) { StreamNodesAnswer(f, sink); });
}

std::string LinksText(const Fabric& f, bool with_sweep = true) {
  return Collect(
      [&](const AnswerSink& sink) { StreamLinksAnswer(f, nullptr, nullptr, with_sweep, sink); });
}

std::string HealthText(const DiscoveryResult* d) {
  return Collect([&](const AnswerSink& sink) {
    StreamHealthAnswer(d, nullptr, sink);
  });
}

TEST(ControlAnswersTest, SnapshotTextsAreTheAnswersDumps) {
  auto f = FatTree3(4);
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(NodesText(*f), NodesAnswer(*f).dump());
  nlohmann::json answer = LinksAnswer(*f, nullptr, nullptr);
  EXPECT_EQ(LinksText(*f), answer.dump());
  EXPECT_GT(answer["links"].size(), 10u);
  answer.erase("perfmgr_sweep");
  EXPECT_EQ(LinksText(*f, /*with_sweep=*/false), answer.dump());
  size_t pieces = 0;
  StreamNodesAnswer(*f, [&](std::string_view) { ++pieces; });
  EXPECT_GT(pieces, f->node_count()) << "one piece per node at least, never the whole text";
}

// Without the PerfMgr, health lists the degraded links: on a fabric whose every link runs
// below what both ends support, that is every cable, streamed one at a time.
TEST(ControlAnswersTest, TheHealthTextIsTheAnswersDump) {
  auto f = FatTree2(4);
  ASSERT_TRUE(f.ok());
  DiscoveryResult d;
  d.fabric = *f;
  d.nodes.resize(f->node_count());
  for (NodeId n = 0; n < f->node_count(); ++n) {
    d.nodes[n].port_info.resize(f->node(n).num_ports + 1);
    d.nodes[n].port_info_valid.assign(f->node(n).num_ports + 1, true);
    for (auto& pi : d.nodes[n].port_info) {
      pi.link_width_supported = 0x0f;  // up to 12x
      pi.link_width_active = 0x02;     // 4x
      pi.link_speed_supported = 0x01;
      pi.link_speed_active = 0x01;
      pi.port_state = 4;
    }
  }
  const nlohmann::json answer = HealthAnswer(&d, nullptr);
  ASSERT_FALSE(answer["cables"].empty()) << answer.dump();
  EXPECT_EQ(HealthText(&d), answer.dump());
  EXPECT_EQ(HealthText(nullptr),
            HealthAnswer(nullptr, nullptr).dump());
}

TEST(ControlAnswersTest, AnEmptyFabricGivesEmptyLists) {
  Fabric empty;
  EXPECT_EQ(NodesText(empty), NodesAnswer(empty).dump());
  EXPECT_EQ(LinksText(empty),
            LinksAnswer(empty, nullptr, nullptr).dump());
}

}  // namespace
}  // namespace ibsm::sm
