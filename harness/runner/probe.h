// Pre-run checks of allocator libraries: each is preloaded once into a worker that only reports
// which library serves malloc, the allocator's version and its effective options. Bounded in time:
// a library that hangs while loading is reported, never waited on for ever.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "harness/matrix/plan.h"

namespace allocmark::runner {

constexpr double kDefaultProbeTimeoutS = 30;

// {"library","version","options"} or {"error": "..."} (also for a timeout).
nlohmann::json probe_allocator(const matrix::ResolvedAllocator& allocator, const std::string& worker_path,
                               double timeout_s = kDefaultProbeTimeoutS);

// Every backend in the catalogue with its library, version and availability (for `list` and
// meta.json).
nlohmann::json describe_backends(const std::string& worker_path);

}  // namespace allocmark::runner
