#include "conf/command_line.h"

#include <stdlib.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include "conf/text_file.h"

namespace ibsm::conf {
namespace {

struct Applied {
  Status status;
  SmConfig config;
  CommandLineExtras extras;
};

Applied Apply(const std::vector<std::string>& args) {
  Applied a;
  a.status = ApplyCommandLine(args, &a.config, &a.extras);
  return a;
}

TEST(CommandLineTest, OpenSmFlagLettersSetTheOptionsTheySetInOpenSm) {
  auto a = Apply({"-g", "0x0002c90300000011", "-l", "2", "-p", "7", "-R", "ftree,updn", "-s",
                  "5", "-f", "x.log", "-r", "-B", "-e", "-a", "roots", "-u", "cns", "-o"});
  ASSERT_TRUE(a.status.ok()) << a.status.ToString();
  EXPECT_EQ(a.config.guid, Guid{0x0002c90300000011});
  EXPECT_EQ(a.config.lmc, 2);
  EXPECT_EQ(a.config.sm_priority, 7);
  EXPECT_EQ(a.config.routing_engine, "ftree,updn");
  EXPECT_EQ(a.config.sweep_interval, 5u);
  EXPECT_EQ(a.config.log_file, "x.log");
  EXPECT_TRUE(a.config.reassign_lids);
  EXPECT_TRUE(a.config.daemon);
  EXPECT_FALSE(a.config.accum_log_file);
  EXPECT_EQ(a.config.root_guid_file, "roots");
  EXPECT_EQ(a.config.cn_guid_file, "cns");
  EXPECT_TRUE(a.extras.once);
}

TEST(CommandLineTest, LongNamesAndAttachedValuesWorkAsWithGetopt) {
  auto a = Apply({"--lmc=3", "--priority", "1", "-l1", "-vv", "--log-file", "y.log",
                  "--routing_engine=minhop"});
  ASSERT_TRUE(a.status.ok()) << a.status.ToString();
  EXPECT_EQ(a.config.lmc, 1);  // the later flag wins
  EXPECT_EQ(a.config.sm_priority, 1);
  EXPECT_EQ(a.extras.verbosity, 2);
  EXPECT_EQ(a.config.log_flags, 0x0f);  // 0x03 -> 0x07 -> 0x0f, as OpenSM's -v
  EXPECT_EQ(a.config.log_file, "y.log");
  EXPECT_EQ(a.config.routing_engine, "minhop");
}

TEST(CommandLineTest, IbsmOwnFlagsFillTheExtrasAndOptions) {
  auto a = Apply({"--sim", "fat.topo", "--sim-host", "H1", "--state-db", "/tmp/s.db",
                  "--print-fabric", "--sim-ar-switches", "all", "--sim-sharp-switches", "none",
                  "--max-wire-smps", "16", "--transaction-timeout", "50",
                  "--transaction-retries", "0", "--version", "-h"});
  ASSERT_TRUE(a.status.ok()) << a.status.ToString();
  EXPECT_EQ(a.extras.sim_topology, "fat.topo");
  EXPECT_EQ(a.extras.sim_host, "H1");
  EXPECT_EQ(a.config.state_db_file, "/tmp/s.db");
  EXPECT_TRUE(a.extras.print_fabric);
  EXPECT_EQ(a.extras.sim_ar_switches, "all");
  EXPECT_EQ(a.extras.sim_sharp_switches, "none");
  EXPECT_EQ(a.config.max_wire_smps, 16u);
  EXPECT_EQ(a.config.transaction_timeout, 50u);
  EXPECT_EQ(a.config.transaction_retries, 0u);
  EXPECT_TRUE(a.extras.show_version);
  EXPECT_TRUE(a.extras.show_help);
}

TEST(CommandLineTest, CapitalVIsOpenSmsMaximumVerbosityNotVersion) {
  auto a = Apply({"-V"});
  ASSERT_TRUE(a.status.ok());
  EXPECT_EQ(a.config.log_flags, 0xff);
  EXPECT_TRUE(a.config.force_log_flush);
  EXPECT_FALSE(a.extras.show_version);
}

TEST(CommandLineTest, BadFlagsNameTheFlagAndTheAcceptedRange) {
  EXPECT_EQ(Apply({"-l", "9"}).status.message(), "-l: '9' is out of range 0..7");
  EXPECT_EQ(Apply({"--priority=16"}).status.message(), "--priority: '16' is out of range 0..15");
  EXPECT_EQ(Apply({"--max-wire-smps", "x"}).status.message(),
            "--max-wire-smps: 'x' is not a number in 0..65535");
  EXPECT_EQ(Apply({"-Z", "all"}).status.message(),
            "-Z: 'all' is not one of both, in, out, off");
  EXPECT_EQ(Apply({"-s"}).status.message(), "-s needs a value (SECONDS)");
  EXPECT_EQ(Apply({"--bogus"}).status.message(), "unknown option '--bogus' (see --help)");
  EXPECT_EQ(Apply({"-k"}).status.message(), "unknown option '-k' (see --help)");
  EXPECT_EQ(Apply({"--once=1"}).status.message(), "--once takes no value");
  EXPECT_EQ(Apply({"stray"}).status.message(), "unexpected argument 'stray' (see --help)");
  EXPECT_EQ(Apply({"-g", "0xZZ"}).status.code(), StatusCode::kInvalidArgument);
}

TEST(CommandLineTest, ConfigFileLoadsFirstAndFlagsOverrideItWherever) {
  char dir_tmpl[] = "/tmp/ibsm_cl_test.XXXXXX";
  ASSERT_NE(::mkdtemp(dir_tmpl), nullptr);
  const std::string path = std::string(dir_tmpl) + "/opensm.conf";
  ASSERT_TRUE(WriteFileAtomically(path, "lmc 1\nsm_priority 3\nsweep_interval 20\nbogus 1\n").ok());
  auto a = Apply({"-l", "2", "-F", path, "-s", "7"});
  ASSERT_TRUE(a.status.ok()) << a.status.ToString();
  EXPECT_EQ(a.config.lmc, 2);
  EXPECT_EQ(a.config.sm_priority, 3);
  EXPECT_EQ(a.config.sweep_interval, 7u);
  EXPECT_EQ(a.extras.config_file, path);
  ASSERT_EQ(a.extras.config_warnings.size(), 1u);
  EXPECT_EQ(a.extras.config_warnings[0].line, 4);

  ASSERT_TRUE(WriteFileAtomically(path, "lmc 8\n").ok());
  EXPECT_EQ(Apply({"--config", path}).status.message(),
            path + ":1: lmc: '8' is out of range 0..7");
  EXPECT_EQ(Apply({"-F", std::string(dir_tmpl) + "/none"}).status.code(), StatusCode::kNotFound);
  ::unlink(path.c_str());
  ::rmdir(dir_tmpl);
}

TEST(CommandLineTest, CreateConfigNamesTheFileToWrite) {
  auto a = Apply({"-c", "/tmp/out.conf", "-l", "1"});
  ASSERT_TRUE(a.status.ok());
  EXPECT_EQ(a.extras.create_config_file, "/tmp/out.conf");
  EXPECT_EQ(a.config.lmc, 1);
}

// Every flag of OpenSM 3.3.23's man page is accepted; the ones ibsm has no behaviour for are
// refused with what to do instead, never taken silently.
TEST(CommandLineTest, EveryOpenSmFlagIsAcceptedOrRefusedClearly) {
  auto a = Apply({"-J", "/run/opensm.pid", "-N", "--console", "off", "--console-port", "10000",
                  "-d0"});
  ASSERT_TRUE(a.status.ok()) << a.status.ToString();
  EXPECT_EQ(a.extras.pid_file, "/run/opensm.pid");
  EXPECT_TRUE(a.config.ignore_other_sm) << "-d 0 is OpenSM's 'ignore other SMs'";
  EXPECT_TRUE(a.config.no_partition_enforcement);
  EXPECT_TRUE(Apply({"-d", "2"}).config.force_log_flush);
  EXPECT_EQ(Apply({"--sm_sl", "3"}).config.sm_sl, 3) << "sm_sl acts (MasterSMSL)";
  // A flag whose option ibsm types but does not honour at that value is named, like a
  // config line (CONF-030).
  auto x = Apply({"-x"});
  ASSERT_TRUE(x.status.ok());
  ASSERT_EQ(x.extras.config_warnings.size(), 1u);
  EXPECT_EQ(x.extras.config_warnings[0].id, "CONF-030");
  EXPECT_EQ(x.extras.config_warnings[0].message.rfind(
                "-x: honor_guid2lid_file TRUE is not honoured by ibsm (it behaves as FALSE)", 0),
            0u)
      << x.extras.config_warnings[0].message;
  EXPECT_EQ(x.extras.config_not_honoured, 1u);
  for (const std::vector<std::string>& refused :
       {std::vector<std::string>{"-I"}, {"--inactive"}, {"--console", "local"}, {"-d", "3"},
        {"-z"}, {"-M", "m.dump"}, {"-U", "l.dump"}, {"-S", "sa.db"},
        {"-m", "ids"}, {"-i", "ign"}, {"-w", "hw"}, {"-O", "pso"}, {"--dimn_ports_file", "d"},
        {"--congestion_control"}, {"--cc_key", "0x5"},
        {"--log_prefix", "x"}, {"--torus_config", "t"}, {"--prefix_routes_file", "p"},
        {"--do_mesh_analysis"}, {"--lash_start_vl", "1"}, {"--nue_max_num_vls", "2"}}) {
    auto r = Apply(refused);
    EXPECT_EQ(r.status.code(), StatusCode::kInvalidArgument) << refused[0];
    EXPECT_NE(r.status.message().find("ibsm"), std::string::npos) << r.status.message();
  }
}

// -Q and -Y act as OpenSM's: qos TRUE and the QoS policy file (docs/qos.md).
TEST(CommandLineTest, QosFlagsSetQosAndThePolicyFile) {
  auto r = Apply({"-Q", "-Y", "/etc/ibsm/qos-policy.conf"});
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  EXPECT_TRUE(r.config.qos);
  EXPECT_EQ(r.config.qos_policy_file, "/etc/ibsm/qos-policy.conf");
}

TEST(CommandLineTest, UsageListsOpenSmAndIbsmFlags) {
  std::string u = CommandLineUsage();
  for (const char* s : {"-F, --config FILE", "-c, --create-config FILE", "-l, --lmc LMC",
                        "--sim FILE", "--state-db PATH", "-t, --timeout, --transaction-timeout MS"}) {
    EXPECT_NE(u.find(s), std::string::npos) << s;
  }
}

}  // namespace
}  // namespace ibsm::conf
