// The Debian package as an operator gets it (README, "Package"): `cpack -G DEB` on this build
// tree, unpacked with dpkg-deb -x into a scratch root. The packaged programs run from there
// (--version, one sweep on the in-process simulator), the man pages render with man -l and
// name every flag, command and option of the tables they are generated from, the conffile,
// unit and logrotate entry agree on the daemon's paths, and lintian reports no error.
// Skipped, saying so, where cpack, dpkg-deb or man is missing (scripts/setup.sh --test
// installs them) and in the sanitizer build; lintian's check is skipped alone when lintian is
// missing.
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "conf/command_line.h"
#include "conf/opensm_keys.h"
#include "conf/sm_config.h"
#include "tests/e2e/ibsim_harness.h"
#include "tools/ctl_commands.h"

extern char** environ;

namespace ibsm::test {
namespace {

using namespace std::chrono_literals;
namespace fs = std::filesystem;

// `name` found in PATH, or "".
std::string PathOf(const std::string& name) {
  const char* path = std::getenv("PATH");
  std::istringstream dirs(path ? path : "/usr/bin:/bin");
  for (std::string dir; std::getline(dirs, dir, ':');) {
    const fs::path p = fs::path(dir) / name;
    if (!dir.empty() && access(p.c_str(), X_OK) == 0) return p.string();
  }
  return "";
}

// This process's environment plus `extra` (KEY=VALUE), for RunCommand, which replaces it.
std::vector<std::string> EnvPlus(const std::vector<std::string>& extra) {
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) env.emplace_back(*e);
  env.insert(env.end(), extra.begin(), extra.end());
  return env;
}

std::string TrimEnd(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

// `key=` in a systemd unit (its last assignment), or "".
std::string UnitSetting(const std::string& unit, const std::string& key) {
  std::string value;
  std::istringstream in(unit);
  for (std::string line; std::getline(in, line);)
    if (line.rfind(key + "=", 0) == 0) value = line.substr(key.size() + 1);
  return value;
}

class PackageTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (IBSM_SANITIZED)
      GTEST_SKIP() << "a sanitizer build's package is not one anyone installs; the release "
                   << "build's is made and checked (scripts/test.sh runs both builds)";
    for (const char* tool : {"dpkg-deb", "dpkg-shlibdeps", "man"})
      if (PathOf(tool).empty())
        GTEST_SKIP() << tool << " is not installed (scripts/setup.sh --test installs dpkg-dev "
                     << "and man-db)";
    if (access(IBSM_CPACK, X_OK) != 0) GTEST_SKIP() << "no cpack at " << IBSM_CPACK;
    dir_ = fs::temp_directory_path() / ("ibsm-package-" + std::to_string(getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    // -B: the package and cpack's staging tree go to the scratch directory, so tests running
    // side by side do not share them.
    auto r = RunCommand({IBSM_CPACK, "-G", "DEB", "--config",
                         std::string(IBSM_BUILD_DIR) + "/CPackConfig.cmake", "-B",
                         (dir_ / "out").string()},
                        300s, IBSM_BUILD_DIR);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    ASSERT_EQ(r->exit_code, 0) << Describe(*r);
    for (const auto& e : fs::directory_iterator(dir_ / "out"))
      if (e.path().extension() == ".deb") deb_ = e.path();
    ASSERT_FALSE(deb_.empty()) << "cpack made no .deb: " << r->out;
    root_ = dir_ / "root";
    auto x = RunCommand({"dpkg-deb", "-x", deb_.string(), root_.string()}, 60s, dir_.string());
    ASSERT_TRUE(x.ok());
    ASSERT_EQ(x->exit_code, 0) << Describe(*x);
    auto e = RunCommand({"dpkg-deb", "-e", deb_.string(), (dir_ / "control").string()}, 60s,
                        dir_.string());
    ASSERT_TRUE(e.ok());
    ASSERT_EQ(e->exit_code, 0) << Describe(*e);
  }
  void TearDown() override {
    if (!dir_.empty()) fs::remove_all(dir_);
  }

  std::string Field(const std::string& name) {
    auto r = RunCommand({"dpkg-deb", "-f", deb_.string(), name}, 60s, dir_.string());
    return r.ok() && r->exit_code == 0 ? TrimEnd(r->out) : "";
  }

  // `man -l` of an installed page as a terminal 80 columns wide shows it; warnings from
  // groff (bad roff) fail the test.
  std::string Render(const std::string& page) {
    const fs::path path = root_ / page;
    EXPECT_TRUE(fs::exists(path)) << page;
    auto r = RunCommand({"man", "--warnings", "-l", path.string()}, 60s, dir_.string(),
                        EnvPlus({"MANWIDTH=80", "MANPAGER=cat", "PAGER=cat", "LANG=C.UTF-8",
                                 "LC_ALL=C.UTF-8"}));
    if (!r.ok()) {
      ADD_FAILURE() << r.status().ToString();
      return "";
    }
    EXPECT_EQ(r->exit_code, 0) << Describe(*r);
    EXPECT_EQ(r->err, "") << page << ": man and groff warn";
    return r->out;
  }

  // What the program printed for --version, run from the scratch root.
  std::string PackagedVersion(const std::string& path) {
    auto r = RunCommand({(root_ / path).string(), "--version"}, 30s, dir_.string());
    if (!r.ok()) return r.status().ToString();
    EXPECT_EQ(r->exit_code, 0) << Describe(*r);
    return r->out;
  }

  // The file name, the programs, pages, unit and conffiles, and Depends from the libraries.
  void CheckContents() {
    auto arch = RunCommand({"dpkg", "--print-architecture"}, 30s, dir_.string());
    ASSERT_TRUE(arch.ok());
    const std::string version = Field("Version");
    EXPECT_EQ(deb_.filename().string(), "ibsm_" + version + "_" + TrimEnd(arch->out) + ".deb");
    EXPECT_EQ(Field("Package"), "ibsm");
    // The same version the programs print.
    EXPECT_NE(PackagedVersion("usr/sbin/ibsmd").find("ibsmd " + version + " (commit "),
              std::string::npos);

    for (const char* program :
         {"usr/sbin/ibsmd", "usr/bin/ibsmctl", "usr/bin/ibsm-routecheck", "usr/bin/ibsm-topogen"}) {
      EXPECT_EQ(access((root_ / program).c_str(), X_OK), 0) << program << " is not executable";
    }
    for (const char* file :
         {"usr/share/man/man8/ibsmd.8.gz", "usr/share/man/man8/ibsmctl.8.gz",
          "usr/share/man/man5/ibsm.conf.5.gz", "lib/systemd/system/ibsmd.service",
          "etc/ibsm/ibsm.conf", "etc/logrotate.d/ibsm", "usr/share/doc/ibsm/copyright"}) {
      EXPECT_TRUE(fs::is_regular_file(root_ / file)) << file << " is not in the package";
    }
    EXPECT_FALSE(fs::exists(root_ / "usr/bin/ibsm-mangen")) << "the build tool is not shipped";

    // Every file under /etc is a conffile, so an upgrade keeps the operator's edits.
    std::set<std::string> conffiles;
    {
      std::istringstream in(ReadFile((dir_ / "control/conffiles").string()));
      for (std::string line; std::getline(in, line);) conffiles.insert(line);
    }
    for (const auto& e : fs::recursive_directory_iterator(root_ / "etc")) {
      if (!e.is_regular_file()) continue;
      const std::string installed = "/" + fs::relative(e.path(), root_).string();
      EXPECT_EQ(conffiles.count(installed), 1u) << installed << " is not a conffile";
    }
    EXPECT_EQ(conffiles.count("/etc/ibsm/ibsm.conf"), 1u);

    // Depends comes from the libraries the programs link (dpkg-shlibdeps), not from a list.
    const std::string depends = Field("Depends");
    for (const char* lib : {"libc6", "libibumad3", "libsqlite3-0", "libstdc++6"})
      EXPECT_NE(depends.find(lib), std::string::npos) << "Depends: " << depends;
  }

  // The conffile, the unit and the logrotate entry name the same directories.
  void CheckPaths() {
    auto load = conf::LoadConfigFile((root_ / "etc/ibsm/ibsm.conf").string());
    ASSERT_TRUE(load.ok()) << load.status().ToString();
    EXPECT_TRUE(load->warnings.empty()) << load->warnings[0].ToString();
    const conf::SmConfig& c = load->config;
    // The built-in defaults but for where the log and the dumps go.
    conf::SmConfig expected;
    expected.log_file = c.log_file;
    expected.dump_files_dir = c.dump_files_dir;
    EXPECT_EQ(conf::WriteConfig(c), conf::WriteConfig(expected));

    const std::string unit = ReadFile((root_ / "lib/systemd/system/ibsmd.service").string());
    const std::string exec = UnitSetting(unit, "ExecStart");
    EXPECT_EQ(exec, "/usr/sbin/ibsmd -F /etc/ibsm/ibsm.conf");
    const std::string writable = " " + UnitSetting(unit, "ReadWritePaths") + " ";
    auto writable_dir = [&](const std::string& path) {
      const std::string dir = fs::path(path).parent_path().string();
      return writable.find(" " + dir + " ") != std::string::npos;
    };
    EXPECT_TRUE(writable_dir(c.log_file)) << c.log_file << " outside " << writable;
    EXPECT_TRUE(writable_dir(c.dump_files_dir + "x")) << c.dump_files_dir << " outside " << writable;
    EXPECT_TRUE(writable_dir(c.state_db_file)) << c.state_db_file << " outside " << writable;
    EXPECT_TRUE(writable_dir(c.guid2lid_file)) << c.guid2lid_file << " outside " << writable;
    EXPECT_EQ(fs::path(c.log_file).parent_path(), "/var/log/" + UnitSetting(unit, "LogsDirectory"));
    EXPECT_EQ(fs::path(c.state_db_file).parent_path(),
              "/var/lib/" + UnitSetting(unit, "StateDirectory"));
    EXPECT_EQ(fs::path(c.control_socket).parent_path(),
              "/run/" + UnitSetting(unit, "RuntimeDirectory"));

    // logrotate rotates that log and tells ibsmd to reopen it (SIGUSR1; copytruncate would race
    // the daemon's writes).
    const std::string rotate = ReadFile((root_ / "etc/logrotate.d/ibsm").string());
    EXPECT_NE(rotate.find("\n" + c.log_file + " {"), std::string::npos) << rotate;
    EXPECT_NE(rotate.find("--signal=USR1 ibsmd.service"), std::string::npos) << rotate;
    EXPECT_EQ(rotate.find("copytruncate"), std::string::npos) << rotate;
    if (!PathOf("logrotate").empty()) {  // logrotate reads the entry without an error
      auto lr = RunCommand({"logrotate", "--debug", "--state", (dir_ / "logrotate.state").string(),
                            (root_ / "etc/logrotate.d/ibsm").string()},
                           60s, dir_.string());
      ASSERT_TRUE(lr.ok());
      EXPECT_EQ(lr->exit_code, 0) << Describe(*lr);
      EXPECT_EQ(lr->err.find("error"), std::string::npos) << lr->err;
      EXPECT_NE(lr->err.find("rotating pattern: " + c.log_file), std::string::npos) << lr->err;
    }

    // systemd reads the installed unit and finds the man pages it names (Documentation=).
    if (!PathOf("systemd-analyze").empty()) {
      std::string local = unit;
      const std::string installed = "/usr/sbin/ibsmd";
      local.replace(local.find(installed), installed.size(), (root_ / "usr/sbin/ibsmd").string());
      const fs::path copy = dir_ / "ibsmd.service";
      std::ofstream(copy) << local;
      auto r = RunCommand({"systemd-analyze", "verify", copy.string()}, 60s, dir_.string(),
                          EnvPlus({"MANPATH=" + (root_ / "usr/share/man").string()}));
      ASSERT_TRUE(r.ok());
      EXPECT_EQ(r->exit_code, 0) << Describe(*r);
      EXPECT_EQ(r->err, "") << "systemd-analyze verify warns";
    }
  }

  // The packaged programs run: --version, and ibsmd sweeps the simulator once.
  void CheckPrograms() {
    const std::string built = [] {
      auto r = RunCommand({Bin("ibsmd"), "--version"}, 30s, BinDir());
      return r.ok() ? r->out : "";
    }();
    const std::string packaged = PackagedVersion("usr/sbin/ibsmd");
    EXPECT_EQ(packaged, built) << "the package holds the ibsmd this tree built";
    EXPECT_TRUE(std::regex_match(packaged, std::regex("ibsmd [0-9.]+ \\(commit [0-9a-f]{12}(-dirty)?\\)\n|"
                                                      "ibsmd [0-9.]+ \\(commit unknown\\)\n")))
        << packaged;
    EXPECT_EQ(PackagedVersion("usr/bin/ibsmctl").rfind("ibsmctl ", 0), 0u);
    EXPECT_EQ(PackagedVersion("usr/bin/ibsm-routecheck").rfind("ibsm-routecheck ", 0), 0u);
    EXPECT_EQ(PackagedVersion("usr/bin/ibsm-topogen").rfind("ibsm-topogen ", 0), 0u);

    const fs::path conf = dir_ / "ibsmd.conf", log = dir_ / "ibsmd.log";
    std::ofstream(conf) << "log_file " << log.string() << "\n"
                        << "dump_files_dir " << dir_.string() << "\n"
                        << "state_db_file " << (dir_ / "state.db").string() << "\n"
                        << "guid2lid_file " << (dir_ / "guid2lid").string() << "\n"
                        << "control_socket none\n"
                        << "sweep_interval 0\n";
    const std::string topo = std::string(IBSM_SOURCE_DIR) + "/sim/topologies/ftree3-k8.net";
    auto r = RunCommand({(root_ / "usr/sbin/ibsmd").string(), "-F", conf.string(), "--sim", topo,
                         "-o"},
                        120s, dir_.string());
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(r->exit_code, 0) << Describe(*r);
    const std::string text = ReadFile(log.string());
    EXPECT_NE(text.find("SUBNET UP"), std::string::npos) << text.substr(0, 2000);
    EXPECT_TRUE(fs::exists(dir_ / "opensm-subnet.lst")) << "the sweep wrote its dump";
  }

  // Each page renders without a groff warning and names what its table holds.
  void CheckManPages() {
    const std::string ibsmd = Render("usr/share/man/man8/ibsmd.8.gz");
    for (const char* section :
         {"NAME", "SYNOPSIS", "DESCRIPTION", "OPTIONS", "SIGNALS", "FILES", "EXIT STATUS", "SEE ALSO"})
      EXPECT_NE(ibsmd.find(std::string("\n") + section + "\n"), std::string::npos) << section;
    EXPECT_NE(ibsmd.find("ibsmd - InfiniBand subnet manager"), std::string::npos);
    for (const conf::CommandLineFlag& f : conf::CommandLineFlags()) {
      if (!f.long_name.empty()) {
        EXPECT_NE(ibsmd.find("--" + std::string(f.long_name)), std::string::npos) << f.long_name;
      }
      if (f.short_name != 0) {
        EXPECT_NE(ibsmd.find(std::string(" -") + f.short_name), std::string::npos) << f.short_name;
      }
    }
    for (const char* signal : {"SIGHUP", "SIGTERM", "SIGUSR1"})
      EXPECT_NE(ibsmd.find(signal), std::string::npos) << signal;
    const conf::SmConfig defaults;
    for (const std::string& path :
         {std::string("/etc/ibsm/ibsm.conf"), defaults.state_db_file, defaults.control_socket})
      EXPECT_NE(ibsmd.find(path), std::string::npos) << path;

    const std::string ctl = Render("usr/share/man/man8/ibsmctl.8.gz");
    const size_t commands = ctl.find("\nCOMMANDS\n");
    ASSERT_NE(commands, std::string::npos) << ctl;
    for (const tools::CtlCommand& c : tools::CtlCommands()) {
      const std::string at = "\n       " + std::string(c.name);
      EXPECT_TRUE(ctl.find(at + " ", commands) != std::string::npos ||
                  ctl.find(at + "\n", commands) != std::string::npos)
          << c.name << " is not under COMMANDS";
    }
    for (const tools::CtlGlobalFlag& f : tools::CtlGlobalFlags())
      EXPECT_NE(ctl.find(f.name), std::string::npos) << f.name;
    EXPECT_NE(ctl.find("SA QUERIES"), std::string::npos);

    const std::string file = Render("usr/share/man/man5/ibsm.conf.5.gz");
    EXPECT_NE(file.find("ibsm.conf - configuration"), std::string::npos) << file.substr(0, 400);
    for (const conf::OptionDesc& d : conf::OptionTable())
      EXPECT_NE(file.find("\n       " + std::string(d.name) + " "), std::string::npos)
          << d.name << " is not in ibsm.conf(5)";
    // Every OpenSM key ibsm does not fully act on, with what ibsm does instead.
    for (const conf::OpenSmKey& k : conf::OpenSmKeys()) {
      if (k.support == conf::KeySupport::kActs && k.honoured.empty()) continue;
      // A tag shorter than the indent shares its line with the text.
      const std::string at = "\n       " + std::string(k.name);
      EXPECT_TRUE(file.find(at + "\n") != std::string::npos ||
                  file.find(at + " ") != std::string::npos)
          << k.name << " is not in ibsm.conf(5)";
    }
    // A default as the option table gives it.
    EXPECT_NE(file.find("Default: " + defaults.state_db_file), std::string::npos);

    // The offline tools' pages hold what their --help prints.
    for (const char* program : {"ibsm-routecheck", "ibsm-topogen"}) {
      SCOPED_TRACE(program);
      auto help = RunCommand({(root_ / "usr/bin" / program).string(), "--help"}, 30s, dir_.string());
      ASSERT_TRUE(help.ok());
      const std::string page = Render(std::string("usr/share/man/man1/") + program + ".1.gz");
      EXPECT_NE(page.find(std::string(program) + " - "), std::string::npos) << page;
      const std::string first_line = help->out.substr(0, help->out.find('\n'));
      ASSERT_FALSE(first_line.empty());
      EXPECT_NE(page.find(first_line), std::string::npos) << first_line << "\n" << page;
    }
  }

  fs::path dir_, deb_, root_;
};






// One test, so that cpack (dpkg-shlibdeps takes most of its 6 s) runs once per suite run;
// lintian, the slowest check, runs beside the others.
TEST_F(PackageTest, TheDebInstallsWhatTheReadmeSaysRunsAndPassesLintian) {
  std::optional<ChildProcess> lintian;
  if (!PathOf("lintian").empty()) {
    auto child = ChildProcess::Start({"lintian", "--tag-display-limit", "0", deb_.string()},
                                     dir_.string(), {});
    ASSERT_TRUE(child.ok()) << child.status().ToString();
    lintian.emplace(std::move(*child));
  }
  {
    SCOPED_TRACE("contents");
    CheckContents();
  }
  {
    SCOPED_TRACE("paths");
    CheckPaths();
  }
  {
    SCOPED_TRACE("programs");
    CheckPrograms();
  }
  {
    SCOPED_TRACE("man pages");
    CheckManPages();
  }
  if (!lintian) {
    std::printf("lintian is not installed: not run\n");
    return;
  }
  auto r = lintian->Wait(300s);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  std::istringstream in(r->out);
  for (std::string line; std::getline(in, line);) EXPECT_NE(line.rfind("E: ", 0), 0u) << line;
  // lintian exits 0, or 1 when it found errors; 2 and up is lintian itself failing.
  EXPECT_LE(r->exit_code, 1) << Describe(*r);
  std::printf("lintian: %s\n", r->out.empty() ? "no tags" : r->out.c_str());
}

}  // namespace
}  // namespace ibsm::test
