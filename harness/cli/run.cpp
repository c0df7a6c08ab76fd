// `allocmark run`: expand a matrix, check every allocator library, then run the cells into a
// results folder through an executor.
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <memory>
#include <set>
#include <iostream>
#include <optional>

#include "harness/cli/run.h"
#include "harness/cli/common.h"
#include "harness/matrix/plan.h"
#include "harness/placement/placement.h"
#include "harness/topology/topology.h"
#include "harness/results/machine.h"
#include "harness/results/results_dir.h"
#include "harness/results/model.h"
#include "harness/results/reporters/reporter.h"
#include "harness/runner/environment.h"
#include "harness/runner/matrix_runner.h"
#include "harness/runner/probe.h"
#include "harness/runner/slurm_executor.h"

namespace allocmark::cli {
namespace {

using nlohmann::json;
namespace mx = allocmark::matrix;
namespace rs = allocmark::results;
namespace rn = allocmark::runner;



std::vector<int> parse_threads(const std::vector<std::string>& raw) {
  std::vector<int> out;
  for (const auto& t : split_commas(raw, "--threads")) {
    try {
      std::size_t used = 0;
      int v = std::stoi(t, &used);
      if (used != t.size() || v < 1) throw std::invalid_argument(t);
      out.push_back(v);
    } catch (const std::exception&) {
      throw mx::ConfigError("--threads: '" + t + "' is not a positive integer");
    }
  }
  return out;
}

// Every allocator is preloaded once before anything runs: a library of a declared kind that is
// not that allocator is a configuration error, not N failed cells.
json probe_plan_allocators(const mx::Plan& plan, const std::string& worker) {
  json out = json::array();
  for (const auto& a : plan.allocators) {
    json probe = rn::probe_allocator(a, worker);
    if (probe.contains("error") && a.backend != "generic")
      throw mx::ConfigError("allocator '" + a.name + "' (" + (a.library.empty() ? "C library" : a.library) +
                            "): " + probe["error"].get<std::string>());
    out.push_back({{"name", a.name}, {"backend", a.backend}, {"library", a.library}, {"env", a.env},
                   {"served_by", probe.value("library", "")}, {"version", probe.value("version", "")},
                   {"options", probe.value("options", json::object())},
                   {"preload_check", probe.value("error", "ok")}});
  }
  return out;
}

// The executor's flags, checked before anything is written: a Slurm submission the cluster would
// refuse is a usage error, not an empty folder.
std::vector<std::string> check_executor_flags(const RunFlags& f) {
  const bool slurm = f.executor == "slurm";
  if (!slurm && (!f.slurm_opts.empty() || f.cells_per_task || f.no_wait))
    throw mx::ConfigError("--slurm-opt, --cells-per-task and --no-wait: need --executor slurm");
  if (f.cells_per_task && *f.cells_per_task < 1)
    throw mx::ConfigError("--cells-per-task: must be at least 1, not " + std::to_string(*f.cells_per_task));
  if (!slurm) return {};
  std::vector<std::string> sbatch_args = rn::split_slurm_options(f.slurm_opts);
  rn::check_slurm_submission(sbatch_args);
  return sbatch_args;
}

// A folder whose Slurm array still runs cannot take more cells: they would run twice.
void refuse_while_slurm_jobs_run(const std::string& folder) {
  std::set<long> jobs = rn::slurm_jobs_of(folder);
  if (jobs.empty()) return;
  std::vector<rn::SlurmTask> active;
  try {
    active = rn::slurm_active_tasks(jobs);
  } catch (const std::exception& e) {
    throw mx::ConfigError(folder + " has cells submitted to Slurm, and whether they still run cannot be told (" + e.what() + ")");
  }
  if (active.empty()) return;
  std::set<long> running;
  for (const auto& t : active) running.insert(t.job);
  std::string ids;
  for (long id : running) ids += (ids.empty() ? "" : ", ") + std::to_string(id);
  throw mx::ConfigError(fmt::format("Slurm job {} still runs cells of {} ({} tasks left); wait for it (`allocmark status {}`) "
                                    "or scancel it, then run again with --resume",
                                    ids, folder, active.size(), folder));
}

// Each node's machine description (written by its first cell) joins meta.json's `machines`.
void absorb_node_machines(json& meta, const std::string& folder) {
  std::error_code ec;
  for (const auto& f : std::filesystem::directory_iterator(folder + "/machines", ec)) {
    if (f.path().extension() != ".json") continue;
    std::ifstream in(f.path());
    json machine = json::parse(in, nullptr, false);
    if (machine.is_discarded() || !machine.is_object() || !machine.contains("host")) continue;
    const std::string host = machine.value("host", "");
    if (meta.contains("machines") && meta["machines"].contains(host))
      if (auto diff = rs::machine_differences(meta["machines"][host], machine); !diff.empty())
        std::cerr << "allocmark: warning: node " << host << " differs from when its earlier cells ran (" << diff
                  << "); its cells are shown under the same host name\n";
    meta["machines"][host] = machine;
  }
}

// Every cell any run planned for this folder, key -> label: what `allocmark status` counts against.
void record_planned_cells(const mx::Plan& plan, const std::string& folder) {
  json planned = json::object();
  if (std::ifstream in(folder + "/cells.json"); in) {
    planned = json::parse(in, nullptr, false);
    if (planned.is_discarded() || !planned.is_object()) planned = json::object();
  }
  for (const auto& c : plan.cells) planned[c.key()] = c.label();
  rs::write_file_atomically(folder + "/cells.json", planned.dump(1) + "\n");
}

json fresh_meta(const mx::Plan& plan, const std::string& matrix_path, const json& machine, const json& allocators_meta,
                const std::string& worker, const json& run_entry) {
  return json{{"allocmark", {{"version", ALLOCMARK_VERSION}, {"git_commit", ALLOCMARK_GIT_COMMIT}}},
              {"machine", machine},
              {"allocators", allocators_meta},
              {"backends", rn::describe_backends(worker)},
              {"matrix", plan.as_json()},
              {"matrix_file", matrix_path},
              {"stripped_environment", rn::stripped_environment()},
              // The machine's NUMA layout and what this run was allowed (taskset, numactl, cpuset):
              // what the placement of every cell was planned against.
              {"topology", topology::to_json(topology::detect())},
              {"allowed", placement::to_json(placement::current_allowed())},
              {"started", std::time(nullptr)},
              {"runs", json::array({run_entry})}};
}

rn::CellSettings cell_settings(const mx::Plan& plan, const std::string& worker, const std::string& folder) {
  rn::CellSettings s;
  static_cast<mx::Settings&>(s) = plan.settings;
  s.worker_path = worker;
  s.data_root = folder + "/data";
  return s;
}

rn::MatrixRunReport run_here(const mx::Plan& plan, rs::ResultsDir& dir, const std::string& worker, bool retry_failed,
                             const std::string& run_id) {
  rn::LocalExecutor executor(cell_settings(plan, worker, dir.path()));
  return rn::run_matrix(plan, dir, executor, {retry_failed, static_cast<bool>(::isatty(2)), &std::cerr, run_id});
}

}  // namespace

mx::Plan make_run_plan(const RunFlags& f, std::string& matrix_path) {
  bool axis_flags = !f.allocators_raw.empty() || !f.workloads_raw.empty() || !f.threads_raw.empty() || !f.programs.empty();
  std::optional<mx::MatrixFile> file;
  matrix_path = f.matrix_path;
  if (matrix_path.empty() && !axis_flags) matrix_path = mx::config_dir() + "/quick.toml";
  if (!matrix_path.empty()) {
    struct stat st {};
    if (::stat(matrix_path.c_str(), &st) != 0 || ::access(matrix_path.c_str(), R_OK) != 0)
      throw mx::ConfigError(matrix_path + ": cannot read the matrix file");
    if (!S_ISREG(st.st_mode)) throw mx::ConfigError(matrix_path + ": is not a file (expected a matrix .toml file)");
    file = mx::load_matrix_file(matrix_path);
  }
  mx::Overrides o;
  if (!f.allocators_raw.empty()) o.allocators = split_commas(f.allocators_raw, "--allocators");
  if (!f.workloads_raw.empty()) o.workloads = split_commas(f.workloads_raw, "--workloads");
  if (!f.threads_raw.empty()) o.threads = parse_threads(f.threads_raw);
  static_cast<mx::SettingChoices&>(o) = setting_choices(f.settings);
  if (f.no_pin && o.pin && *o.pin != "none") throw mx::ConfigError("--no-pin and --pin " + *o.pin + ": choose one (--no-pin is --pin none)");
  if (f.no_pin) o.pin = "none";
  o.sets = f.sets;
  o.programs = f.programs;
  return mx::build_plan(file, load_variants(), o);
}

std::string default_out_dir(const char* prefix) {
  std::time_t t = std::time(nullptr);
  char buf[64];
  std::strftime(buf, sizeof buf, "%Y%m%d-%H%M%S", std::localtime(&t));
  return std::string("results/") + prefix + buf;
}

// Workers inherit this process's allowed CPUs and memory nodes, so a placement that cannot be
// planned here cannot be planned in any local cell: a usage error before anything runs. (Slurm
// cells run on other hosts; there each worker plans on its own and fails its cell if it cannot.)
void check_placement_here(const mx::Plan& plan) {
  int most_threads = 1;
  for (const auto& c : plan.cells) most_threads = std::max(most_threads, c.threads);
  try {
    placement::Placement p = placement::plan_placement(topology::detect(), placement::current_allowed(), plan.settings.pin, most_threads);
    for (const auto& n : p.notes) std::cerr << "allocmark: placement: " << n << "\n";
  } catch (const placement::PlacementError& e) {
    throw mx::ConfigError(e.what());
  }
}

int run_command(const RunFlags& f) {
  std::string matrix_path;
  mx::Plan plan = make_run_plan(f, matrix_path);
  for (const auto& n : plan.notes) std::cerr << "allocmark: " << n << "\n";
  if (f.executor != "slurm") check_placement_here(plan);
  std::string worker = worker_path();
  if (::access(worker.c_str(), X_OK) != 0) throw std::runtime_error("worker not found: " + worker + " (set ALLOCMARK_WORKER)");
  json allocators_meta = probe_plan_allocators(plan, worker);
  std::vector<std::string> sbatch_args = check_executor_flags(f);

  if (f.dry_run) {
    std::cout << plan.cells.size() << " cells (" << plan.settings.size << " size, timeout " << plan.settings.timeout_s << " s):\n";
    for (const auto& c : plan.cells) std::cout << "  " << c.label() << "\n";
    return kExitOk;
  }

  if (f.resume && f.extend) throw mx::ConfigError("--resume and --extend: choose one (--extend also completes missing cells)");
  if (f.retry_failed && !f.resume && !f.extend) throw mx::ConfigError("--retry-failed: needs --resume or --extend");
  if (f.discard_corrupt && !f.resume && !f.extend) throw mx::ConfigError("--discard-corrupt-lines: needs --resume or --extend");
  rs::ResultsDir dir(f.out_dir.empty() && !f.out_given ? default_out_dir("") : f.out_dir,
                     {f.resume, f.extend, f.discard_corrupt, f.command_line});
  for (const auto& n : dir.notes()) std::cerr << "allocmark: " << dir.path() << ": " << n << "\n";
  if (dir.had_results()) refuse_while_slurm_jobs_run(dir.path());
  const bool slurm = f.executor == "slurm";
  json machine = rs::machine_info();
  // Every record this invocation writes carries its id, and so does its entry in meta.json's runs.
  const std::string run_id = rn::random_id();
  json run_entry{{"mode", f.resume ? "resume" : f.extend ? "extend" : "run"}, {"run_id", run_id}, {"executor", f.executor},
                 {"started", std::time(nullptr)}, {"command", f.command_line}, {"matrix", plan.as_json()}, {"matrix_file", matrix_path}};
  json meta = dir.read_meta();
  if (dir.had_results() && meta.is_null())
    throw rs::ResultsError(dir.path() + " holds results but no meta.json; cannot tell what it was run with");
  if (dir.had_results()) {
    // The folder's promise: its cells come from one machine and, unless extended on purpose, one
    // matrix. Cells run by Slurm come from its nodes, each record naming its host, so the machine
    // submitting them need not be the one that ran the earlier cells.
    if (!slurm)
      if (auto diff = rs::machine_differences(meta.value("machine", json::object()), machine); !diff.empty())
      throw mx::ConfigError(dir.path() + " was recorded on another machine (" + diff +
                            "); cells from different machines are not comparable: use another --out");
    if (f.resume)
      if (auto diff = mx::matrix_differences(meta.value("matrix", json::object()), plan.as_json()); !diff.empty())
        throw mx::ConfigError("--resume: the matrix differs from the one recorded in " + dir.path() + "/meta.json: " + diff +
                              ". Resume with the same matrix, or add cells on purpose with --extend");
    meta["runs"].push_back(run_entry);
  } else {
    meta = fresh_meta(plan, matrix_path, machine, allocators_meta, worker, run_entry);
  }
  if (f.extend) {
    // Allocators new to the folder join its description.
    for (const auto& a : allocators_meta) {
      bool known = false;
      for (const auto& b : meta["allocators"]) known = known || b == a;
      if (!known) meta["allocators"].push_back(a);
    }
  }
  absorb_node_machines(meta, dir.path());
  dir.write_meta(meta);
  record_planned_cells(plan, dir.path());

  rn::CellSettings settings = cell_settings(plan, worker, dir.path());
  std::optional<rn::SlurmExecutor> slurm_executor;
  if (slurm)
    slurm_executor.emplace(settings, rn::SlurmOptions{sbatch_args, f.cells_per_task.value_or(1), !f.no_wait,
                                                      std::filesystem::read_symlink("/proc/self/exe").string(),
                                                      std::filesystem::absolute(dir.path()).lexically_normal().string(),
                                                      &std::cerr, run_id});
  // Node descriptions arrive with the cells; meta.json takes them also when the run stops early.
  struct MachinesOnExit {
    rs::ResultsDir& dir;
    bool slurm;
    ~MachinesOnExit() {
      if (!slurm) return;
      try {
        json meta = dir.read_meta();
        absorb_node_machines(meta, dir.path());
        dir.write_meta(meta);
      } catch (const std::exception&) {
      }
    }
  } machines_on_exit{dir, slurm};
  rn::MatrixRunReport report =
      slurm ? rn::run_matrix(plan, dir, *slurm_executor, {f.retry_failed, static_cast<bool>(::isatty(2)), &std::cerr, run_id})
            : run_here(plan, dir, worker, f.retry_failed, run_id);
  if (slurm_executor && f.no_wait) {
    if (slurm_executor->job_id())
      std::cout << fmt::format("submitted Slurm job {} ({}); `allocmark status {}` follows it; when nothing runs, "
                               "`allocmark run ... --out {} --resume` gathers its records into results.jsonl and resubmits what is missing\n",
                               slurm_executor->job_id(), slurm_executor->submission(), dir.path(), dir.path());
    else
      std::cout << "nothing to submit: every cell of this matrix is recorded in " << dir.path() << "\n";
    return kExitOk;
  }
  if (report.interrupted) {
    std::cerr << fmt::format("allocmark: interrupted; {} finished cells are in {}; `allocmark run ... --out {} --resume` completes it\n",
                             report.ran + report.already_recorded, dir.path(), dir.path());
    return kExitInterrupted;
  }
  try {
    rs::Model model = rs::Model::load({dir.path()});
    for (const auto& w : model.warnings()) std::cerr << "allocmark: warning: " << w << "\n";
    std::cout << rs::render_report(model, "table");
  } catch (const rs::ResultsError&) {
  }
  std::cout << fmt::format("\n{} cells run, {} not ok; results in {}/ (results.jsonl, summary.csv, summary.json, meta.json, logs/)\n", report.ran,
                           report.not_ok, dir.path());
  if (report.not_ok_in_folder > report.not_ok)
    std::cout << fmt::format("{} cells of this matrix recorded earlier are not ok; --retry-failed reruns them\n",
                             report.not_ok_in_folder - report.not_ok);
  // The exit code tells the folder's state for this matrix, not only this invocation's cells.
  return report.not_ok_in_folder ? kExitCellsFailed : kExitOk;
}

rn::MatrixRunReport run_in_new_folder(const mx::Plan& plan, const std::string& out, const std::string& command, const std::string& mode) {
  std::string worker = worker_path();
  if (::access(worker.c_str(), X_OK) != 0) throw std::runtime_error("worker not found: " + worker + " (set ALLOCMARK_WORKER)");
  json allocators_meta = probe_plan_allocators(plan, worker);
  rs::ResultsDir dir(out, {false, false, false, command});
  const std::string run_id = rn::random_id();
  json run_entry{{"mode", mode}, {"run_id", run_id}, {"started", std::time(nullptr)}, {"command", command}, {"matrix", plan.as_json()},
                 {"matrix_file", ""}};
  dir.write_meta(fresh_meta(plan, "", rs::machine_info(), allocators_meta, worker, run_entry));
  return run_here(plan, dir, worker, false, run_id);
}

void add_setting_flags(CLI::App* cmd, SettingTexts& texts, const std::vector<std::string>& keys) {
  const mx::Settings defaults;
  for (const auto& row : mx::setting_rows()) {
    if (!*row.flag || (!keys.empty() && std::find(keys.begin(), keys.end(), row.key) == keys.end())) continue;
    const std::string key = row.key;
    if (row.kind == mx::SettingKind::Bool) {  // the flag says the opposite of the default
      const std::string given = row.get(defaults).get<bool>() ? "false" : "true";
      cmd->add_flag_callback(row.flag, [&texts, key, given] { texts[key] = given; }, row.help);
      continue;
    }
    const nlohmann::json def = row.get(defaults);
    std::string help = row.help;
    if (row.kind != mx::SettingKind::Text) help += " (default " + (def.is_string() ? def.get<std::string>() : def.dump()) + ")";
    cmd->add_option_function<std::string>(row.flag, [&texts, key](const std::string& text) { texts[key] = text; }, help);
  }
}

mx::SettingChoices setting_choices(const SettingTexts& texts) {
  mx::SettingChoices out;
  for (const auto& [key, text] : texts) {
    const mx::SettingRow& row = *mx::find_setting(key);
    row.choose(out, mx::setting_from_flag(row, text));
  }
  return out;
}

void add_run_flags(CLI::App* run_cmd, RunFlags& f) {
  run_cmd->add_option("matrix", f.matrix_path, "matrix file (TOML); default configs/quick.toml when no axis flag is given");
  run_cmd->add_option("--allocators,-a", f.allocators_raw, "allocators or variants, comma separated (e.g. glibc,jemalloc:bg)");
  run_cmd->add_option("--workloads,-w", f.workloads_raw, "workloads, comma separated");
  run_cmd->add_option("--threads,-t", f.threads_raw, "thread counts, comma separated (default 1,2)");
  run_cmd->add_option("--program", f.programs,
                      "run your own program as a cell's workload: NAME='COMMAND ARGS' (repeatable; docs/programs.md)");
  run_cmd->add_option("--set", f.sets, "override a workload parameter: workload.param=value (repeatable)");
  run_cmd->add_option("--out,-o", f.out_dir, "results folder (default results/<date-time>)")
      ->each([&f](const std::string&) { f.out_given = true; });
  add_setting_flags(run_cmd, f.settings);
  run_cmd->add_flag("--no-pin", f.no_pin, "the same as --pin none");
  run_cmd->add_flag("--resume", f.resume, "complete an existing results folder of the same matrix: run only the cells it lacks");
  run_cmd->add_flag("--extend", f.extend, "add this matrix's cells to an existing results folder of another matrix (same machine)");
  run_cmd->add_flag("--retry-failed", f.retry_failed, "with --resume/--extend: also rerun cells recorded as failed, crashed or timeout");
  run_cmd->add_flag("--discard-corrupt-lines", f.discard_corrupt,
                    "with --resume/--extend: move invalid lines of results.jsonl to results.corrupt.jsonl instead of stopping");
  run_cmd->add_flag("--dry-run", f.dry_run, "check the matrix and list its cells without running them");
  run_cmd->add_option("--executor", f.executor, "where cells run: local (one after another on this host) or slurm (one sbatch job array)")
      ->check(CLI::IsMember({"local", "slurm"}));
  run_cmd->add_option("--slurm-opt", f.slurm_opts, "with --executor slurm: sbatch options, e.g. \"--partition=p --time=2:00:00 --exclusive\" (repeatable)");
  run_cmd->add_option("--cells-per-task", f.cells_per_task, "with --executor slurm: cells each array task runs, one after another (default 1)");
  run_cmd->add_flag("--no-wait", f.no_wait, "with --executor slurm: return after submitting the array (`allocmark status DIR` follows it)");
}

Subcommand add_run_command(CLI::App& app) {
  auto f = std::make_shared<RunFlags>();
  auto* run_cmd = app.add_subcommand("run", "run a matrix: allocator x workload x threads x repetitions");
  add_run_flags(run_cmd, *f);
  return {run_cmd, [f] {
            f->command_line = command_line();
            return run_command(*f);
          }};
}

}  // namespace allocmark::cli
