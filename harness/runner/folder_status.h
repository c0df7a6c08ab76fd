// Where a results folder stands: its planned cells recorded ok,
// recorded not ok (failed, crashed, timeout), running, pending in Slurm's queue, or missing
// (never run, or their task ended without a record), per host. Reads only: records through the
// results model (results.jsonl and parts not gathered yet), the planned cells (cells.json), the
// Slurm submissions (slurm/sN) and squeue.
#pragma once

#include <nlohmann/json.hpp>

#include <map>
#include <string>
#include <utility>

#include "harness/results/model.h"
#include "harness/runner/slurm_queue.h"

namespace allocmark::runner {

// What Slurm's queue says about a folder's submissions at one moment.
struct QueueSnapshot {
  std::map<std::pair<long, int>, SlurmTask> active;  // (job, task) -> the task, while squeue lists it
  std::string squeue_error;                          // squeue failed: nothing is known to be active
};

// Read the queue BEFORE the folder's records: a task that writes its last record and leaves the
// queue between the two reads is then seen as running (or as recorded), never as missing. Read
// the other way round, such a cell is in neither and `status` calls it missing.
QueueSnapshot snapshot_queue(const std::string& dir);

// `allocmark status DIR --json`'s object (docs/slurm.md): cells, ok, failed, running, pending,
// missing, hosts {name: {ok, failed, running}}, slurm_jobs, missing_cells (at most 20),
// run_in_progress (the lock's holder, or null), squeue_error (or null). `queue`: taken first;
// `model`: DIR read after it, with require_cells = false.
nlohmann::json folder_status(const std::string& dir, const QueueSnapshot& queue, const results::Model& model);

}  // namespace allocmark::runner
