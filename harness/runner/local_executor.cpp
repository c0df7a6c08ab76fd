#include "harness/runner/executor.h"

namespace allocmark::runner {

void LocalExecutor::run(const std::vector<CellJob>& jobs, const ExecutorEvents& events) {
  CellHooks hooks{events.tick, events.stop_requested};
  for (const auto& job : jobs) {
    if (events.stop_requested && events.stop_requested()) return;
    if (events.started) events.started(job);
    CellOutcome outcome = run_cell_here(job.cell, settings_, job.log_path, hooks);
    if (outcome.interrupted) return;
    events.finished(job, outcome.record);
  }
}

}  // namespace allocmark::runner
