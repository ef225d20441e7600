#include "base/version.h"

#include "ibsm_version.h"

namespace ibsm {

std::string_view Version() { return IBSM_VERSION; }
std::string_view Commit() { return IBSM_COMMIT; }

std::string VersionLine(std::string_view program) {
  std::string out(program);
  out += ' ';
  out += Version();
  out += " (commit ";
  out += Commit();
  out += ')';
  return out;
}

}  // namespace ibsm
