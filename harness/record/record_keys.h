// A record's top-level keys that say which cell it is, which attempt, where it came from and how it
// ended: the names the writers (runner/record.cpp, the cell runner, the matrix runner, merge) and
// every reader (results/record_identity.h, the results model) share. The cell's own fields are
// ALLOCMARK_CELL_FIELDS' (cell.h), a phase's figures ALLOCMARK_PHASE_FIELDS' (fields.h);
// docs/results-schema.md says what each field means.
#pragma once

namespace allocmark::record {

inline constexpr const char* kRecordKey = "key";          // allocator/workload/tT/rR/hash of what was run
inline constexpr const char* kRecordAttempt = "attempt";  // 1, or 2 and up for a --retry-failed rerun
inline constexpr const char* kRecordOrigin = "origin";    // merged folders: the folder it was recorded in
inline constexpr const char* kRecordHost = "host";        // the machine it ran on
inline constexpr const char* kRecordStatus = "status";    // ok, failed, crashed, timeout
inline constexpr const char* kRecordId = "record_id";     // this record's own id (copies are one record)

}  // namespace allocmark::record
