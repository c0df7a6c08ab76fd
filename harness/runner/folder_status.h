// Where a results folder stands: its planned cells recorded ok,
// recorded not ok (failed, crashed, timeout), running, pending in Slurm's queue, or missing
// (never run, or their task ended without a record), per host. Reads only: records through the
// results model (results.jsonl and parts not gathered yet), the planned cells (cells.json), the
// Slurm submissions (slurm/sN) and squeue.
#pragma once

#include <nlohmann/json.hpp>

#include <string>

#include "harness/results/model.h"

namespace allocmark::runner {

// `allocmark status DIR --json`'s object (docs/slurm.md): cells, ok, failed, running, pending,
// missing, hosts {name: {ok, failed, running}}, slurm_jobs, missing_cells (at most 20),
// run_in_progress (the lock's holder, or null), squeue_error (or null). `model`: DIR read
// with require_cells = false.
nlohmann::json folder_status(const std::string& dir, const results::Model& model);

}  // namespace allocmark::runner
