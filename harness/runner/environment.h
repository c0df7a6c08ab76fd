// The environment a worker starts with: the driver's own, minus every variable any supported
// allocator reads (so nothing the driver inherited steers a cell), plus the variant's settings.
#pragma once

#include <string>
#include <vector>

#include "harness/matrix/plan.h"

namespace allocmark::runner {

std::vector<std::string> worker_environment(const matrix::ResolvedAllocator& allocator);

// NAME=value entries of the driver's environment that worker_environment() leaves out.
std::vector<std::string> stripped_environment();

}  // namespace allocmark::runner
