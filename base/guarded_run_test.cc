#include "base/guarded_run.h"

#include <gtest/gtest.h>

#include <stdexcept>
#include <vector>

#include <boost/asio/post.hpp>

namespace ibsm {
namespace {

TEST(GuardedRunTest, AHandlerThatThrowsIsReportedAndTheOthersStillRun) {
  boost::asio::io_context io;
  std::vector<std::string> errors;
  int ran = 0;
  boost::asio::post(io, [&] { ++ran; });
  boost::asio::post(io, [] { throw std::runtime_error("bad bytes"); });
  boost::asio::post(io, [&] { ++ran; });
  boost::asio::post(io, [] { throw 42; });
  boost::asio::post(io, [&] { ++ran; });
  RunGuarded(io, [&](const std::string& what) { errors.push_back(what); });
  EXPECT_EQ(ran, 3);
  ASSERT_EQ(errors.size(), 2u);
  EXPECT_EQ(errors[0], "bad bytes");
  EXPECT_EQ(errors[1], "an exception of unknown type");
}

}  // namespace
}  // namespace ibsm
