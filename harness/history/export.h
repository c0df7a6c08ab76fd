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

// `metrics` empty: every metric; else only those metrics' values (the cells and runs all stay).
nlohmann::ordered_json export_json(const HistoryDb& db, const std::vector<std::string>& metrics = {});

// One line per run, in export_json's run order, each a JSON object (compact) ending in "\n".
std::string export_lines(const HistoryDb& db, const std::vector<std::string>& metrics = {});

}  // namespace allocmark::history
