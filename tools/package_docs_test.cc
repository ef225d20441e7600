#include "tools/package_docs.h"

#include <set>
#include <sstream>
#include <string>

#include <gtest/gtest.h>

#include "conf/sm_config.h"

namespace ibsm::tools {
namespace {

TEST(PackageDocsTest, RoffEscapeKeepsTextLiteral) {
  EXPECT_EQ(RoffEscape("--socket PATH"), "\\-\\-socket PATH");
  EXPECT_EQ(RoffEscape("a\\b"), "a\\eb");
  // A line starting with a dot or a quote would be a roff request.
  EXPECT_EQ(RoffEscape(".hidden"), "\\&.hidden");
  EXPECT_EQ(RoffEscape("'quoted'"), "\\&'quoted'");
  EXPECT_EQ(RoffEscape("mid.dot"), "mid.dot");
}

// Every line that starts a request is one the generator means to write: text from a table
// (a help string or comment starting with '.') never becomes a roff request.
TEST(PackageDocsTest, EveryRequestLineInThePagesIsAManMacro) {
  const std::set<std::string> macros = {".TH", ".SH", ".SS", ".TP", ".PP", ".nf", ".fi",
                                        ".br", ".B",  ".BR", ".nh", ".ad", ".\\\""};
  for (const std::string& page :
       {IbsmdManPage("2026-01-01"), IbsmctlManPage("2026-01-01"), IbsmConfManPage("2026-01-01"),
        UsageManPage("ibsm-topogen", "write fabrics", ".odd\n'usage\n", "2026-01-01")}) {
    std::istringstream in(page);
    for (std::string line; std::getline(in, line);) {
      if (line.empty() || (line[0] != '.' && line[0] != '\'')) continue;
      const std::string request = line.substr(0, line.find(' '));
      EXPECT_EQ(macros.count(request), 1u) << line;
    }
  }
}

TEST(PackageDocsTest, ThePackagedConfigReadsBackAsTheDefaultsButForTheLogAndDumps) {
  auto load = conf::ParseConfig(PackagedConfigText(), "ibsm.conf");
  ASSERT_TRUE(load.ok()) << load.status().ToString();
  EXPECT_TRUE(load->warnings.empty());
  EXPECT_EQ(load->config, PackagedConfig());
  conf::SmConfig c = load->config;
  EXPECT_EQ(c.log_file, "/var/log/ibsm/ibsmd.log");
  EXPECT_EQ(c.dump_files_dir, "/var/log/ibsm/");
  c.log_file = conf::SmConfig{}.log_file;
  c.dump_files_dir = conf::SmConfig{}.dump_files_dir;
  EXPECT_EQ(c, conf::SmConfig{});
}

TEST(PackageDocsTest, TheConfPageDescribesEveryOptionWithItsDefault) {
  const std::string page = IbsmConfManPage("2026-01-01");
  const conf::SmConfig defaults;
  for (const conf::OptionDesc& d : conf::OptionTable()) {
    const std::string tag = "\\fB" + RoffEscape(d.name) + "\\fR";
    const size_t at = page.find(".TP\n" + tag);
    ASSERT_NE(at, std::string::npos) << d.name;
    if (!d.alias_of.empty()) continue;
    const size_t next = page.find(".TP\n", at + 1);
    EXPECT_NE(page.substr(at, next - at).find("Default: " +
                                              RoffEscape(conf::OptionValueText(defaults, d))),
              std::string::npos)
        << d.name;
  }
}

}  // namespace
}  // namespace ibsm::tools
