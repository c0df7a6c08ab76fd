// Which executor a run's cells go to: the one place that knows every executor by name. A command
// turns its flags into an ExecutorChoice, checked before anything is written, and the run session
// makes the executor once the results folder is open.
#pragma once

#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "harness/runner/executor.h"

namespace allocmark::runner {

// `run`'s executor flags as given.
struct ExecutorFlags {
  std::string name = "local";           // local | slurm
  std::vector<std::string> slurm_opts;  // --slurm-opt, each still to be split into words
  std::optional<int> cells_per_task;
  bool no_wait = false;
};

class ExecutorChoice {
 public:
  // Throws matrix::ConfigError for flags of an executor not chosen and for what the chosen one
  // would refuse later (a Slurm submission sbatch rejects): a usage error, not an empty folder.
  explicit ExecutorChoice(ExecutorFlags flags = {});
  const std::string& name() const { return flags_.name; }
  // The cells run on this host: their placement is planned here, and a folder's earlier cells must
  // come from this machine. (Cells of a batch scheduler run, and plan, on its nodes.)
  bool runs_here() const;
  // The executor for a results folder (`folder` as the user named it), its lock held by the caller.
  std::unique_ptr<Executor> make(const CellSettings& settings, const std::string& folder, const std::string& run_id,
                                 std::ostream* messages) const;

 private:
  ExecutorFlags flags_;
  std::vector<std::string> sbatch_args_;
};

// Refuses (matrix::ConfigError) a folder whose Slurm array still runs: no cell may be added to it
// (they would run twice) and no reader may take it as whole (merge). "Slurm job J still runs cells
// of DIR (N tasks left); wait for it (`allocmark status DIR`) or scancel it, then REMEDY". Where
// squeue cannot be asked (a laptop with a copy of the folder), it refuses too, unless
// `unknown_queue` is given: then that stream gets a warning and the folder is taken as finished.
void refuse_while_cells_run_elsewhere(const std::string& folder, const std::string& remedy,
                                      std::ostream* unknown_queue = nullptr);

}  // namespace allocmark::runner
