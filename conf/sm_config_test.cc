#include "conf/sm_config.h"
#include "conf/opensm_keys.h"

#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <map>
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

TEST(SmConfigTest, OpenSmOnlyOptionsAreKeptAndWrittenBackAsComments) {
  auto r = ParseConfig("console off\nqos_max_vls 0\ncc_ca_cong_setting_ccti_timer 0 0\n"
                       "cc_ca_cong_setting_ccti_timer 1 5\n",
                       "f");
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->warnings.empty()) << r->warnings[0].ToString();
  ASSERT_EQ(r->config.opensm_only.size(), 4u);
  EXPECT_EQ(r->config.opensm_only[0], (std::pair<std::string, std::string>{"console", "off"}));
  EXPECT_EQ(r->config.opensm_only[3].second, "1 5");
  const std::string w = WriteConfig(r->config);
  // ibsm reads none of them: each is a comment that says so, with the value read last.
  EXPECT_NE(w.find("\n# cc_ca_cong_setting_ccti_timer 1 5\n#   not supported by ibsm (no effect): "
                   "no congestion-control manager"),
            std::string::npos)
      << w;
  EXPECT_NE(w.find("\n# console off\n#   not supported by ibsm (behaves as off): no console"),
            std::string::npos);
  EXPECT_EQ(w.find("\nconsole "), std::string::npos);
  auto again = ParseConfig(w, "w");
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_TRUE(again->config.opensm_only.empty());
  SmConfig typed = r->config;
  typed.opensm_only.clear();
  EXPECT_EQ(again->config, typed);
}

// CONF-030: an OpenSM key set to a value ibsm does not do what it asks is named with its line.
TEST(SmConfigTest, KeysSetToValuesIbsmDoesNotHonourAreNamedWithTheirLine) {
  auto r = ParseConfig("use_optimized_slvl TRUE\nqos FALSE\nfdr10 2\nconsole local\nlash_start_vl 3\n"
                       "log_flags 0x0f\nlog_flags 0x01\ncongestion_control TRUE\n"
                       "qos_sl2vl 0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15\nkeep_pkey_indexes TRUE\n"
                       "fdr10 0\nmax_op_vls 2\nm_key_lookup FALSE\nhonor_guid2lid_file TRUE\n",
                       "opensm.conf");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  std::vector<std::string> named;
  for (const Diagnostic& d : r->warnings)
    if (d.id == "CONF-030") named.push_back(std::to_string(d.line) + " " + d.message);
  ASSERT_EQ(named.size(), 6u);
  EXPECT_EQ(r->not_honoured, 6u);
  EXPECT_EQ(named[0], "1 use_optimized_slvl TRUE is not honoured by ibsm (it behaves as FALSE): "
                      "a switch's SL2VL tables are written one (input, output) port pair at a "
                      "time");
  EXPECT_EQ(named[1].rfind("3 fdr10 2 is not honoured by ibsm (it behaves as 0): no FDR10", 0), 0u)
      << named[1];
  EXPECT_EQ(named[2].rfind("4 console local is not honoured by ibsm (it behaves as off)", 0), 0u);
  EXPECT_EQ(named[3].rfind("7 log_flags 0x01 is not honoured by ibsm (it acts only in part)", 0),
            0u)
      << named[3];
  EXPECT_EQ(named[4].rfind("8 congestion_control TRUE", 0), 0u);
  EXPECT_EQ(named[5].rfind("14 honor_guid2lid_file TRUE is not honoured by ibsm (it behaves as "
                           "FALSE)",
                           0),
            0u);
  EXPECT_EQ(r->config.qos, false);  // the last value read
  EXPECT_EQ(r->config.max_op_vls, 2);  // acts: no warning
  // Past the cap of 100 warnings every one is still counted.
  std::string many;
  for (int i = 0; i < 150; ++i) many += "use_optimized_slvl TRUE\n";
  auto m = ParseConfig(many, "f");
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(m->not_honoured, 150u);
}

TEST(SmConfigTest, WrittenConfigCommentsOutWhatIbsmDoesNotHonour) {
  SmConfig c;
  c.disable_multicast = true;
  c.qos = true;
  const std::string w = WriteConfig(c);
  EXPECT_NE(w.find("\n# not supported by ibsm (behaves as FALSE): multicast is always served\n"
                   "# disable_multicast TRUE\n"),
            std::string::npos)
      << w;
  EXPECT_EQ(w.find("\ndisable_multicast "), std::string::npos);
  EXPECT_NE(w.find("\nqos TRUE\n"), std::string::npos);  // acts
  EXPECT_NE(w.find("\nmax_op_vls 5\n"), std::string::npos);  // acts
  EXPECT_NE(w.find("\n# fdr10 1\n#   not supported by ibsm (behaves as 0): no FDR10"),
            std::string::npos);
  EXPECT_NE(w.find("\nforce_log_flush FALSE\n"), std::string::npos);  // acts
  c.disable_multicast = false;
  EXPECT_NE(WriteConfig(c).find("\n# ibsm behaves as FALSE: multicast is always served\n"
                                "disable_multicast FALSE\n"),
            std::string::npos);
  // Every key OpenSM 3.3.23 knows is in the file, read or as a comment.
  for (const OpenSmKey& k : OpenSmKeys()) {
    const std::string name(k.name);
    EXPECT_TRUE(w.find("\n" + name + " ") != std::string::npos ||
                w.find("\n# " + name + " ") != std::string::npos)
        << name;
  }
}

TEST(SmConfigTest, ArEnableAndArModeAreOneOptionAndAcceptBooleans) {
  auto r = ParseConfig("ar_enable 1\nsharp_enable 1\n", "f");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->config.ar_mode, 1);
  EXPECT_TRUE(r->config.sharp_enable);
  EXPECT_EQ(ParseConfig("ar_mode TRUE", "f")->config.ar_mode, 1);
  EXPECT_EQ(ParseConfig("ar_mode 3", "f")->config.ar_mode, 3);
  EXPECT_EQ(ParseConfig("", "f")->config.ar_lid_mode, "free");  // docs/ar-sharp.md "Defaults"
  EXPECT_EQ(ParseConfig("ar_lid_mode bounded", "f")->config.ar_lid_mode, "bounded");
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
  EXPECT_EQ(DumpConfig(c, true), "lmc 1\nconsole local (not read by ibsm)\n");
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

// A drop-in opensm.conf, as `opensm -c` writes it, loads; what ibsm does not honour in it is
// named, key by key: the operator sees exactly where ibsm differs from OpenSM.
TEST(SmConfigTest, OpenSmsOwnCreateConfigOutputLoadsAndItsDifferencesAreNamed) {
  if (::access("/usr/sbin/opensm", X_OK) != 0) GTEST_SKIP() << "no /usr/sbin/opensm";
  const std::string path = TempDir() + "/osm.conf";
  ASSERT_TRUE(RunOpenSmCreateConfig(path));
  auto r = LoadConfigFile(path);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  std::set<std::string> named;
  for (const Diagnostic& d : r->warnings) {
    if (d.id != "CONF-030") {
      ADD_FAILURE() << d.ToString();
      continue;
    }
    named.insert(d.message.substr(0, d.message.find(' ')));
  }
  const std::set<std::string> expected = {
      "m_key_lookup",       "fdr10",         "use_mfttop",         "drop_event_subscriptions",
      "ipoib_mcgroup_creation_validation", "perfmgr_redir", "perfmgr_log_errors",
      "exit_on_fatal"};
  EXPECT_EQ(named, expected);
  EXPECT_EQ(r->not_honoured, expected.size());
  // OpenSM's defaults are ibsm's, except max_wire_smps (ibsm: 64, OpenSM: 4).
  SmConfig c = r->config;
  EXPECT_EQ(c.max_wire_smps, 4u);
  EXPECT_FALSE(c.opensm_only.empty());
  c.max_wire_smps = 64;
  c.opensm_only.clear();
  EXPECT_EQ(c, SmConfig{});
  ::unlink(path.c_str());
}

// The table of conf/opensm_keys.h holds exactly the keys `opensm -c` writes, in its order,
// with its defaults.
TEST(OpenSmKeysTest, TheTableIsWhatOpenSmsCreateConfigWrites) {
  if (::access("/usr/sbin/opensm", X_OK) != 0) GTEST_SKIP() << "no /usr/sbin/opensm";
  const std::string path = TempDir() + "/osm-keys.conf";
  ASSERT_TRUE(RunOpenSmCreateConfig(path));
  std::ifstream in(path);
  std::vector<std::pair<std::string, std::string>> written;
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] == '#') continue;
    const size_t sp = line.find(' ');
    written.emplace_back(line.substr(0, sp), sp == std::string::npos ? "" : line.substr(sp + 1));
  }
  const auto keys = OpenSmKeys();
  ASSERT_EQ(written.size(), keys.size());
  for (size_t i = 0; i < keys.size(); ++i) {
    EXPECT_EQ(written[i].first, keys[i].name) << i;
    EXPECT_EQ(written[i].second, keys[i].opensm_default) << keys[i].name;
  }
  ::unlink(path.c_str());
}

TEST(OpenSmKeysTest, EveryKeyIsClassifiedOnceAndOnlyTypedOptionsAct) {
  std::set<std::string_view> names;
  for (const OpenSmKey& k : OpenSmKeys()) {
    EXPECT_TRUE(names.insert(k.name).second) << k.name;
    const bool typed = FindOption(k.name) != nullptr;
    EXPECT_EQ(IsOpenSmOnlyOption(k.name), !typed) << k.name;
    if (k.support == KeySupport::kActs) {
      EXPECT_TRUE(typed) << k.name << ": acts, but no code reads it";
    } else {
      EXPECT_FALSE(k.note.empty()) << k.name;
    }
    if (k.support == KeySupport::kMoot) {
      EXPECT_TRUE(k.honoured.empty()) << k.name;
    }
  }
  EXPECT_EQ(names.size(), 160u);
  EXPECT_FALSE(IsOpenSmOnlyOption("frobnicate"));
  EXPECT_FALSE(IsOpenSmOnlyOption("state_db_file"));  // ibsm's own
}

// README.md's "opensm.conf keys" table has one row per key, saying what this table says.
TEST(OpenSmKeysTest, TheReadmeTableSaysWhatTheCodeDoes) {
  std::ifstream in(std::string(IBSM_SOURCE_DIR) + "/README.md");
  ASSERT_TRUE(in.good());
  std::map<std::string, std::string> rows;
  bool in_section = false;
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("#", 0) == 0) in_section = line == "### opensm.conf keys";
    if (!in_section || line.rfind("| `", 0) != 0) continue;
    const size_t end = line.find("` |", 3);
    if (end == std::string::npos) continue;
    const std::string key = line.substr(3, end - 3);
    const size_t cell = end + 3;
    const size_t next = line.find(" |", cell + 1);
    if (FindOpenSmKey(key) && next != std::string::npos)
      rows[key] = line.substr(cell + 1, next - cell - 1);
  }
  for (const OpenSmKey& k : OpenSmKeys()) {
    auto it = rows.find(std::string(k.name));
    if (it == rows.end()) {
      ADD_FAILURE() << "README.md has no row for " << k.name;
      continue;
    }
    EXPECT_EQ(it->second, SupportText(k)) << k.name;
  }
}

TEST(SmConfigTest, TheOptionsASighupAppliesAreMarkedInTheirRows) {
  // What the running SM re-reads (SubnetManager::Reconfigure, PerfManager::Reconfigure)...
  for (std::string_view name : {"routing_engine", "sweep_interval", "partition_config_file",
                                "qos", "qos_swe_sl2vl", "link_flap_threshold", "ar_mode",
                                "perfmgr_sweep_time_s", "health_window_s", "dump_files_dir"}) {
    const OptionDesc* d = FindOption(name);
    ASSERT_NE(d, nullptr) << name;
    EXPECT_TRUE(d->reloads) << name;
  }
  // ... and what it takes only at start.
  for (std::string_view name : {"guid", "lmc", "sm_priority", "m_key", "sm_key", "sa_key",
                                "max_wire_smps", "transaction_timeout", "state_db_file",
                                "log_file", "perfmgr", "head_of_queue_lifetime"}) {
    const OptionDesc* d = FindOption(name);
    ASSERT_NE(d, nullptr) << name;
    EXPECT_FALSE(d->reloads) << name;
  }
}

}  // namespace
}  // namespace ibsm::conf
