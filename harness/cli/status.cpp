// `allocmark status DIR [--json]`: where a results folder stands: its planned cells recorded ok,
// recorded not ok (failed, crashed, timeout), running, pending in Slurm's queue, or missing
// (never run, or their task ended without a record), per host. Reads only: records through the
// results model (results.jsonl and parts not gathered yet), the planned cells (cells.json), the
// Slurm submissions (slurm/sN) and squeue.
#include <fmt/format.h>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>

#include "harness/cli/common.h"
#include "harness/results/folder_layout.h"
#include "harness/results/model.h"
#include "harness/results/results_dir.h"
#include "harness/results/safe_text.h"
#include "harness/runner/slurm_queue.h"

namespace allocmark::cli {
namespace {

using nlohmann::json;
namespace rs = allocmark::results;
namespace rn = allocmark::runner;

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

int status(const std::string& dir, bool as_json) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) throw rs::ResultsError(dir + ": no such results folder");
  if (!fs::exists(rs::layout::path_in(dir, rs::layout::kMeta), ec))
    throw rs::ResultsError(fmt::format("{}: no {} (not a results folder?)", dir, rs::layout::kMeta));
  rs::Model model = rs::Model::load({dir}, {/*require_cells=*/false});
  print_reading_notes(model);

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
  std::set<long> jobs = rn::slurm_jobs_of(dir);
  std::map<std::pair<long, int>, rn::SlurmTask> active;
  std::string squeue_error;
  if (!jobs.empty()) try {
      for (const auto& t : rn::slurm_active_tasks(jobs)) active[{t.job, t.task}] = t;
    } catch (const std::exception& e) {
      squeue_error = e.what();
    }
  std::map<std::string, rn::SlurmTask> queued;  // key -> the active task that will (re)run it
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
        rn::SlurmTask t = it->second;
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

  if (as_json) {
    json h = json::object();
    for (const auto& [name, c] : hosts) h[name] = {{"ok", c.ok}, {"failed", c.failed}, {"running", c.running}};
    json out{{"folder", dir}, {"cells", cells.size()}, {"ok", ok},         {"failed", failed},
             {"running", running}, {"pending", pending},   {"missing", missing}, {"hosts", h},
             {"slurm_jobs", job_list}, {"missing_cells", missing_cells},
             {"run_in_progress", holder.empty() ? json(nullptr) : json(holder)},
             {"squeue_error", squeue_error.empty() ? json(nullptr) : json(squeue_error)}};
    std::cout << out.dump(2) << "\n";
    return kExitOk;
  }
  // Host, node and submission names and the lock's text come from the folder: shown, never obeyed.
  std::string text = fmt::format("{}: {} cells: {} ok, {} failed, {} running, {} pending, {} missing\n", dir, cells.size(), ok,
                                 failed, running, pending, missing);
  if (!hosts.empty()) {
    std::size_t width = 4;
    for (const auto& [name, c] : hosts) width = std::max(width, name.size());
    text += fmt::format("  {:<{}}  {:>6}  {:>6}  {:>7}\n", "host", width, "ok", "failed", "running");
    for (const auto& [name, c] : hosts)
      text += fmt::format("  {:<{}}  {:>6}  {:>6}  {:>7}\n", name.empty() ? "?" : name, width, c.ok, c.failed, c.running);
  }
  for (const auto& j : job_list)
    text += fmt::format("Slurm job {} ({}): {} tasks running, {} pending\n", j["job"].get<long>(),
                        j["submission"].get<std::string>(), j["tasks_running"].get<std::size_t>(),
                        j["tasks_pending"].get<std::size_t>());
  if (!squeue_error.empty()) text += "squeue failed (" + squeue_error + "): running and pending cells are counted as missing\n";
  if (!holder.empty()) text += "a run holds the folder: " + holder + "\n";
  if (missing && holder.empty() && queued.empty())
    text += fmt::format("`allocmark run ... --out {} --resume` runs the {} missing cells{}\n", dir, missing,
                        failed ? " (add --retry-failed to rerun the failed ones)" : "");
  std::cout << rs::terminal_text(text);
  return kExitOk;
}

}  // namespace

Subcommand add_status_command(CLI::App& app) {
  auto dir = std::make_shared<std::string>();
  auto as_json = std::make_shared<bool>(false);
  auto* cmd = app.add_subcommand("status", "where a results folder stands: cells ok, failed, running, pending, missing, per host");
  cmd->add_option("dir", *dir, "results folder")->required();
  cmd->add_flag("--json", *as_json, "as one JSON object");
  return {cmd, [dir, as_json] { return status(*dir, *as_json); }};
}

}  // namespace allocmark::cli
