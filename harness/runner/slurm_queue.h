// What Slurm's queue says about a results folder's submissions: read by the run session (no cell
// is added to a folder whose array still runs), `status` (what is queued, where) and `merge` (a
// folder still being written), none of which submits anything (that is slurm_executor.h's).
#pragma once

#include <set>
#include <string>
#include <vector>

namespace allocmark::runner {

// One array task Slurm still knows of.
struct SlurmTask {
  long job = 0;
  int task = 0;
  std::string state;  // PENDING, RUNNING, COMPLETING, ...
  std::string node;   // where it runs ("" while pending)
};

// The tasks of `jobs` that squeue still lists. Throws std::runtime_error when squeue cannot be run
// or fails (then nothing can be said about the jobs, and a caller must not guess "finished").
std::vector<SlurmTask> slurm_active_tasks(const std::set<long>& jobs);

// The job ids recorded in a results folder's submissions (slurm/sN/job_id).
std::set<long> slurm_jobs_of(const std::string& folder);

}  // namespace allocmark::runner
