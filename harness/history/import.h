// `allocmark history import DB FILE` (docs/history.md "history import"): what `history export`
// wrote, read back into a history. Either shape: the JSON document (`--format json`) or its lines
// (`--format jsonl`, one run a line, the shape a history under version control is kept in,
// ci/baselines/gate-matrix.history.jsonl). Every run keeps what the file says of it, `added`
// included, so exporting the imported history gives the same lines back.
//
// The file is data from anywhere: every field is checked before anything is written, and a bad one
// is a HistoryError naming the file, the line (or run) and the field. A run the history holds
// already (the same run ids, commit and testbed) is skipped, so importing twice, or a file whose
// lines a union merge doubled, adds each run once.
#pragma once

#include <string>
#include <vector>

#include "harness/history/store.h"

namespace allocmark::history {

struct ImportedRun {
  RunInfo run;
  std::vector<CellRun> cells;
};

// The runs `text` (the contents of `name`) holds, checked; throws HistoryError on the first problem.
std::vector<ImportedRun> read_export(const std::string& text, const std::string& name);

struct ImportCounts {
  std::size_t added = 0, held = 0;  // held: the history had the run already
};

ImportCounts import_runs(HistoryDb& db, const std::vector<ImportedRun>& runs);

}  // namespace allocmark::history
