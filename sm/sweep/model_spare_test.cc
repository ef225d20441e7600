// The copy of the model a repair patches (sm/sweep/model_spare.h): taken when it is of the
// model and version asked for, made then when it is not.
#include "sm/sweep/model_spare.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <memory>
#include <thread>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>

#include "fabric/generators.h"

namespace ibsm::sm {
namespace {

// A model of `f` (a 2-tier k=4 tree when not given), as a sweep leaves one.
std::shared_ptr<const DiscoveryResult> Model(Result<Fabric> f = FatTree2(4)) {
  EXPECT_TRUE(f.ok());
  auto r = std::make_shared<DiscoveryResult>();
  r->fabric = std::move(*f);
  r->nodes.resize(r->fabric.node_count());
  for (NodeId n = 0; n < r->fabric.node_count(); ++n)
    r->nodes[n].port_info.resize(r->fabric.node(n).num_ports + 1);
  r->smps_sent = 1234;
  return r;
}

bool WaitReady(ModelSpare& spare) {
  for (int i = 0; i < 2000 && !spare.ready(); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  return spare.ready();
}

void ExpectSame(const DiscoveryResult& a, const DiscoveryResult& b) {
  ASSERT_EQ(a.fabric.node_count(), b.fabric.node_count());
  ASSERT_EQ(a.fabric.port_count(), b.fabric.port_count());
  EXPECT_EQ(a.nodes.size(), b.nodes.size());
  EXPECT_EQ(a.smps_sent, b.smps_sent);
  for (NodeId n = 0; n < a.fabric.node_count(); ++n)
    EXPECT_EQ(a.fabric.node(n).guid, b.fabric.node(n).guid);
}

TEST(ModelSpareTest, TheCopyOfTheModelAskedForIsTakenOnce) {
  ModelSpare spare;
  const auto model = Model();
  spare.Keep(model, 7);
  ASSERT_TRUE(WaitReady(spare));
  const DiscoveryResult got = spare.Take(model, 7);
  EXPECT_EQ(spare.taken(), 1u);
  ExpectSame(got, *model);
  EXPECT_FALSE(spare.ready());
  // Taken: the next one is copied then.
  const DiscoveryResult again = spare.Take(model, 7);
  EXPECT_EQ(spare.taken(), 1u);
  ExpectSame(again, *model);
}

// A model changed in place since (another version), or another model, is copied then: the
// spare is never patched in place of what the SM holds now.
TEST(ModelSpareTest, ACopyOfAnotherModelOrVersionIsNotTaken) {
  ModelSpare spare;
  const auto model = Model();
  spare.Keep(model, 7);
  ASSERT_TRUE(WaitReady(spare));
  EXPECT_EQ(spare.Take(model, 8).smps_sent, 1234u);
  EXPECT_EQ(spare.taken(), 0u);

  spare.Keep(model, 9);
  ASSERT_TRUE(WaitReady(spare));
  auto other = std::make_shared<DiscoveryResult>(*model);
  other->smps_sent = 99;
  EXPECT_EQ(spare.Take(other, 9).smps_sent, 99u);
  EXPECT_EQ(spare.taken(), 0u);

  // A later Keep replaces an earlier copy.
  spare.Keep(model, 10);
  spare.Keep(other, 11);
  ASSERT_TRUE(WaitReady(spare));
  EXPECT_EQ(spare.Take(other, 11).smps_sent, 99u);
  EXPECT_EQ(spare.taken(), 1u);
}

// A sweep asks for the copy as soon as its model is final and again when it publishes it:
// the second ask, for the same model at the same version, makes no second copy, whether the
// first is made or still being made. Another version, or another model, is copied.
TEST(ModelSpareTest, AskedAgainForTheSameModelItCopiesOnce) {
  ModelSpare spare;
  const auto model = Model(FatTree3(8));
  spare.Keep(model, 3);
  spare.Keep(model, 3);  // most likely while the first is being made
  ASSERT_TRUE(WaitReady(spare));
  spare.Keep(model, 3);  // made
  ASSERT_TRUE(WaitReady(spare));
  EXPECT_EQ(spare.copies(), 1u);
  ExpectSame(spare.Take(model, 3), *model);
  EXPECT_EQ(spare.taken(), 1u);

  // Taken: asked again, it copies again.
  spare.Keep(model, 3);
  ASSERT_TRUE(WaitReady(spare));
  EXPECT_EQ(spare.copies(), 2u);
  spare.Keep(model, 4);
  ASSERT_TRUE(WaitReady(spare));
  EXPECT_EQ(spare.copies(), 3u);
  auto other = std::make_shared<DiscoveryResult>(*model);
  spare.Keep(other, 4);
  ASSERT_TRUE(WaitReady(spare));
  EXPECT_EQ(spare.copies(), 4u);
  EXPECT_EQ(spare.taken(), 1u);
  const uint64_t before = spare.taken();
  (void)spare.Take(other, 4);
  EXPECT_EQ(spare.taken(), before + 1);
}

// A repair that begins while the copy is still being made waits for it (WhenReady) instead of
// copying the model beside it: the callback comes on the io context once the copy is made, and
// Take then hands over that copy. Nothing to wait for (no copy asked for, or the copy made
// already): false, take at once.
TEST(ModelSpareTest, ARepairWaitsForTheCopyBeingMadeAndTakesIt) {
  boost::asio::io_context io;
  ModelSpare spare;
  // 1,344 nodes: its copy takes long enough to be caught in progress.
  const std::shared_ptr<const DiscoveryResult> shared = Model(FatTree3(16));
  EXPECT_FALSE(spare.WhenReady(shared, 1, io, [] {}));  // nothing asked for

  size_t waited = 0;
  for (uint64_t version = 1; version <= 20; ++version) {
    spare.Keep(shared, version);
    bool called = false;
    if (spare.WhenReady(shared, version, io, [&] { called = true; })) {
      ++waited;
      io.restart();  // stopped when the last guard went
      auto guard = boost::asio::make_work_guard(io);
      for (int i = 0; i < 4000 && !called; ++i) {
        io.poll();
        if (!called) std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
      ASSERT_TRUE(called) << "version " << version;
    } else {
      EXPECT_TRUE(spare.ready());
    }
    const uint64_t before = spare.taken();
    ExpectSame(spare.Take(shared, version), *shared);
    EXPECT_EQ(spare.taken(), before + 1) << "the copy waited for is the one taken";
  }
  std::printf("[ figure ] %zu of 20 repairs caught the copy in progress\n", waited);

  // A later Keep (another model published meanwhile) ends the wait: the repair then copies.
  spare.Keep(shared, 50);
  bool called = false;
  if (spare.WhenReady(shared, 50, io, [&] { called = true; })) {
    spare.Keep(shared, 51);
    io.restart();
    auto guard = boost::asio::make_work_guard(io);
    for (int i = 0; i < 4000 && !called; ++i) {
      io.poll();
      if (!called) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    EXPECT_TRUE(called);
    const uint64_t before = spare.taken();
    ExpectSame(spare.Take(shared, 50), *shared);
    EXPECT_EQ(spare.taken(), before);
  }
}

}  // namespace
}  // namespace ibsm::sm
