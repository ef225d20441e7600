#include "conf/text_file.h"

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include <gtest/gtest.h>

namespace ibsm::conf {
namespace {

namespace fs = std::filesystem;

class TextFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/ibsm-textfile-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    old_umask_ = ::umask(022);
  }
  void TearDown() override {
    ::umask(old_umask_);
    fs::remove_all(dir_);
  }
  static std::string Slurp(const std::string& path) {
    std::ifstream in(path);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }
  std::set<std::string> Names() const {
    std::set<std::string> out;
    for (const auto& e : fs::directory_iterator(dir_)) out.insert(e.path().filename().string());
    return out;
  }

  std::string dir_;
  mode_t old_umask_ = 022;
};

// The old fixed temp name "<path>.tmp" was opened with O_CREAT|O_TRUNC: a symlink planted
// there by anyone who may write to the directory made root truncate and overwrite its target.
TEST_F(TextFileTest, ASymlinkPlantedAtTheTempNameIsNeverWrittenThrough) {
  const std::string target = dir_ + "/shadow", path = dir_ + "/guid2lid";
  std::ofstream(target) << "root:x:0:\n";
  fs::create_symlink(target, path + ".tmp");
  ASSERT_TRUE(WriteFileAtomically(path, "0x0002c90300000001 1 1\n").ok());
  EXPECT_EQ(Slurp(target), "root:x:0:\n") << "the symlink's target is untouched";
  EXPECT_EQ(Slurp(path), "0x0002c90300000001 1 1\n");
  struct stat st {};
  ASSERT_EQ(::lstat(path.c_str(), &st), 0);
  EXPECT_TRUE(S_ISREG(st.st_mode));
  EXPECT_EQ(st.st_mode & 0777, 0644u) << "mode 0644 under umask 022, as before";
  EXPECT_EQ(Names(), (std::set<std::string>{"shadow", "guid2lid", "guid2lid.tmp"}))
      << "no temporary file is left behind";
}

// A symlink at the path itself is replaced by the new file, never followed (rename(2)).
TEST_F(TextFileTest, ASymlinkAtThePathIsReplacedNotFollowed) {
  const std::string target = dir_ + "/shadow", path = dir_ + "/opensm.conf";
  std::ofstream(target) << "keep\n";
  fs::create_symlink(target, path);
  ASSERT_TRUE(WriteFileAtomically(path, "lmc 1\n").ok());
  EXPECT_EQ(Slurp(target), "keep\n");
  EXPECT_FALSE(fs::is_symlink(path));
  EXPECT_EQ(Slurp(path), "lmc 1\n");
}

TEST_F(TextFileTest, EachTempFileHasAFreshNameAndTheModeAsked) {
  const std::string path = dir_ + "/state";
  auto a = CreateTempFileBeside(path, 0640);
  auto b = CreateTempFileBeside(path, 0640);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_NE(a->path, b->path);
  EXPECT_EQ(a->path.rfind(path + ".tmp.", 0), 0u) << a->path;
  struct stat st {};
  ASSERT_EQ(::fstat(a->fd, &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0640u);
  ::close(a->fd);
  ::close(b->fd);
  // A directory nobody may write to is an error naming the path, not a crash.
  auto none = CreateTempFileBeside(dir_ + "/no-such-dir/x");
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.status().message().find("no-such-dir/x"), std::string::npos);
}

}  // namespace
}  // namespace ibsm::conf
