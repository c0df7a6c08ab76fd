// A results folder: results.jsonl (one object per finished cell, appended and flushed as each
// ends: the source of truth), summary.csv (one row per cell and phase) and summary.json (medians
// and spreads per group), both rewritten from the jsonl by the results model, meta.json (machine
// and matrix), logs/ (each worker's stdout and stderr); every name is in folder_layout.h.
#pragma once

#include <nlohmann/json.hpp>

#include <map>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "harness/results/folder.h"
#include "harness/results/record_identity.h"

namespace allocmark::results {

// How a run opens its folder.
struct OpenOptions {
  bool resume = false;           // the folder may hold results of the same matrix: complete it
  bool extend = false;           // the folder may hold results of another matrix: add cells to it
  bool discard_corrupt = false;  // move invalid lines to results.corrupt.jsonl instead of refusing
  std::string command;           // the command line, for the lock's holder description
};

// One cell already in results.jsonl (the highest attempt of its key).
struct RecordedCell {
  RecordIdentity identity;  // the attempt that counts
  std::size_t line = 0;       // 1-based line in results.jsonl
};

// The folder a run writes. Opening it takes an exclusive lock (flock on DIR/.allocmark.lock) held
// until destruction: a second run into the same folder fails at once, naming the holder. The lock's
// descriptor is inherited by the run's workers, so a worker that outlived its driver still holds
// the folder. Every record is appended whole or not at all. Everything inside the folder is reached
// through its descriptor without following links (folder.h): the folder may be someone else's.
class ResultsDir {
 public:
  // Creates the folder. Refuses, before changing anything, a folder where a link (or anything but a
  // file or folder of the right kind) stands in place of one of the run's own entries or inside
  // logs/, parts/, slurm/, machines/ or data/. Refuses a folder that already holds results unless
  // resume or extend; then scans results.jsonl: a last line cut short by a dying driver is dropped,
  // any other invalid line stops the open (ResultsError naming the lines) unless discard_corrupt.
  ResultsDir(std::string path, const OpenOptions& options);
  ~ResultsDir();
  ResultsDir(const ResultsDir&) = delete;
  ResultsDir& operator=(const ResultsDir&) = delete;

  const std::string& path() const { return path_; }
  // Whether the folder held anything of an earlier run when opened: recorded cells, records not yet
  // gathered from parts/, or cells submitted to a batch scheduler (slurm/).
  bool had_results() const { return had_results_; }
  const std::map<std::string, RecordedCell>& recorded() const { return recorded_; }
  // Notes from the scan (duplicate keys, discarded lines) for the user.
  const std::vector<std::string>& notes() const { return notes_; }
  // Appends one record as one line, flushed and fsync'ed before returning. On any failure (a full
  // disk) the file is cut back to its previous length and ResultsError is thrown.
  void append(const nlohmann::json& record);
  // meta.json as recorded, or null when the folder has none.
  nlohmann::json read_meta() const;
  void write_meta(const nlohmann::json& meta) const;

 private:
  // Throws ResultsError naming the first misplaced entry.
  void refuse_misplaced_entries() const;
  void lock(const std::string& command);
  void scan(bool discard_corrupt);
  // Appends the records in parts/ that results.jsonl lacks (a later attempt than the one it holds)
  // and removes every part file whose record results.jsonl now holds.
  void gather_parts();

  // Closed on destruction, also when the constructor throws after locking.
  struct OwnedFd {
    int fd = -1;
    ~OwnedFd();
  };

  std::string path_;
  Folder folder_;
  OwnedFd lock_;
  std::map<std::string, RecordedCell> recorded_;
  bool had_results_ = false;
  std::vector<std::string> notes_;
};

// Records finished on other hosts by a batch executor's tasks (`allocmark cell --record`), one whole
// record per file: DIR/parts/SUBMISSION/N.json, sorted. The driver gathers them into results.jsonl;
// readers (the model) also read those not gathered yet. Links there are never read (a run refuses
// the folder; a reader leaves them out).
std::vector<std::string> part_files(const std::string& dir);

// Where a batch executor keeps its submissions (DIR/slurm/s1, s2, ...), sorted; links left out.
std::vector<std::string> submission_dirs(const std::string& dir);

// Whether a run is writing a results folder now (it holds DIR/.allocmark.lock), and who: readers
// (status, report, baseline, merge) say so rather than give a partial answer as if it were whole.
struct FolderWriter {
  bool active = false;
  std::string holder;  // the lock file's text: "pid P on host H, started T: COMMAND"
  long pid = 0;        // P, 0 when the text does not say
};
FolderWriter folder_writer(const std::string& dir);

}  // namespace allocmark::results
