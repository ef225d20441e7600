#include "base/log.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace ibsm {
namespace {

std::string Slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

class LogFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = ::testing::TempDir() + "/ibsm-log-" + std::to_string(::getpid());
    std::filesystem::create_directories(dir_);
    path_ = dir_ + "/ibsmd.log";
  }
  void TearDown() override {
    ConfigureLogging("stderr", spdlog::level::info);
    std::filesystem::remove_all(dir_);
  }
  std::string dir_, path_;
};

// OpenSM's -L: "the log file will be truncated upon reaching this limit". A host that makes
// the SM log a line per request fills at most log_max_size of disk.
TEST_F(LogFileTest, AFileThatReachesItsLimitIsEmptiedAndSaysSo) {
  ASSERT_TRUE(ConfigureLogging(path_, spdlog::level::info, spdlog::level::info,
                               LogFileOptions{true, 4096}));
  const uint64_t before = LogTruncations();
  for (int i = 0; i < 500; ++i) Log(LogName::kSa).info("request {} refused: a flood line", i);
  const std::string text = Slurp(path_);
  EXPECT_LE(text.size(), 4096u);
  EXPECT_GE(LogTruncations() - before, 5u) << "500 lines of ~80 bytes pass 4 KiB many times";
  EXPECT_EQ(text.rfind("LOG-001", 200), text.find("LOG-001")) << "the note opens the file";
  EXPECT_NE(text.find("LOG-001 the log file reached log_max_size"), std::string::npos) << text;
  EXPECT_NE(text.find("request 499 refused"), std::string::npos) << "the newest line is kept";
}

TEST_F(LogFileTest, WithoutALimitTheFileGrowsAndAppendingKeepsWhatWasThere) {
  std::ofstream(path_) << "an older line\n";
  ASSERT_TRUE(ConfigureLogging(path_, spdlog::level::info));
  for (int i = 0; i < 200; ++i) Log(LogName::kSm).info("line {}", i);
  const std::string text = Slurp(path_);
  EXPECT_EQ(text.rfind("an older line\n", 0), 0u);
  EXPECT_NE(text.find("line 199"), std::string::npos);
  EXPECT_EQ(text.find("LOG-001"), std::string::npos);
}

// OpenSM's -e / accum_log_file FALSE: the file starts empty.
TEST_F(LogFileTest, EraseAtStartEmptiesTheFile) {
  std::ofstream(path_) << "an older line\n";
  ASSERT_TRUE(ConfigureLogging(path_, spdlog::level::info, spdlog::level::info,
                               LogFileOptions{false, 0}));
  Log(LogName::kSm).info("fresh");
  const std::string text = Slurp(path_);
  EXPECT_EQ(text.find("an older line"), std::string::npos);
  EXPECT_NE(text.find("fresh"), std::string::npos);
}

}  // namespace
}  // namespace ibsm
