// The seam between "which cells, in what order, stored where" (matrix_runner) and "how a cell is
// run" (an executor). The local executor runs each cell here with run_cell_here(); an executor for
// a batch scheduler hands cells to other hosts, each running the same unit (`allocmark cell`), and
// reports their records back the same way. A new executor is one file implementing this interface
// and one line in make_executor (executor_choice.cpp).
#pragma once

#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "harness/matrix/plan.h"
#include "harness/runner/cell_runner.h"

namespace allocmark::runner {

struct CellJob {
  matrix::Cell cell;
  std::size_t index = 0;  // 1-based position in the plan, for progress
  std::string log_path;   // where the worker's stdout and stderr go
  int attempt = 1;        // 2 and up: a rerun of a cell whose earlier record was not ok (--retry-failed)
};

struct ExecutorEvents {
  std::function<void(const CellJob&)> started;                              // may be empty
  std::function<void(const CellJob&, const nlohmann::json& record)> finished;  // stores it; may throw to stop the run
  std::function<void()> tick;                                               // about once a second; may be empty
  // tick redraws a progress line in place (a terminal): an executor then prints no lines of its own
  // while cells run. Otherwise tick only prints a heartbeat now and then.
  bool tick_redraws = false;
  std::function<bool()> stop_requested;                                     // checked between and during cells
};

class Executor {
 public:
  virtual ~Executor() = default;
  virtual std::string name() const = 0;
  // Runs the jobs, reporting each finished cell through events.finished, until all ran or a stop
  // is requested. A cell cut short by the stop is not reported (it is missing, so --resume reruns it).
  virtual void run(const std::vector<CellJob>& jobs, const ExecutorEvents& events) = 0;
  // Adds what this executor's cells tell about the folder to its meta.json (Slurm: each node's
  // machine), after the run however it ended; false when it has nothing to add.
  virtual bool describe(nlohmann::json& meta) const {
    (void)meta;
    return false;
  }
  // What the command prints when run() returned before the cells ran (a submission it does not
  // wait for); nullopt when it waited for them.
  virtual std::optional<std::string> returned_early() const { return std::nullopt; }
};

// On a node of a batch executor, before its first cell there: this host's machine description as
// MACHINES_DIR/HOST.json, written once (the executor's describe() brings it into meta.json).
void describe_this_node(const std::string& machines_dir);

// Cells one after another on this host: fork+exec, parent-side sampling.
class LocalExecutor : public Executor {
 public:
  explicit LocalExecutor(CellSettings settings) : settings_(std::move(settings)) {}
  std::string name() const override { return "local"; }
  void run(const std::vector<CellJob>& jobs, const ExecutorEvents& events) override;

 private:
  CellSettings settings_;
};

}  // namespace allocmark::runner
