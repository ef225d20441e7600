// The version and commit this binary was built from (cmake/version.cmake writes them at
// build time), for --version and the start-up banner.
#pragma once

#include <string>
#include <string_view>

namespace ibsm {

std::string_view Version();  // the project version, "0.1.0"
std::string_view Commit();   // git's short hash, "-dirty" if the tree had changes, or "unknown"

// "<program> 0.1.0 (commit 1a2b3c4d5e6f)": what --version prints.
std::string VersionLine(std::string_view program);

}  // namespace ibsm
