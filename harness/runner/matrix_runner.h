// Runs a plan into a results folder: which cells are still to run (resume), their order, progress
// on a terminal, SIGINT/SIGTERM, and storing each record as it finishes. How a cell runs is the
// executor's business.
#pragma once

#include <atomic>
#include <ostream>
#include <stdexcept>
#include <string>

#include "harness/matrix/plan.h"
#include "harness/results/results_dir.h"
#include "harness/runner/executor.h"

namespace allocmark::runner {

// A run that stopped part way on an environment failure (disk full, fork refused): what happened
// and how many cells are recorded.
class RunStopped : public std::runtime_error {
 public:
  RunStopped(const std::string& what, std::size_t recorded, std::string dir)
      : std::runtime_error(what), recorded_(recorded), dir_(std::move(dir)) {}
  std::size_t recorded() const { return recorded_; }
  const std::string& dir() const { return dir_; }

 private:
  std::size_t recorded_;
  std::string dir_;
};

struct MatrixRunOptions {
  bool retry_failed = false;   // rerun cells whose recorded status is not ok (as a new attempt)
  // One line redrawn in place (a terminal); else one line per finished cell and, while a cell
  // runs, a heartbeat line at most every kHeartbeatSeconds (a file, a pipe, a CI log).
  bool progress_line = false;
  std::ostream* messages = nullptr;
  std::string run_id;          // stamped on every record (random_id() when empty); also in meta.json's runs[]
};

// Whether a run's progress redraws one line: $ALLOCMARK_PROGRESS "redraw" or "lines" where set
// (the lab sets "lines" in its guest, whose console is a terminal, when the lab's own output is not
// one), else whether standard error is a terminal. Another value is a matrix::ConfigError.
bool progress_redraws();

// 128 random bits as 32 hex digits: a run id (one per invocation that records cells) or a record id.
std::string random_id();

// Stamps a finished record with `run_id` (a new one when empty) and a record_id of its own, each
// unless the record has it already (a batch task's record, stamped where it ran): what lets every
// reader count one record once, however many folders it was copied or merged into.
void stamp_record_ids(nlohmann::json& record, const std::string& run_id);

struct MatrixRunReport {
  std::size_t total = 0, already_recorded = 0, ran = 0, not_ok = 0;
  std::size_t not_ok_in_folder = 0;  // cells of this plan whose latest record is not ok, after the run
  bool interrupted = false;
};

// Set by SIGINT/SIGTERM while run_matrix runs.
extern std::atomic<bool> g_interrupted;

// The jobs of `plan` that `dir` does not hold yet, in plan order.
// With retry_failed, also those whose latest record is not ok, as their next attempt.
std::vector<CellJob> pending_jobs(const matrix::Plan& plan, const results::ResultsDir& dir, bool retry_failed);

MatrixRunReport run_matrix(const matrix::Plan& plan, results::ResultsDir& dir, Executor& executor,
                           const MatrixRunOptions& options);

}  // namespace allocmark::runner
