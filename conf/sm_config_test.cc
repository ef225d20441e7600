#include "conf/sm_config.h"

#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <random>
#include <set>
#include <sstream>

#include <gtest/gtest.h>

namespace ibsm::conf {
namespace {

std::string TempDir() {
  const char* t = std::getenv("TMPDIR");
  std::string base = t ? t : "/tmp";
  std::string tmpl = base + "/ibsm_conf_test.XXXXXX";
  char* d = ::mkdtemp(tmpl.data());
  return d ? std::string(d) : base;
}

TEST(SmConfigTest, DefaultConstructedConfigHasTheTableDefaults) {
  SmConfig c;
  for (const OptionDesc& d : OptionTable()) {
    EXPECT_EQ(OptionValueText(c, d), d.default_text) << d.name;
  }
}

TEST(SmConfigTest, EveryOptionIsNamedOnceAndItsRangeFitsItsField) {
  std::set<std::string_view> names;
  for (const OptionDesc& d : OptionTable()) {
    EXPECT_TRUE(names.insert(d.name).second) << d.name;
    EXPECT_FALSE(IsOpenSmOnlyOption(d.name)) << d.name;
    uint64_t field_max = std::visit(
        [](auto m) -> uint64_t {
          using T = std::remove_cvref_t<decltype(SmConfig{}.*m)>;
          if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
            return std::numeric_limits<T>::max();
          } else {
            return UINT64_MAX;
          }
        },
        d.field);
    EXPECT_LE(d.max, field_max) << d.name;
    EXPECT_LE(d.min, d.max) << d.name;
  }
}

TEST(SmConfigTest, TypicalOpenSmConfigLinesSetTypedFields) {
  auto r = ParseConfig(
      "# a comment\n"
      "\n"
      "guid 0x0002c90300000011\n"
      "lmc 2   # trailing comment\n"
      "lmc_esp0 true\n"
      "packet_life_time 0x13\n"
      "routing_engine ftree,updn\n"
      "root_guid_file /etc/opensm/roots\n"
      "part_enforce off\n"
      "max_wire_smps 8\n"
      "\tsweep_interval\t0x1e\r\n"
      "log_file (null)\n",
      "opensm.conf");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const SmConfig& c = r->config;
  EXPECT_EQ(c.guid, Guid{0x0002c90300000011});
  EXPECT_EQ(c.lmc, 2);
  EXPECT_TRUE(c.lmc_esp0);
  EXPECT_EQ(c.packet_life_time, 0x13);
  EXPECT_EQ(c.routing_engine, "ftree,updn");
  EXPECT_EQ(c.root_guid_file, "/etc/opensm/roots");
  EXPECT_EQ(c.part_enforce, "off");
  EXPECT_EQ(c.max_wire_smps, 8u);
  EXPECT_EQ(c.sweep_interval, 30u);
  EXPECT_EQ(c.log_file, "");
  EXPECT_TRUE(r->warnings.empty());
}

TEST(SmConfigTest, OutOfRangeValueIsAnErrorWithFileLineAndRange) {
  auto r = ParseConfig("\n\n\n\n\n\n\n\n\n\n\nlmc 9\n", "opensm.conf");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(r.status().message(), "opensm.conf:12: lmc: '9' is out of range 0..7");
}

TEST(SmConfigTest, MalformedValuesNameWhatWouldBeAccepted) {
  EXPECT_EQ(ParseConfig("sm_priority high", "f").status().message(),
            "f:1: sm_priority: 'high' is not a number in 0..15");
  EXPECT_EQ(ParseConfig("qos maybe", "f").status().message(),
            "f:1: qos: 'maybe' is not TRUE or FALSE");
  EXPECT_EQ(ParseConfig("part_enforce all", "f").status().message(),
            "f:1: part_enforce: 'all' is not one of both, in, out, off");
  EXPECT_EQ(ParseConfig("packet_life_time 0x20", "f").status().message(),
            "f:1: packet_life_time: '0x20' is out of range 0x0..0x1f");
  EXPECT_EQ(ParseConfig("lmc", "f").status().message(), "f:1: lmc: missing value");
  EXPECT_EQ(ParseConfig("m_key 0x10000000000000000", "f").status().message(),
            "f:1: m_key: '0x10000000000000000' is not a number in 0x0..0xffffffffffffffff");
  EXPECT_FALSE(ParseConfig("lmc -1", "f").ok());
  EXPECT_FALSE(ParseConfig("lmc 1 2", "f").ok());
}

TEST(SmConfigTest, UnknownKeyIsAWarningWithFileLineAndStableId) {
  auto r = ParseConfig("lmc 1\nfrobnicate 3\n", "/etc/opensm/opensm.conf");
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r->warnings.size(), 1u);
  EXPECT_EQ(r->warnings[0].ToString(),
            "/etc/opensm/opensm.conf:2: CONF-001 unknown option 'frobnicate' ignored");
  EXPECT_EQ(r->config.lmc, 1);
}

TEST(SmConfigTest, KeySetTwiceWarnsAndTheLastValueWins) {
  auto r = ParseConfig("lmc 1\nlmc 2\n", "f");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->config.lmc, 2);
  ASSERT_EQ(r->warnings.size(), 1u);
  EXPECT_EQ(r->warnings[0].id, "CONF-002");
  EXPECT_EQ(r->warnings[0].line, 2);
}

TEST(SmConfigTest, OpenSmOnlyOptionsAreKeptAndWrittenBack) {
  auto r = ParseConfig("console local\nqos_high_limit -1\ncc_ca_cong_setting_ccti_timer 0 0\n"
                       "cc_ca_cong_setting_ccti_timer 1 5\n",
                       "f");
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->warnings.empty());
  ASSERT_EQ(r->config.opensm_only.size(), 4u);
  EXPECT_EQ(r->config.opensm_only[0], (std::pair<std::string, std::string>{"console", "local"}));
  EXPECT_EQ(r->config.opensm_only[3].second, "1 5");
  auto again = ParseConfig(WriteConfig(r->config), "w");
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(again->config, r->config);
}

TEST(SmConfigTest, ArEnableAndArModeAreOneOptionAndAcceptBooleans) {
  auto r = ParseConfig("ar_enable 1\nsharp_enable 1\n", "f");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->config.ar_mode, 1);
  EXPECT_TRUE(r->config.sharp_enable);
  EXPECT_EQ(ParseConfig("ar_mode TRUE", "f")->config.ar_mode, 1);
  EXPECT_EQ(ParseConfig("ar_mode 3", "f")->config.ar_mode, 3);
  EXPECT_EQ(ParseConfig("ar_lid_mode free", "f")->config.ar_lid_mode, "free");
  EXPECT_FALSE(ParseConfig("ar_lid_mode sometimes", "f").ok());
  EXPECT_EQ(ParseConfig("ar_ageing_time_us 100", "f")->config.ar_ageing_time_us, 100u);
  EXPECT_FALSE(ParseConfig("ar_mode 4", "f").ok());
  // Both names set: one option set twice.
  EXPECT_EQ(ParseConfig("ar_enable 1\nar_mode 2\n", "f")->warnings.size(), 1u);
  std::string written = WriteConfig(SmConfig{});
  EXPECT_NE(written.find("\nar_mode 0\n"), std::string::npos);
  EXPECT_EQ(written.find("\nar_enable "), std::string::npos);
}

TEST(SmConfigTest, WrittenConfigParsesBackToTheSameConfig) {
  SmConfig c;
  c.guid = Guid{0x0002c90300abcdef};
  c.m_key = 0x1234;
  c.lmc = 3;
  c.lmc_esp0 = true;
  c.head_of_queue_lifetime = 0x14;
  c.routing_engine = "ftree,minhop";
  c.cn_guid_file = "/etc/opensm/cn guids";  // spaces survive
  c.part_enforce = "in";
  c.sweep_interval = 0;
  c.max_wire_smps = 0;
  c.log_file = "";
  c.ar_mode = 2;
  c.ar_sl_mask = 0x00F0;
  c.state_db_file = "/tmp/x.db";
  auto r = ParseConfig(WriteConfig(c), "written");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(r->warnings.empty());
  EXPECT_EQ(r->config, c);
  EXPECT_EQ(ParseConfig(WriteConfig(SmConfig{}), "w")->config, SmConfig{});
}

TEST(SmConfigTest, WrittenConfigUsesOpenSmLayout) {
  std::string w = WriteConfig(SmConfig{});
  EXPECT_EQ(w.rfind("#\n# DEVICE ATTRIBUTES OPTIONS\n#\n# The port GUID", 0), 0u) << w.substr(0, 80);
  EXPECT_NE(w.find("# The LMC value used on this subnet (2^lmc LIDs per port)\nlmc 0\n\n"),
            std::string::npos);
  EXPECT_NE(w.find("\nrouting_engine (null)\n"), std::string::npos);
  EXPECT_NE(w.find("\nsubnet_prefix 0xfe80000000000000\n"), std::string::npos);
  EXPECT_NE(w.find("\npacket_life_time 0x12\n"), std::string::npos);
  EXPECT_NE(w.find("\nmax_wire_smps 64\n"), std::string::npos);
  EXPECT_NE(w.find("\nguid2lid_file /var/cache/opensm/guid2lid\n"), std::string::npos);
}

TEST(SmConfigTest, DumpListsOnlyChangedOptionsWhenAsked) {
  SmConfig c;
  c.lmc = 1;
  c.opensm_only.push_back({"console", "local"});
  EXPECT_EQ(DumpConfig(c, true), "lmc 1\nconsole local (accepted, not used by ibsm)\n");
  EXPECT_NE(DumpConfig(c, false).find("sweep_interval 10\n"), std::string::npos);
}

// Every byte sequence must parse to a value or a Status: random mutations of a real file
// and raw garbage. A crash or sanitizer report fails the test.
TEST(SmConfigTest, MutatedAndGarbageInputNeverCrashes) {
  const std::string valid = WriteConfig(SmConfig{});
  std::mt19937 rng(12345);
  int ok = 0;
  for (int i = 0; i < 3000; ++i) {
    std::string s = valid;
    int edits = 1 + static_cast<int>(rng() % 8);
    for (int e = 0; e < edits; ++e) {
      size_t at = rng() % (s.size() + 1);
      switch (rng() % 4) {
        case 0: if (at < s.size()) s[at] = static_cast<char>(rng()); break;
        case 1: s.insert(at, 1, static_cast<char>(rng())); break;
        case 2: if (at < s.size()) s.erase(at, rng() % 16); break;
        case 3: s.insert(at, s.substr(rng() % s.size(), rng() % 64)); break;
      }
    }
    auto r = ParseConfig(s, "mutated");
    if (r.ok()) ++ok;
    else EXPECT_NE(r.status().message().find("mutated:"), std::string::npos);
  }
  EXPECT_GT(ok, 0);
  for (int i = 0; i < 200; ++i) {
    std::string g(rng() % 4096, '\0');
    for (char& ch : g) ch = static_cast<char>(rng());
    auto r = ParseConfig(g, "garbage");
    if (r.ok()) {
      EXPECT_LE(r->warnings.size(), 101u);
      for (const Diagnostic& d : r->warnings) {
        for (char ch : d.message) EXPECT_TRUE(ch >= 0x20 && ch < 0x7f) << d.message;
      }
    }
  }
}

TEST(SmConfigTest, LoadingAMissingFileIsNotFound) {
  auto r = LoadConfigFile("/nonexistent/opensm.conf");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kNotFound);
}

// Runs `opensm -c FILE` with a hard timeout. Returns false if it did not write the file.
bool RunOpenSmCreateConfig(const std::string& path) {
  pid_t pid = ::fork();
  if (pid < 0) return false;
  if (pid == 0) {
    ::alarm(20);  // survives exec: opensm is killed if it hangs
    std::freopen("/dev/null", "w", stdout);
    std::freopen("/dev/null", "w", stderr);
    ::execl("/usr/sbin/opensm", "opensm", "-c", path.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
  }
  return ::access(path.c_str(), R_OK) == 0;
}

TEST(SmConfigTest, OpenSmsOwnCreateConfigOutputLoadsWithoutWarnings) {
  if (::access("/usr/sbin/opensm", X_OK) != 0) GTEST_SKIP() << "no /usr/sbin/opensm";
  const std::string path = TempDir() + "/osm.conf";
  ASSERT_TRUE(RunOpenSmCreateConfig(path));
  auto r = LoadConfigFile(path);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  for (const Diagnostic& d : r->warnings) ADD_FAILURE() << d.ToString();
  // OpenSM's defaults are ibsm's, except max_wire_smps (ibsm: 64, OpenSM: 4).
  SmConfig c = r->config;
  EXPECT_EQ(c.max_wire_smps, 4u);
  EXPECT_FALSE(c.opensm_only.empty());
  c.max_wire_smps = 64;
  c.opensm_only.clear();
  EXPECT_EQ(c, SmConfig{});
  // What ibsm writes back still carries OpenSM's own options.
  auto again = ParseConfig(WriteConfig(r->config), "rewritten");
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->config, r->config);
  ::unlink(path.c_str());
}

}  // namespace
}  // namespace ibsm::conf
