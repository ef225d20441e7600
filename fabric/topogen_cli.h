// Command-line front end of the generators, mirroring the reference generator gen_topology.py:
//   topogen ftree2 -k K [--oversub R] [--hosts-per-leaf H] [--leaves L]
//   topogen ftree3 -k K [--pods P | --scale F]
//   topogen rail -k K --servers N --rails R [--rail-mode planes|superpod]
//   topogen random --switches N -k K --hosts-per-switch H [--links M]
// and for any topology: --drop-links N --seed S, --width W, --speed SDR..HDR,
// -o FILE (default stdout), --roots FILE (top-tier switch GUIDs for `opensm -a`).
// Options accept both "--opt value" and "--opt=value".
#pragma once

namespace ibsm {

// Returns the process exit status: 0 on success, 2 on a usage error, 1 on other failures.
// Writes the net file to -o or stdout, a one-line summary and any errors to stderr.
int TopoGenMain(int argc, char** argv);

}  // namespace ibsm
