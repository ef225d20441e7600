// ibsm-routecheck: verifies, checks for credit loops and measures the quality of forwarding
// tables from an engine chain or from OpenSM's LFT dump (see tools/routecheck.h).
#include <iostream>

#include "tools/routecheck.h"

int main(int argc, char** argv) {
  return ibsm::tools::RouteCheckMain(argc, argv, std::cout, std::cerr);
}
