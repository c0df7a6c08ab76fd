// A record's top-level keys (results.jsonl) but the cell's own fields: the one table the writers
// (runner/record.cpp, the launchers, the cell and matrix runners, merge, `allocmark cell`) and every
// reader (results/record_identity.h, the results model, the runner's display, the history's
// validation) name them by. The cell's fields are ALLOCMARK_CELL_FIELDS' (cell.h), a phase's
// figures ALLOCMARK_PHASE_FIELDS' (fields.h); docs/results-schema.md says what each field means,
// and record/fields_test.cpp holds it to this table.
#pragma once

namespace allocmark::record {

// X(name, key, description): the constant, the key in the record, what it holds.
// kRecordSchemaVersionKey keeps its Key suffix: results::kRecordSchemaVersion is the version itself.
#define ALLOCMARK_RECORD_KEYS(X)                                                                                    \
  X(kRecordKey, "key", "allocator/workload/tT/rR/hash of what was run")                                             \
  X(kRecordAttempt, "attempt", "1, or 2 and up for a --retry-failed rerun")                                         \
  X(kRecordOrigin, "origin", "merged folders: the folder it was recorded in")                                       \
  X(kRecordRunId, "run_id", "the invocation that recorded it")                                                      \
  X(kRecordId, "record_id", "this record's own id (copies are one record)")                                         \
  X(kRecordHost, "host", "the machine it ran on")                                                                   \
  X(kRecordStatus, "status", "ok, failed, crashed, timeout")                                                        \
  X(kRecordError, "error", "why, for any status but ok; else null")                                                 \
  X(kRecordLibrary, "library", "the object that served malloc in the worker")                                       \
  X(kRecordAllocatorVersion, "allocator_version", "the allocator's own version string")                             \
  X(kRecordAllocatorOptions, "allocator_options", "option values read back from the allocator")                     \
  X(kRecordIdleRssBytes, "idle_rss_bytes", "worker RSS after setup, before the first phase")                        \
  X(kRecordIdleAllocStats, "idle_alloc_stats", "allocator statistics at that moment")                               \
  X(kRecordPinnedCpus, "pinned_cpus", "the CPU each workload thread was pinned to")                                 \
  X(kRecordPlacement, "placement", "the placement policy as run and what it gave")                                  \
  X(kRecordSchemaVersionKey, "schema_version", "the schema version the record was written under")                   \
  X(kRecordPeakRssBytes, "peak_rss_bytes", "the whole cell's peak RSS (for scripts)")                               \
  X(kRecordPeakLiveBytes, "peak_live_bytes", "the whole cell's peak live bytes (for scripts)")                      \
  X(kRecordFragmentationRatio, "fragmentation_ratio", "the whole cell's RSS above idle over live (for scripts)")    \
  X(kRecordTotals, "totals", "sums over the phases (for scripts)")                                                  \
  X(kRecordSampledPeakRssBytes, "sampled_peak_rss_bytes", "maximum of the parent's timeline samples")               \
  X(kRecordAllocStats, "alloc_stats", "allocator statistics after the last phase and teardown")                     \
  X(kRecordContention, "contention", "allocator lock counters at the end")                                          \
  X(kRecordPhases, "phases", "the phases in execution order")                                                       \
  X(kRecordTimeline, "timeline", "[[t_ms, rss_bytes], ...] sampled by the parent")                                  \
  X(kRecordWallS, "wall_s", "the whole cell, spawn to exit")                                                        \
  X(kRecordLog, "log", "the worker's stdout+stderr")                                                                \
  X(kRecordExitCode, "exit_code", "program cells: the exit status, or null")                                        \
  X(kRecordExitSignal, "exit_signal", "program cells: the signal that ended it, or null")                           \
  X(kRecordStdout, "stdout", "program cells: where its standard output is")                                         \
  X(kRecordStdoutBytes, "stdout_bytes", "program cells: the size of its standard output")                           \
  X(kRecordStdoutChecksum, "stdout_checksum", "program cells: FNV-1a of its standard output")                       \
  X(kRecordPhaseMarkErrors, "phase_mark_errors", "program cells: phase descriptor lines that were not phase NAME") \
  X(kRecordOutlivedBy, "outlived_by", "program cells: processes it left running, ended by the driver")

#define ALLOCMARK_RECORD_KEY_CONSTANT(name, key, description) inline constexpr const char* name = key;
ALLOCMARK_RECORD_KEYS(ALLOCMARK_RECORD_KEY_CONSTANT)
#undef ALLOCMARK_RECORD_KEY_CONSTANT

struct RecordKeySpec {
  const char* key;
  const char* description;
};

#define ALLOCMARK_RECORD_KEY_ROW(name, key, description) RecordKeySpec{key, description},
inline constexpr RecordKeySpec kRecordKeys[] = {ALLOCMARK_RECORD_KEYS(ALLOCMARK_RECORD_KEY_ROW)};
#undef ALLOCMARK_RECORD_KEY_ROW

}  // namespace allocmark::record
