// The replay workload's hooks for its tests (workloads/replay.cpp; docs/workloads/replay.md).
#pragma once

#include <cstdint>

#include "workloads/workload.h"

namespace allocmark::workloads::replay {

// The workload's name; a matrix's [traces.NAME] tables are cells of it (harness/matrix/config.h).
inline constexpr const char* kWorkloadName = "replay";

// How long a free or realloc waits for another thread to allocate its block before the cell fails
// (default 10 s); tests shorten it.
void set_wait_limit_ms(int64_t ms);
// Blocks a replay holds now (its id table's non-empty entries); 0 after teardown().
uint64_t live_blocks(const Workload& replay);

}  // namespace allocmark::workloads::replay
