// A results folder: results.jsonl (one object per finished cell, appended and flushed as each
// ends: the source of truth), summary.csv (one row per cell and phase) and summary.json (medians
// and spreads per group), both rewritten from the jsonl by the results model, meta.json (machine
// and matrix), logs/ (each worker's stdout and stderr).
#pragma once

#include <nlohmann/json.hpp>

#include <set>
#include <stdexcept>
#include <string>
#include <vector>

namespace allocmark::results {

class ResultsError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class ResultsDir {
 public:
  // Creates the folder. Refuses a folder that already holds results unless `resume`; on resume,
  // a last line cut short by a crash of the driver is dropped so the file stays valid JSONL.
  ResultsDir(std::string path, bool resume);
  const std::string& path() const { return path_; }
  std::string log_dir() const { return path_ + "/logs"; }
  // Keys of the cells already recorded (any status).
  const std::set<std::string>& done_keys() const { return done_; }
  // Appends one record, flushed and fsync'ed before returning.
  void append(const nlohmann::json& record);
  void write_meta(const nlohmann::json& meta) const;
  // summary.csv and summary.json from results.jsonl (reporters/reporter.h write_summaries).
  void write_summaries() const;
  // The former name, kept until the driver calls write_summaries(); writes both files too.
  void write_summary_csv() const { write_summaries(); }

 private:
  std::string path_;
  std::set<std::string> done_;
};

// Every valid record of DIR/results.jsonl, in file order; throws ResultsError if there is none.
// Holds every record (timelines included) in memory: readers use the results model (model.h).
std::vector<nlohmann::json> load_records(const std::string& dir);

// Writes `text` to a temporary file beside `path` and renames it over `path`, so a reader sees
// the old file or the new one, never half of one. Throws ResultsError.
void write_file_atomically(const std::string& path, const std::string& text);

}  // namespace allocmark::results
