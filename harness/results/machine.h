// What the results of a run depend on besides the allocator: kernel, CPU, NUMA layout, THP and
// overcommit modes, glibc. Read once per run by the driver, written to meta.json.
#pragma once

#include <nlohmann/json.hpp>

namespace allocmark::results {

nlohmann::json machine_info();

}  // namespace allocmark::results
