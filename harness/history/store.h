// The results history (issue 44; docs/history.md): one SQLite file that holds the cells of many
// results folders, each added under the commit it measured, so a metric of a cell phase can be read
// as a series over commits. The store only keeps and reads figures; what a series means (change
// points, creep) is decided elsewhere from series().
//
// A history file travels between teams and CI jobs, so it is data, never code: statements are
// parameterised, extensions cannot load, a file with triggers or views is refused, and a file that is
// not allocmark's history (another SQLite database, a text file, a newer schema) is refused before
// anything is written to it.
#pragma once

#include <nlohmann/json.hpp>

#include <cstddef>
#include <stdexcept>
#include <string>
#include <vector>

#include "harness/history/changepoints.h"  // SeriesPoint: a series is read in the shape change points take

struct sqlite3;

namespace allocmark::history {

// A history file that cannot be used as asked (not a history, a newer schema, a failed write):
// bad input, exit 2. The message names the file.
struct HistoryError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// The schema this allocmark writes (PRAGMA user_version). A file at a lower version is migrated
// on the first write; one at a higher version is refused.
int schema_version();

// One run of a results folder as it is added: where it comes from and every value.
struct RunInfo {
  std::string commit, branch, time;  // time: ISO 8601 UTC, "2026-12-06T18:55:00Z" (orders the series)
  std::string testbed;               // the machine's name for the team (default: its host name)
  std::string machine_fingerprint;   // digest of what makes two machines' figures comparable
  std::string machine_json;          // meta.json's machine description, as recorded
  std::string run_ids;               // the folder's run ids (meta.json runs[]), sorted, comma-joined
  std::string allocmark_version;     // of the allocmark that wrote the folder
  std::string added;                 // when it entered a history; "" = now (an import keeps the file's)
};

// A cell as a series knows it: every repetition of one configuration (Cell::key without its rep).
struct CellInfo {
  std::string cell_id;  // allocator/workload/tT/HASH
  std::string allocator, backend, workload, params_digest, params_json;
  int threads = 0;
};

struct Value {
  std::string phase, metric;
  int repetition = 0;
  double value = 0;
};

// What one run says about one cell: its repetitions' values and what served malloc.
struct CellRun {
  CellInfo cell;
  std::string allocator_version, library;
  std::vector<Value> values;
};

// A commit as a branch and testbed saw it: its place among their commits (0 = oldest) and its time.
struct CommitInfo {
  std::size_t index = 0;
  std::string commit, time;
};

// One series: a metric of a cell phase on one branch and testbed.
struct SeriesKey {
  CellInfo cell;
  std::string phase, metric, branch, testbed;
};

// Which series series_keys() lists; an empty field keeps every value.
struct SeriesFilter {
  std::vector<std::string> metrics;
  std::string workload;
};

class HistoryDb {
 public:
  enum class Mode { read, write };
  // Opens (write: creates and migrates) the history at `path`. Throws HistoryError naming the file
  // for a missing file (read), one that is not an SQLite database or not allocmark's history, or
  // one written by a newer allocmark (both versions named); such a file is left as it was.
  HistoryDb(const std::string& path, Mode mode);
  ~HistoryDb();
  HistoryDb(const HistoryDb&) = delete;
  HistoryDb& operator=(const HistoryDb&) = delete;

  const std::string& path() const { return path_; }
  int version() const;

  // Adds a run and its cells in one transaction (a crash leaves the file as it was). False, and
  // nothing written, when a run with the same run ids, commit and testbed is there already.
  bool add_run(const RunInfo& run, const std::vector<CellRun>& cells);

  std::size_t run_count() const;
  std::vector<SeriesKey> series_keys(const SeriesFilter& filter = {}) const;
  // The series in commit order (oldest first), one point per commit that has values of the metric
  // (runs of one commit pooled, every repetition kept): find_change_points' input as it is.
  std::vector<SeriesPoint> series(const std::string& cell_id, const std::string& phase, const std::string& metric,
                                  const std::string& branch, const std::string& testbed) const;
  // Every commit of the branch and testbed in the same order, with or without values: where a
  // series' points sit on the commit axis (gaps stay visible) and when each was made.
  std::vector<CommitInfo> commits(const std::string& branch, const std::string& testbed) const;

  sqlite3* handle() const { return db_; }  // for tests that inspect the file

 private:
  void check_is_history(bool writable);
  void migrate();
  std::string path_;
  sqlite3* db_ = nullptr;
};

// The free form of HistoryDb::series, as the change-point code reads it.
std::vector<SeriesPoint> series(const HistoryDb& db, const std::string& cell_id, const std::string& phase,
                                const std::string& metric, const std::string& branch, const std::string& testbed);

}  // namespace allocmark::history
