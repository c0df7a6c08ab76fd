// What a results folder adds to the history: its cells read through the results model (the same
// reader, rules and errors as `show`), every metric of every phase with its repetitions, and the
// run's identity (run ids, machine, allocmark version) from meta.json. Also the checks of what
// the user says about the run (commit, time, testbed).
#pragma once

#include <string>
#include <vector>

#include "harness/history/store.h"

namespace allocmark::results {
class Model;
}

namespace allocmark::history {

// What the user says about the run; `time` and `testbed` may be empty (defaults below).
struct RunLabels {
  std::string commit, branch = "main", time, testbed;
};

struct FolderRun {
  RunInfo run;
  std::vector<CellRun> cells;
  std::size_t values = 0;
  std::size_t cells_not_ok = 0;  // failed, crashed or timed-out cells: no figures to keep
};

// The ok cells of a results model with every metric of every phase, repetitions numbered 0.. in the
// order of their rep: what a folder adds to the history, and what BMF (bmf.h) is written from.
struct ModelCells {
  std::vector<CellRun> cells;
  std::size_t values = 0;
  std::size_t cells_not_ok = 0;
};
ModelCells model_cells(const results::Model& model);

// Reads DIR as `show` does (ResultsError for a bad folder) and refuses one a run is writing now.
// Throws HistoryError for a bad commit or time. Labels' defaults: time, the commit's date when the
// current folder is a git repository that has it, else now; testbed, this machine's host name.
FolderRun read_folder_run(const std::string& dir, const RunLabels& labels);

// "" when `commit` looks like a commit (7 to 40 hex digits), else what is wrong, for `flag`.
std::string commit_problem(const std::string& commit, const std::string& flag);

// ISO 8601 ("2026-12-06", "2026-12-06T18:55:00", with Z or +01:00) as UTC "2026-12-06T17:55:00Z";
// throws HistoryError naming `flag` for anything else.
std::string normalise_time(const std::string& text, const std::string& flag);

// A field of `commit` as `git show -s --format=FORMAT` gives it in the current folder's git
// repository ("%cI": its committer date, "%s": its subject), "" where there is no repository, no
// such commit or no git.
std::string commit_field(const std::string& commit, const std::string& format);

// The cell of a series: the record's key without its repetition (allocator/workload/tT/HASH).
std::string series_cell_id(const std::string& key, int threads, int rep);

}  // namespace allocmark::history
