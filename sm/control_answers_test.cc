// The snapshot texts the daemon stores (NodesAnswerText, LinksAnswerText) are built one node
// or cable at a time to keep a large fabric's snapshot cheap; they must be byte for byte the
// dumps of the answers the control socket gives, or ibsmctl --state-db would print something
// else than the daemon did.
#include "sm/control_answers.h"

#include <gtest/gtest.h>

#include "fabric/generators.h"

namespace ibsm::sm {
namespace {

TEST(ControlAnswersTest, SnapshotTextsAreTheAnswersDumps) {
  auto f = FatTree3(4);
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(NodesAnswerText(*f), NodesAnswer(*f).dump());
  size_t stable = 0;
  const std::string links = LinksAnswerText(*f, nullptr, nullptr, &stable);
  nlohmann::json answer = LinksAnswer(*f, nullptr, nullptr);
  EXPECT_EQ(links, answer.dump());
  EXPECT_GT(answer["links"].size(), 10u);
  answer.erase("perfmgr_sweep");
  EXPECT_EQ(links.substr(0, stable) + "}", answer.dump())
      << "the stable part is the answer without perfmgr_sweep";
}

TEST(ControlAnswersTest, AnEmptyFabricGivesEmptyLists) {
  Fabric empty;
  EXPECT_EQ(NodesAnswerText(empty), NodesAnswer(empty).dump());
  EXPECT_EQ(LinksAnswerText(empty, nullptr, nullptr, nullptr),
            LinksAnswer(empty, nullptr, nullptr).dump());
}

}  // namespace
}  // namespace ibsm::sm
