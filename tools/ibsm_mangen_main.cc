// ibsm-mangen: writes the man pages ibsmd.8, ibsmctl.8, ibsm.conf.5 and the packaged
// ibsm.conf into a directory, from the tables the programs read (tools/package_docs.h); with
// --usage, a section 1 page from a program's --help text read on stdin. Run at build time;
// not installed.
//
//   ibsm-mangen --date YYYY-MM-DD OUTDIR
//   PROGRAM --help | ibsm-mangen --date YYYY-MM-DD --usage PROGRAM SUMMARY OUTFILE
#include <cstdio>
#include <iostream>
#include <iterator>
#include <string>
#include <utility>
#include <vector>

#include "conf/text_file.h"
#include "tools/package_docs.h"

namespace {

int Write(const std::string& path, const std::string& text) {
  if (ibsm::Status s = ibsm::conf::WriteFileAtomically(path, text); !s.ok()) {
    std::fprintf(stderr, "ibsm-mangen: %s: %s\n", path.c_str(), s.message().c_str());
    return 1;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.size() == 6 && args[0] == "--date" && args[2] == "--usage") {
    std::string usage((std::istreambuf_iterator<char>(std::cin)), std::istreambuf_iterator<char>());
    if (usage.empty()) {
      std::fprintf(stderr, "ibsm-mangen: no usage text on stdin\n");
      return 1;
    }
    return Write(args[5], ibsm::tools::UsageManPage(args[3], args[4], usage, args[1]));
  }
  if (args.size() != 3 || args[0] != "--date") {
    std::fprintf(stderr,
                 "usage: ibsm-mangen --date YYYY-MM-DD OUTDIR\n"
                 "       PROGRAM --help | ibsm-mangen --date YYYY-MM-DD --usage PROGRAM SUMMARY "
                 "OUTFILE\n");
    return 1;
  }
  const std::string& date = args[1];
  const std::string& dir = args[2];
  const std::pair<const char*, std::string> files[] = {
      {"ibsmd.8", ibsm::tools::IbsmdManPage(date)},
      {"ibsmctl.8", ibsm::tools::IbsmctlManPage(date)},
      {"ibsm.conf.5", ibsm::tools::IbsmConfManPage(date)},
      {"ibsm.conf", ibsm::tools::PackagedConfigText()},
  };
  for (const auto& [name, text] : files)
    if (Write(dir + "/" + name, text) != 0) return 1;
  return 0;
}
