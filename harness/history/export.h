// The whole of a history as one JSON document (`allocmark history export DB --format json`;
// docs/history.md "history export"): every run with its labels, machine and the values of each of
// its cells, every cell's identity. Lossless (what the file holds, nothing computed) and stable: an
// ordering that does not depend on insertion order where the content is the same, fields only ever
// added, so another tool can read it or keep it under version control.
//
// The same runs as lines (`--format jsonl`): one run a line, each cell with its identity, so a line
// stands alone; a history kept under version control (ci/baselines/gate-matrix.history.jsonl) then
// grows by one line a run and two branches' lines merge as lines. import.h reads both shapes back.
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "harness/history/store.h"

namespace allocmark::history {

inline constexpr int kExportFormat = 1;

// The export's keys, one spelling that export.cpp writes and import.cpp reads by: a document's,
// a run's and a cell's (identity, then what the run measured of it). docs/history.md describes them.
namespace export_key {
inline constexpr const char kFormat[] = "allocmark_history_export";  // the format's number, first
inline constexpr const char kHistory[] = "history";                  // the document: the DB's path
inline constexpr const char kSchemaVersion[] = "schema_version";
inline constexpr const char kCells[] = "cells";
inline constexpr const char kRuns[] = "runs";
// A run.
inline constexpr const char kCommit[] = "commit";
inline constexpr const char kBranch[] = "branch";
inline constexpr const char kTime[] = "time";
inline constexpr const char kTestbed[] = "testbed";
inline constexpr const char kMachineFingerprint[] = "machine_fingerprint";
inline constexpr const char kMachine[] = "machine";
inline constexpr const char kRunIds[] = "run_ids";
inline constexpr const char kAllocmarkVersion[] = "allocmark_version";
inline constexpr const char kAdded[] = "added";
// A cell: its identity, then a run's figures of it.
inline constexpr const char kCell[] = "cell";
inline constexpr const char kAllocator[] = "allocator";
inline constexpr const char kBackend[] = "backend";
inline constexpr const char kWorkload[] = "workload";
inline constexpr const char kThreads[] = "threads";
inline constexpr const char kParamsDigest[] = "params_digest";
inline constexpr const char kParams[] = "params";
inline constexpr const char kAllocatorVersion[] = "allocator_version";
inline constexpr const char kLibrary[] = "library";
inline constexpr const char kValues[] = "values";  // {phase: {metric: [repetition 0, 1, ...]}}
}  // namespace export_key

// `metrics` empty: every metric; else only those metrics' values (the cells and runs all stay).
nlohmann::ordered_json export_json(const HistoryDb& db, const std::vector<std::string>& metrics = {});

// One line per run, in export_json's run order, each a JSON object (compact) ending in "\n".
std::string export_lines(const HistoryDb& db, const std::vector<std::string>& metrics = {});

}  // namespace allocmark::history
