#include "harness/runner/slurm_queue.h"

#include <cstdlib>
#include <sstream>
#include <stdexcept>

#include "harness/results/folder.h"
#include "harness/results/folder_layout.h"
#include "harness/results/results_dir.h"
#include "harness/runner/process.h"

namespace allocmark::runner {

std::vector<SlurmTask> slurm_active_tasks(const std::set<long>& jobs) {
  if (jobs.empty()) return {};
  // -r: one line per array task; %F the array's job id, %K the task index, %T the state, %N the node.
  ToolResult r = run_tool({"squeue", "-h", "-r", "-o", "%F|%K|%T|%N"});
  if (r.status != 0) throw std::runtime_error("squeue failed: " + (r.output.empty() ? "no output" : r.output));
  std::vector<SlurmTask> out;
  std::stringstream lines(r.output);
  std::string line;
  while (std::getline(lines, line)) {
    std::stringstream fields(line);
    std::string job, task, state, node;
    std::getline(fields, job, '|');
    std::getline(fields, task, '|');
    std::getline(fields, state, '|');
    std::getline(fields, node, '|');
    char* end = nullptr;
    long id = std::strtol(job.c_str(), &end, 10);
    if (end == job.c_str() || !jobs.count(id)) continue;
    out.push_back({id, std::atoi(task.c_str()), state, node});
  }
  return out;
}

std::set<long> slurm_jobs_of(const std::string& folder) {
  std::set<long> out;
  for (const auto& sub : results::submission_dirs(folder)) {
    std::istringstream in(results::Folder(sub).read_file(results::layout::kJobId).value_or(""));
    long id = 0;
    if (in >> id) out.insert(id);
  }
  return out;
}

}  // namespace allocmark::runner
