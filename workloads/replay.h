// The replay workload's hooks for its tests (workloads/replay.cpp; docs/workloads/replay.md).
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "workloads/workload.h"

namespace allocmark::workloads::replay {

// The workload's name; a matrix's [traces.NAME] tables are cells of it (harness/matrix/config.h).
inline constexpr const char* kWorkloadName = "replay";

// How long a free or realloc waits for another thread to allocate its block before the cell fails
// (default 10 s); tests shorten it.
void set_wait_limit_ms(int64_t ms);
// Blocks a replay holds now (its id table's non-empty entries); 0 after teardown().
uint64_t live_blocks(const Workload& replay);

// A replay cell is its trace's contents, not its path: the plan calls this once per replay
// parameter set, which makes `trace` absolute and sets `trace_sha256` to the file's SHA-256, so
// the cell key, meta.json's matrix (--resume's "the matrix differs") and every record carry it. A
// file that is not a readable regular file throws units::InputFileError naming replay.trace; an
// empty `trace` is left for validate() to name. The worker refuses a file whose digest moved since.
void pin_trace(std::map<std::string, ParamValue>& values);

}  // namespace allocmark::workloads::replay
