#include "harness/runner/slurm_executor.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <fmt/format.h>
#include <unistd.h>
#include <wordexp.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <thread>

#include "harness/os/clock.h"
#include "harness/matrix/config.h"
#include "harness/record/cell.h"
#include "harness/results/folder_layout.h"
#include "harness/results/meta.h"
#include "harness/results/machine.h"
#include "harness/results/results_dir.h"
#include "harness/runner/process.h"


namespace allocmark::runner {
namespace {

namespace fs = std::filesystem;
namespace layout = results::layout;
using nlohmann::json;

// The batch script every array task runs. A part file already there (a task Slurm requeued after a
// node failure) is a finished cell: it is not run again.
std::string job_script(const std::string& allocmark, const std::string& folder, const std::string& submission,
                       const std::string& parts, std::size_t cells, int per_task) {
  return fmt::format(R"(#!/bin/bash
# Written by allocmark for {folder} ({submission}). Array task T runs cells T*{per}.. of cells/, one
# after another, each through `allocmark cell` on this node: a fresh worker per cell, RSS sampled
# here, the finished record renamed into parts/ whole.
set -u
sub={sub}
parts={parts}
first=$(( SLURM_ARRAY_TASK_ID * {per} ))
for (( i = first; i < first + {per} && i < {cells}; i++ )); do
  [ -e "$parts/$i.json" ] && continue
  {allocmark} cell "$sub/cells/$i.json" --record "$parts/$i.json"
done
exit 0
)",
                     fmt::arg("folder", folder), fmt::arg("submission", fs::path(submission).filename().string()),
                     fmt::arg("per", per_task), fmt::arg("sub", shell_quoted(submission)),
                     fmt::arg("parts", shell_quoted(parts)), fmt::arg("cells", cells),
                     fmt::arg("allocmark", shell_quoted(allocmark)));
}

// A new submission folder slurm/sN, N the first number not taken; its name.
std::string new_submission_name(const results::Folder& slurm) {
  for (std::size_t n = 1;; ++n) {
    std::string name = "s" + std::to_string(n);
    if (::mkdirat(slurm.fd(), name.c_str(), 0755) == 0) return name;
    if (errno != EEXIST) throw std::runtime_error("cannot create " + slurm.path_of(name) + ": " + std::strerror(errno));
  }
}

// Writes each cell's description (cells/N.json) for `allocmark cell`; returns the submission's
// index, which names each cell's array task.
json write_cell_specs(const std::vector<CellJob>& jobs, const CellSettings& cell_settings, const std::string& run_id,
                      int per_task, const results::Folder& top, const results::Folder& cells) {
  json index = json::array();
  for (std::size_t i = 0; i < jobs.size(); ++i) {
    const CellJob& job = jobs[i];
    json settings = matrix::settings_json(cell_settings, matrix::kCellSpec);
    settings["data_root"] = top.path_of(layout::kData);  // absolute: the task runs in another folder
    json spec{{"cell", record::cell_description(job.cell)},
              {"settings", settings},
              {"log", fs::absolute(job.log_path).string()},
              {"attempt", job.attempt},
              {"run_id", run_id},
              {"machines_dir", top.path_of(layout::kMachines)}};
    cells.write_atomically(fmt::format("{}.json", i), spec.dump(2) + "\n");
    index.push_back({{"index", i}, {"key", job.cell.key()}, {"label", job.cell.label()}, {"attempt", job.attempt},
                     {"task", static_cast<int>(i) / per_task}});
  }
  return index;
}

std::vector<std::string> sbatch_command(const std::vector<std::string>& sbatch_args, const std::string& submission,
                                        int tasks) {
  std::vector<std::string> args{"sbatch", "--parsable", fmt::format("--array=0-{}", tasks - 1), "--job-name=allocmark",
                                "--output=" + submission + "/task-%a.out"};
  args.insert(args.end(), sbatch_args.begin(), sbatch_args.end());
  args.push_back(results::layout::path_in(submission, results::layout::kJobScript));
  return args;
}

// Follows a submitted array until squeue shows none of its tasks: reports each record as its part
// file appears, a running task's first unfinished cell as started, and cancels the array on a stop
// request.
class ArrayFollower {
 public:
  ArrayFollower(const std::vector<CellJob>& jobs, const ExecutorEvents& events, const results::Folder& parts_dir,
                long job_id, int per_task, std::ostream* msg, const std::string& folder, const std::string& submission)
      : jobs_(jobs), events_(events), parts_dir_(parts_dir), job_id_(job_id), per_task_(per_task), msg_(msg),
        folder_(folder), submission_(submission), ours_{job_id}, reported_(jobs.size(), false),
        started_(jobs.size(), false) {}

  // Throws std::runtime_error when the array ended with cells that never wrote a record, unless it was cancelled.
  void follow() {
    auto next_poll = os::Clock::now();
    for (;;) {
      gather();
      cancel_if_stop_requested();
      if (os::Clock::now() >= next_poll) {
        next_poll = os::Clock::now() + std::chrono::seconds(2);
        const Poll poll = look_at_queue();
        if (poll == Poll::ended) break;
        if (poll == Poll::failed) continue;
      }
      if (events_.tick) events_.tick();
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
    // Files renamed on another node may show up here a moment later on a network file system.
    for (int i = 0; i < 5 && reported_count_ < jobs_.size(); ++i) {
      gather();
      if (reported_count_ < jobs_.size()) std::this_thread::sleep_for(std::chrono::seconds(1));
    }
    if (cancelled_ || reported_count_ == jobs_.size()) return;
    throw std::runtime_error(fmt::format(
        "{} of {} cells of Slurm job {} ended without a record (a task was cancelled, hit its time limit or lost its node; "
        "see {}/task-*.out); the {} finished are recorded",
        jobs_.size() - reported_count_, jobs_.size(), job_id_, submission_, reported_count_));
  }

 private:
  enum class Poll { running, ended, failed };

  // Every record a task renamed into parts/ since the last look, reported in the jobs' order.
  void gather() {
    std::vector<std::size_t> found;
    for (const auto& f : parts_dir_.list()) {
      if (f.type != results::Folder::Type::file || fs::path(f.name).extension() != ".json") continue;
      std::size_t i = std::strtoul(f.name.c_str(), nullptr, 10);
      if (i < jobs_.size() && !reported_[i]) found.push_back(i);
    }
    std::sort(found.begin(), found.end());
    for (std::size_t i : found) {
      const std::string file = fmt::format("{}.json", i);
      json record = json::parse(parts_dir_.read_file(file).value_or(""), nullptr, false);
      if (record.is_discarded() || !record.is_object()) continue;  // left for `--resume` to name
      events_.finished(jobs_[i], record);
      reported_[i] = true;
      ++reported_count_;
      parts_dir_.remove_file(file);  // results.jsonl holds it now; a leftover would be skipped as already recorded
    }
  }

  void cancel_if_stop_requested() {
    if (events_.stop_requested && events_.stop_requested() && !cancelled_) {
      run_tool({"scancel", std::to_string(job_id_)});
      cancelled_ = true;
      if (msg_) *msg_ << fmt::format("\nallocmark: cancelled Slurm job {}\n", job_id_) << std::flush;
    }
  }

  Poll look_at_queue() {
    std::vector<SlurmTask> active;
    try {
      active = slurm_active_tasks(ours_);
      squeue_failures_ = 0;
    } catch (const std::exception& e) {
      // A controller busy for a moment is common on a shared cluster; ten in a row is not.
      if (++squeue_failures_ >= 10)
        throw std::runtime_error(std::string(e.what()) + "; Slurm job " + std::to_string(job_id_) +
                                 " may still run: `allocmark status " + folder_ + "` shows it, `--resume` gathers its records");
      return Poll::failed;
    }
    if (active.empty()) return Poll::ended;
    report_tasks(active);
    return Poll::running;
  }

  void report_tasks(const std::vector<SlurmTask>& active) {
    std::size_t running = 0, pending = 0;
    for (const auto& t : active) {
      if (t.state == "PENDING") {
        ++pending;
        continue;
      }
      ++running;
      // The first unfinished cell of a running task is the one it runs now (as far as the driver can tell).
      for (std::size_t i = static_cast<std::size_t>(t.task) * per_task_; i < jobs_.size() && i < (t.task + 1u) * per_task_; ++i)
        if (!reported_[i]) {
          if (!started_[i] && events_.started) events_.started(jobs_[i]);
          started_[i] = true;
          break;
        }
    }
    std::string state = fmt::format("{} running, {} pending, {}/{} cells recorded", running, pending, reported_count_, jobs_.size());
    if (msg_ && state != last_state_ && !events_.tick_redraws)
      *msg_ << fmt::format("allocmark: Slurm job {}: tasks {}\n", job_id_, state) << std::flush;
    last_state_ = state;
  }

  const std::vector<CellJob>& jobs_;
  const ExecutorEvents& events_;
  const results::Folder& parts_dir_;
  const long job_id_;
  const int per_task_;
  std::ostream* const msg_;
  const std::string& folder_;
  const std::string& submission_;
  const std::set<long> ours_;
  std::vector<bool> reported_, started_;
  std::size_t reported_count_ = 0;
  int squeue_failures_ = 0;
  std::string last_state_;
  bool cancelled_ = false;
};

}  // namespace

std::vector<std::string> split_slurm_options(const std::vector<std::string>& raw) {
  std::vector<std::string> out;
  for (const auto& text : raw) {
    wordexp_t words{};
    int rc = ::wordexp(text.c_str(), &words, WRDE_NOCMD);
    if (rc != 0) {
      if (rc == WRDE_NOSPACE) ::wordfree(&words);
      throw matrix::ConfigError("--slurm-opt: cannot split \"" + text + "\" into options" +
                                (rc == WRDE_CMDSUB ? " (command substitution is not allowed)"
                                                   : rc == WRDE_BADCHAR ? " (unquoted | & ; < > ( ) { } or newline)"
                                                                        : " (unbalanced quotes?)"));
    }
    for (std::size_t i = 0; i < words.we_wordc; ++i) out.emplace_back(words.we_wordv[i]);
    ::wordfree(&words);
  }
  for (const auto& w : out)
    for (const char* ours : {"--array", "-a", "--wrap", "--parsable"})
      if (w == ours || w.rfind(std::string(ours) + "=", 0) == 0)
        throw matrix::ConfigError("--slurm-opt: " + w + " is allocmark's to set (the matrix is one array, --cells-per-task sizes its tasks)");
  return out;
}

void check_slurm_submission(const std::vector<std::string>& sbatch_args) {
  for (const char* tool : {"sbatch", "squeue", "scancel"})
    if (!find_on_path(tool))
      throw matrix::ConfigError(std::string("--executor slurm: ") + tool +
                                " not found on PATH (run from a Slurm login node; Debian: apt-get install slurm-client)");
  std::vector<std::string> args{"sbatch", "--test-only"};
  args.insert(args.end(), sbatch_args.begin(), sbatch_args.end());
  args.push_back("--wrap=true");
  ToolResult r = run_tool(args);
  if (r.status != 0)
    throw matrix::ConfigError("--executor slurm: sbatch refuses the submission (sbatch --test-only: " +
                              (r.output.empty() ? "exit " + std::to_string(r.status) : r.output) + ")");
}

void SlurmExecutor::run(const std::vector<CellJob>& jobs, const ExecutorEvents& events) {
  if (jobs.empty()) return;
  std::ostream* msg = options_.messages;
  const std::string& folder = options_.folder;
  const int per_task = options_.cells_per_task;
  // Everything below is created here and reached through the folder's descriptor, never a link.
  const results::Folder top(folder);
  const results::Folder slurm = top.sub(layout::kSlurm, /*create=*/true);
  const std::string name = new_submission_name(slurm);
  submission_ = slurm.path_of(name);
  const results::Folder submission = slurm.sub(name, false);
  const results::Folder cells = submission.sub(layout::kSubmissionCells, true);
  const results::Folder all_parts = top.sub(layout::kParts, true);
  const results::Folder parts_dir = all_parts.sub(name, true);
  const std::string parts = parts_dir.path();
  const json index = write_cell_specs(jobs, settings_, options_.run_id, per_task, top, cells);
  submission.write_atomically(results::layout::kSubmissionIndex, index.dump(1) + "\n");
  submission.write_atomically(results::layout::kJobScript, job_script(options_.allocmark, folder, submission_, parts, jobs.size(), per_task));
  const int tasks = static_cast<int>((jobs.size() + per_task - 1) / per_task);

  ToolResult r = run_tool(sbatch_command(options_.sbatch_args, submission_, tasks));
  job_id_ = r.status == 0 ? std::strtol(r.output.c_str(), nullptr, 10) : 0;
  if (job_id_ <= 0) {
    slurm.remove_tree(name);
    all_parts.remove_tree(name);
    throw std::runtime_error("sbatch refused the job array: " + (r.output.empty() ? "exit " + std::to_string(r.status) : r.output));
  }
  submission.write_atomically(results::layout::kJobId, std::to_string(job_id_) + "\n");
  if (msg)
    *msg << fmt::format("allocmark: submitted Slurm job {}: {} array task{} for {} cell{} ({} per task); {}\n", job_id_, tasks,
                        tasks == 1 ? "" : "s", jobs.size(), jobs.size() == 1 ? "" : "s", per_task, submission_)
         << std::flush;
  if (!options_.wait) return;
  ArrayFollower(jobs, events, parts_dir, job_id_, per_task, msg, folder, submission_).follow();
}

void describe_this_node(const std::string& machines_dir) {
  json machine = results::machine_info();
  const std::string host = machine.value(results::machine_key::host, "unknown");
  std::error_code ec;
  fs::create_directories(machines_dir, ec);
  const results::Folder folder(machines_dir);
  if (folder.type(host + ".json") == results::Folder::Type::missing) folder.write_atomically(host + ".json", machine.dump(2) + "\n");
}

void add_node_machines(json& meta, const std::string& folder) {
  std::error_code ec;
  for (const auto& f : fs::directory_iterator(folder + "/" + layout::kMachines, ec)) {
    if (f.path().extension() != ".json") continue;
    std::ifstream in(f.path());
    json machine = json::parse(in, nullptr, false);
    if (machine.is_discarded() || !machine.is_object() || !machine.contains(results::machine_key::host)) continue;
    const std::string host = machine.value(results::machine_key::host, "");
    if (meta.contains(results::meta::kMachines) && meta[results::meta::kMachines].contains(host))
      if (auto diff = results::machine_differences(meta[results::meta::kMachines][host], machine); !diff.empty())
        std::cerr << "allocmark: warning: node " << host << " differs from when its earlier cells ran (" << diff
                  << "); its cells are shown under the same host name\n";
    meta[results::meta::kMachines][host] = machine;
  }
}

bool SlurmExecutor::describe(json& meta) const {
  add_node_machines(meta, options_.folder);
  return true;
}

std::optional<std::string> SlurmExecutor::returned_early() const {
  if (options_.wait) return std::nullopt;
  const std::string& folder = options_.shown_folder;
  if (!job_id_) return "nothing to submit: every cell of this matrix is recorded in " + folder + "\n";
  return fmt::format("submitted Slurm job {} ({}); `allocmark status {}` follows it; when nothing runs, "
                     "`allocmark run ... --out {} --resume` gathers its records into results.jsonl and resubmits what is missing\n",
                     job_id_, submission_, folder, folder);
}

}  // namespace allocmark::runner
