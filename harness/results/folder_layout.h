// The names inside a results folder, defined once: the folder's own entries and each cell's files.
// Every writer (the runner, the Slurm executor, `allocmark cell`) and every reader (the report,
// the output-file checks) takes its names from here.
#pragma once

#include <string>
#include <vector>

#include "harness/results/folder.h"

namespace allocmark::results::layout {

inline constexpr const char* kResults = "results.jsonl";           // one record per finished cell
inline constexpr const char* kCorrupt = "results.corrupt.jsonl";   // lines moved out by --discard-corrupt-lines
inline constexpr const char* kMeta = "meta.json";                  // machine, matrix, runs
inline constexpr const char* kSummaryCsv = "summary.csv";
inline constexpr const char* kSummaryJson = "summary.json";
inline constexpr const char* kTimelines = "timelines.jsonl";       // each kept cell's RSS timeline, for the charts
inline constexpr const char* kCells = "cells.json";                // every cell any run planned: key -> label
inline constexpr const char* kLock = ".allocmark.lock";
inline constexpr const char* kLogs = "logs";                       // each cell's log (and a program's stdout)
inline constexpr const char* kParts = "parts";                     // records finished by batch tasks: parts/SUB/N.json
inline constexpr const char* kSlurm = "slurm";                     // batch submissions: slurm/sN/{cells/,job.sh,...}
inline constexpr const char* kData = "data";                       // each cell's data folder while it runs
inline constexpr const char* kMachines = "machines";               // HOST.json per batch node
// Inside a submission slurm/sN: the cell descriptions a task runs, cells/I.json (`allocmark cell`),
// the index of its cells (key -> task), the array's script and its job id.
inline constexpr const char* kSubmissionCells = "cells";
inline constexpr const char* kSubmissionIndex = "cells.json";
inline constexpr const char* kJobScript = "job.sh";
inline constexpr const char* kJobId = "job_id";
// Written into a folder on request, not by a run: the page `allocmark report` writes by default and
// the folder `allocmark plot` draws into by default.
inline constexpr const char* kReport = "report.html";
inline constexpr const char* kCharts = "charts";

// DIR/NAME for one of the names above.
std::string path_in(const std::string& dir, const char* name);

struct OwnEntry {
  const char* name;
  Folder::Type type;
};
// Everything a run writes at the top of its folder, with what it must be. Pages and baselines
// written into a folder (report.html) are not among them.
const std::vector<OwnEntry>& own_entries();
bool is_own_entry(const std::string& name);

// A cell's files, relative to the results folder. `stem` is the key made a safe file name (anything
// but letters, digits, '.' and '-' becomes '_'; a very long key is shortened and keeps a hash of
// the whole), with ".attemptN" for a rerun.
struct CellFiles {
  std::string stem;
  std::string log;          // logs/STEM.log: the worker's (or program's) stdout and stderr
  std::string stdout_file;  // logs/STEM.stdout: a program cell's standard output
  std::string data;         // data/STEM.data: the cell's data folder
};
CellFiles cell_files(const std::string& key, int attempt = 1);

// The same names for a cell known by its log's path only (`allocmark cell` is given the log).
std::string log_stem(const std::string& log_path);
std::string stdout_beside(const std::string& log_path);
std::string data_folder_name(const std::string& log_path);  // STEM.data, inside the data root

}  // namespace allocmark::results::layout
