// The Slurm executor: a plan's pending cells become one sbatch job array. Each array task runs its
// slice of cells on the node Slurm gave it, one after another, each through `allocmark cell` (the
// same one-cell unit as a local run: fresh worker, preload proof, exact per-phase peaks, RSS
// sampled on that node), and writes each finished record to its own file under the results
// folder (parts/SUBMISSION/N.json, renamed into place whole), so no two writers ever share a file.
// The driver, holding the folder's lock, gathers those files into results.jsonl as they appear.
//
// Folder layout it adds (docs/ARCHITECTURE.md, "Executors"):
//   slurm/sN/   one submission: job.sh, cells/N.json (each cell's description), cells.json (index,
//               key, label, attempt, array task), job_id, task-T.out (each task's output)
//   parts/sN/   finished records not gathered yet
//   machines/   HOST.json, each node's machine description (written by its first cell)
#pragma once

#include <ostream>
#include <set>
#include <string>
#include <vector>

#include "harness/runner/executor.h"
#include "harness/runner/slurm_queue.h"

namespace allocmark::runner {

struct SlurmOptions {
  std::vector<std::string> sbatch_args;  // from --slurm-opt, already split into words
  int cells_per_task = 1;
  bool wait = true;          // false: return after submission (--no-wait)
  std::string allocmark;     // this binary, which each task runs as `allocmark cell`
  std::string folder;        // the results folder, absolute (tasks on other nodes write into it)
  std::ostream* messages = nullptr;
  std::string run_id;        // the submitting run's, stamped by each task on its records
  std::string shown_folder;  // the results folder as the user named it, for what the command prints
};

// --slurm-opt values split into words as a shell would (quotes kept together, no expansion of
// commands or variables); throws matrix::ConfigError for text a shell could not split.
std::vector<std::string> split_slurm_options(const std::vector<std::string>& raw);

// Checks before anything is written: sbatch, squeue and scancel are on PATH, and sbatch accepts the
// options (`sbatch --test-only`). Throws matrix::ConfigError naming what is wrong.
void check_slurm_submission(const std::vector<std::string>& sbatch_args);

// Each node's machine description (FOLDER/machines/HOST.json, written by the first cell `allocmark
// cell` ran there) joins meta.json's `machines`; a node that changed since its earlier cells is
// warned about on stderr.
void add_node_machines(nlohmann::json& meta, const std::string& folder);

class SlurmExecutor : public Executor {
 public:
  SlurmExecutor(CellSettings settings, SlurmOptions options) : settings_(std::move(settings)), options_(std::move(options)) {}
  std::string name() const override { return "slurm"; }
  // Submits the jobs as one array; unless --no-wait, follows it (squeue) and reports each record
  // as its part file appears. Throws std::runtime_error when the array ended with cells that never
  // wrote a record (cancelled, time limit, node failure): the finished ones are reported first.
  // On a stop request the array is cancelled (scancel) and what finished is reported.
  void run(const std::vector<CellJob>& jobs, const ExecutorEvents& events) override;
  // add_node_machines for the folder it submitted to.
  bool describe(nlohmann::json& meta) const override;
  // With --no-wait: the job submitted and how to follow it (or that nothing needed submitting).
  std::optional<std::string> returned_early() const override;

  long job_id() const { return job_id_; }
  const std::string& submission() const { return submission_; }

 private:
  CellSettings settings_;
  SlurmOptions options_;
  long job_id_ = 0;
  std::string submission_;
};

}  // namespace allocmark::runner
