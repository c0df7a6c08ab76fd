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
  bool progress_line = false;  // one updating line (a terminal); else one line per finished cell
  std::ostream* messages = nullptr;
};

struct MatrixRunReport {
  std::size_t total = 0, already_recorded = 0, ran = 0, not_ok = 0;
  bool interrupted = false;
};

// Set by SIGINT/SIGTERM while run_matrix runs.
extern std::atomic<bool> g_interrupted;

// The jobs of `plan` that `dir` does not hold yet, in plan order.
std::vector<CellJob> pending_jobs(const matrix::Plan& plan, const results::ResultsDir& dir);

MatrixRunReport run_matrix(const matrix::Plan& plan, results::ResultsDir& dir, Executor& executor,
                           const MatrixRunOptions& options);

}  // namespace allocmark::runner
