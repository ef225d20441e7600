// Writer for ibnetdiscover / ibsim net files, in the layout of
// the reference generator gen_topology.py, so that ibsim 0.10 loads the result without warnings
// and ReadTopology() gives back the same fabric.
//
// Contract:
// - The first record is the first CA in node-id order (ibsim attaches clients, hence the
//   SM, to the first node of the file), then every switch, then the other CAs and routers,
//   each group in node-id order.
// - Every record is preceded by its GUID line (switchguid=/caguid=/rtguid=), plus
//   `vendid=` when non-zero, `devid=` when it changes and `sysimgguid=` when it differs from
//   the node GUID, so the reader restores them. CA/router port lines carry their port GUID.
// - Every port line ends in `lid L <width>x<speed>` (the remote end's LID, this port's rate).
//   Only cabled ports are written.
// - '=', '"', '#', '@' and control characters in names and descriptions are replaced by
//   '_' since ibsim cannot read them; only then is the round trip lossy.
#pragma once

#include <string>

#include "fabric/fabric.h"

namespace ibsm {

std::string WriteTopology(const Fabric& fabric);

}  // namespace ibsm
