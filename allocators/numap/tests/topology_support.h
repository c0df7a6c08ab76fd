// Test support: numap's Topology from the project's one topology format (harness/topology,
// configs/topologies/*.toml), so numap's unit tests run on the same machines as the harness and
// the lab instead of hand-typed matrices. Test code only: the preloaded library never links the
// harness (it reads sysfs itself, without allocating).
#pragma once

#include <string>

#include "allocators/numap/topology.h"
#include "harness/topology/topology.h"

namespace numap::testing {

Topology from_shared(const allocmark::topology::Topology& shared);

// configs/topologies/<name>.toml of the source tree, converted.
Topology load_config(const std::string& name);

}  // namespace numap::testing
