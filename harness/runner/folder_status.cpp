#include "harness/runner/folder_status.h"

#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include "harness/results/folder_layout.h"
#include "harness/results/results_dir.h"
#include "harness/runner/slurm_queue.h"

namespace allocmark::runner {

using nlohmann::json;
namespace rs = allocmark::results;

namespace {

json read_json_file(const std::string& path) {
  rs::check_readable_file(path);
  std::ifstream in(path);
  if (!in) return nullptr;
  json j = json::parse(in, nullptr, false);
  return j.is_discarded() ? json(nullptr) : j;
}

struct HostCounts {
  std::size_t ok = 0, failed = 0, running = 0;
};

}  // namespace

QueueSnapshot snapshot_queue(const std::string& dir) {
  QueueSnapshot q;
  const std::set<long> jobs = slurm_jobs_of(dir);
  if (jobs.empty()) return q;
  try {
    for (const auto& t : slurm_active_tasks(jobs)) q.active[{t.job, t.task}] = t;
  } catch (const std::exception& e) {
    q.squeue_error = e.what();
  }
  return q;
}

json folder_status(const std::string& dir, const QueueSnapshot& queue, const rs::Model& model) {
  namespace fs = std::filesystem;
  // key -> (status, attempt, host) of its latest record
  struct Recorded {
    std::string status, host;
    int attempt;
  };
  std::map<std::string, Recorded> recorded;
  for (const auto& c : model.cells()) recorded[c.key] = {c.status, model.identity(c).host, c.attempt};

  json planned = read_json_file(rs::layout::path_in(dir, rs::layout::kCells));
  std::map<std::string, std::string> cells;  // key -> label
  if (planned.is_object())
    for (auto it = planned.begin(); it != planned.end(); ++it) cells[it.key()] = it.value().is_string() ? it.value().get<std::string>() : it.key();
  for (const auto& [key, r] : recorded) cells.emplace(key, key);

  // Slurm: which submitted cells are still queued or running, and where.
  const auto& active = queue.active;
  const std::string& squeue_error = queue.squeue_error;
  std::map<std::string, SlurmTask> queued;  // key -> the active task that will (re)run it
  json job_list = json::array();
  for (const auto& sub : rs::submission_dirs(dir)) {
    long job = 0;
    std::ifstream(rs::layout::path_in(sub, rs::layout::kJobId)) >> job;
    json index = read_json_file(rs::layout::path_in(sub, rs::layout::kSubmissionIndex));
    std::set<int> running_tasks, pending_tasks, task_has_running_cell;
    if (index.is_array())
      for (const auto& e : index) {
        auto it = active.find({job, e.value("task", -1)});
        if (it == active.end()) continue;
        const std::string key = e.value("key", "");
        if (auto r = recorded.find(key); r != recorded.end() && r->second.attempt >= e.value("attempt", 1)) continue;
        SlurmTask t = it->second;
        // A task runs its cells one after another: its first unrecorded cell runs, the rest wait.
        if (t.state != "PENDING" && !task_has_running_cell.insert(t.task).second) t.state = "PENDING";
        queued[key] = t;
      }
    for (const auto& [id, t] : active)
      if (id.first == job) (t.state == "PENDING" ? pending_tasks : running_tasks).insert(t.task);
    job_list.push_back({{"job", job}, {"submission", fs::path(sub).filename().string()},
                        {"tasks_running", running_tasks.size()}, {"tasks_pending", pending_tasks.size()}});
  }

  std::map<std::string, HostCounts> hosts;
  std::size_t ok = 0, failed = 0, running = 0, pending = 0, missing = 0;
  json missing_cells = json::array();
  for (const auto& [key, label] : cells) {
    if (auto q = queued.find(key); q != queued.end()) {
      if (q->second.state == "PENDING") {
        ++pending;
      } else {
        ++running;
        ++hosts[q->second.node].running;
      }
      continue;
    }
    auto r = recorded.find(key);
    if (r == recorded.end()) {
      ++missing;
      if (missing_cells.size() < 20) missing_cells.push_back(label);
      continue;
    }
    if (r->second.status == "ok") {
      ++ok;
      ++hosts[r->second.host].ok;
    } else {
      ++failed;
      ++hosts[r->second.host].failed;
    }
  }
  const rs::FolderWriter writer = rs::folder_writer(dir);
  const std::string holder = writer.active ? writer.holder : "";
  json h = json::object();
  for (const auto& [name, c] : hosts) h[name] = {{"ok", c.ok}, {"failed", c.failed}, {"running", c.running}};
  return json{{"folder", dir}, {"cells", cells.size()}, {"ok", ok},         {"failed", failed},
              {"running", running}, {"pending", pending},   {"missing", missing}, {"hosts", h},
              {"slurm_jobs", job_list}, {"missing_cells", missing_cells},
              {"run_in_progress", holder.empty() ? json(nullptr) : json(holder)},
              {"squeue_error", squeue_error.empty() ? json(nullptr) : json(squeue_error)}};
}

}  // namespace allocmark::runner
