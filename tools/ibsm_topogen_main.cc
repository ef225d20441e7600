// ibsm-topogen: writes ibsim/ibnetdiscover topology files (fat trees, rails, random graphs,
// degraded variants) with the same names and GUIDs as the reference generator gen_topology.py.
#include "fabric/topogen_cli.h"

int main(int argc, char** argv) { return ibsm::TopoGenMain(argc, argv); }
