#include "harness/runner/executor_choice.h"

#include <fmt/format.h>

#include <filesystem>
#include <set>

#include "harness/matrix/config.h"
#include "harness/os/files.h"
#include "harness/runner/slurm_executor.h"

namespace allocmark::runner {

ExecutorChoice::ExecutorChoice(ExecutorFlags flags) : flags_(std::move(flags)) {
  const bool slurm = flags_.name == "slurm";
  if (!slurm && (!flags_.slurm_opts.empty() || flags_.cells_per_task || flags_.no_wait))
    throw matrix::ConfigError("--slurm-opt, --cells-per-task and --no-wait: need --executor slurm");
  if (flags_.cells_per_task && *flags_.cells_per_task < 1)
    throw matrix::ConfigError("--cells-per-task: must be at least 1, not " + std::to_string(*flags_.cells_per_task));
  if (!slurm) return;
  sbatch_args_ = split_slurm_options(flags_.slurm_opts);
  check_slurm_submission(sbatch_args_);
}

bool ExecutorChoice::runs_here() const { return flags_.name != "slurm"; }

std::unique_ptr<Executor> ExecutorChoice::make(const CellSettings& settings, const std::string& folder, const std::string& run_id,
                                               std::ostream* messages) const {
  if (runs_here()) return std::make_unique<LocalExecutor>(settings);
  return std::make_unique<SlurmExecutor>(
      settings, SlurmOptions{sbatch_args_, flags_.cells_per_task.value_or(1), !flags_.no_wait,
                             os::self_exe_path(),
                             std::filesystem::absolute(folder).lexically_normal().string(), messages, run_id, folder});
}

void refuse_while_cells_run_elsewhere(const std::string& folder, const std::string& remedy, std::ostream* unknown_queue) {
  std::set<long> jobs = slurm_jobs_of(folder);
  if (jobs.empty()) return;
  std::vector<SlurmTask> active;
  try {
    active = slurm_active_tasks(jobs);
  } catch (const std::exception& e) {
    const std::string why = folder + " has cells submitted to Slurm, and whether they still run cannot be told (" + e.what() + ")";
    if (!unknown_queue) throw matrix::ConfigError(why);
    *unknown_queue << "allocmark: warning: " << why << "; taken as finished\n";
    return;
  }
  if (active.empty()) return;
  std::set<long> running;
  for (const auto& t : active) running.insert(t.job);
  std::string ids;
  for (long id : running) ids += (ids.empty() ? "" : ", ") + std::to_string(id);
  throw matrix::ConfigError(fmt::format("Slurm job {} still runs cells of {} ({} tasks left); wait for it (`allocmark status {}`) "
                                        "or scancel it, then {}",
                                        ids, folder, active.size(), folder, remedy));
}

}  // namespace allocmark::runner
