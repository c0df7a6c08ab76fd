// The environment a worker starts with: the driver's own, minus every variable any supported
// allocator reads (so nothing the driver inherited steers a cell), plus the variant's settings.
#pragma once

#include <string>
#include <vector>

#include "harness/matrix/plan.h"

namespace allocmark::runner {

std::vector<std::string> worker_environment(const matrix::ResolvedAllocator& allocator);

// The cell's transparent-huge-page mode (the thp axis) as spawn options: `never` disables THP for
// its process; the machine's own mode needs nothing; another mode (a host whose mode differs from
// the one the plan was checked on: a Slurm node) makes the cell fail, saying both.
void apply_thp_mode(const matrix::ResolvedAllocator& allocator, struct SpawnOptions& options);

// NAME=value entries of the driver's environment that worker_environment() leaves out.
std::vector<std::string> stripped_environment();

}  // namespace allocmark::runner
