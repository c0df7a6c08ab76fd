// A run session: one plan run into one results folder, the same for every command that runs cells
// (`run`, `advise` through it, `gate --confirm`, and `run` inside the lab's guest). It checks what
// can be checked before anything is written, opens and locks the folder, keeps its promises
// (docs/ARCHITECTURE.md, "What a results folder promises": one machine, one matrix, meta.json and
// cells.json), runs the cells the folder lacks through the chosen executor and says how it went.
// Commands parse their flags, build the plan and print; nothing else about a run is theirs.
#pragma once

#include <optional>
#include <ostream>
#include <string>

#include "harness/matrix/plan.h"
#include "harness/runner/executor_choice.h"
#include "harness/runner/matrix_runner.h"
#include "harness/runner/system_thp.h"

namespace allocmark::runner {

struct SessionOptions {
  std::string out_dir;      // the results folder
  std::string matrix_path;  // the matrix file the plan was read from, "" for none (meta.json)
  std::string command;      // the command line (meta.json's runs, the folder's lock)
  std::string mode;         // meta.json runs[].mode; "" for run, resume or extend as chosen below
  std::string worker;       // allocmark-worker
  bool resume = false, extend = false, discard_corrupt = false, retry_failed = false;
  ExecutorChoice executor;  // local unless chosen
  std::string system_thp;   // --system-thp: the machine's THP mode while the run lasts ("" leaves it)
};

struct SessionOutcome {
  MatrixRunReport report;
  std::string folder;                          // as named in out_dir
  std::optional<std::string> returned_early;  // the executor's words when it did not wait for the cells
};

class RunSession {
 public:
  // Before anything is written: the placement where cells run here (printing its notes), the
  // worker, and every allocator preloaded once in a probe worker (a library of a declared kind
  // that is not that allocator: matrix::ConfigError). The plan must outlive the session.
  RunSession(const matrix::Plan& plan, SessionOptions options);
  // Opens and locks the folder, refuses one recorded on another machine or, on resume, with
  // another matrix, writes meta.json and cells.json, then runs the cells the folder lacks.
  // Throws RunStopped for an environment failure part way (finished cells recorded).
  SessionOutcome run();

 private:
  const matrix::Plan& plan_;
  SessionOptions options_;
  nlohmann::json allocators_;  // meta.json's `allocators`: each probed library and what serves malloc
  bool progress_redraws_;      // progress_redraws(), read before anything runs
  std::optional<SystemThpLock> thp_lock_;  // with --system-thp: held from the checks to the end
};

// meta.json's `allocmark`: the version and commit of the program writing a folder.
nlohmann::json allocmark_identity();

// What `run` prints on stdout once the session ended: the executor's words when it did not wait,
// else the recommendation per workload (unless with_recommendation is false: advise prints its
// own) and how many cells ran. Warnings, and how to complete an interrupted
// run, go to `messages`.
std::string session_summary(const SessionOutcome& outcome, std::ostream& messages, bool with_recommendation = true);

}  // namespace allocmark::runner
