#include "harness/runner/session.h"

#include <fmt/format.h>
#include <unistd.h>

#include <ctime>
#include <fstream>
#include <iostream>

#include "harness/placement/placement.h"
#include "harness/record/cell.h"
#include "harness/record/event_keys.h"
#include "harness/results/folder_layout.h"
#include "harness/results/machine.h"
#include "harness/results/meta.h"
#include "harness/results/model.h"
#include "harness/results/recommendation.h"
#include "harness/results/reporters/reporter.h"
#include "harness/results/reporters/text.h"
#include "harness/results/results_dir.h"
#include "harness/runner/environment.h"
#include "harness/runner/probe.h"
#include "harness/runner/slurm_executor.h"
#include "harness/runner/system_thp.h"
#include "harness/topology/topology.h"

namespace allocmark::runner {
namespace {

using nlohmann::json;
namespace mx = allocmark::matrix;
namespace rs = allocmark::results;

// Every allocator is preloaded once before anything runs: a library of a declared kind that is
// not that allocator is a configuration error, not N failed cells.
json probe_plan_allocators(const mx::Plan& plan, const std::string& worker) {
  json out = json::array();
  for (const auto& a : plan.allocators) {
    json probe = probe_allocator(a, worker);
    namespace event_key = record::event_key;  // the worker's probe event (probe_allocator)
    if (probe.contains(event_key::error) && a.backend != "generic")
      throw mx::ConfigError("allocator '" + a.name + "' (" + (a.library.empty() ? "C library" : a.library) +
                            "): " + probe[event_key::error].get<std::string>());
    // The allocator as the matrix has it, less its thp mode (meta.json's matrix.allocators says
    // that; this list is what served each allocator), and what the probe found.
    mx::ResolvedAllocator as_served = a;
    as_served.thp.clear();
    json entry = record::meta_allocator(as_served);
    namespace served = rs::meta::served;
    entry.update({{served::kServedBy, probe.value(event_key::library, "")}, {served::kVersion, probe.value(event_key::version, "")},
                  {served::kOptions, probe.value(event_key::options, json::object())},
                  {served::kPreloadCheck, probe.value(event_key::error, "ok")}});
    out.push_back(std::move(entry));
  }
  return out;
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

// Every cell any run planned for this folder, key -> label: what `allocmark status` counts against.
void record_planned_cells(const mx::Plan& plan, const std::string& folder) {
  json planned = json::object();
  if (std::ifstream in(rs::layout::path_in(folder, rs::layout::kCells)); in) {
    planned = json::parse(in, nullptr, false);
    if (planned.is_discarded() || !planned.is_object()) planned = json::object();
  }
  for (const auto& c : plan.cells) planned[c.key()] = c.label();
  rs::write_file_atomically(rs::layout::path_in(folder, rs::layout::kCells), planned.dump(1) + "\n");
}

}  // namespace

json allocmark_identity() {
  return {{rs::meta::identity::kVersion, ALLOCMARK_VERSION}, {rs::meta::identity::kGitCommit, ALLOCMARK_GIT_COMMIT}};
}

namespace {

json fresh_meta(const mx::Plan& plan, const std::string& matrix_path, const json& machine, const json& allocators_meta,
                const std::string& worker, const json& run_entry) {
  // The machine's NUMA layout and what this run was allowed (taskset, numactl, cpuset): what the
  // placement of every cell was planned against.
  return rs::meta::encode({allocmark_identity(), machine, allocators_meta, describe_backends(worker), plan.as_json(),
                           matrix_path, stripped_environment(), topology::to_json(topology::detect()),
                           placement::to_json(placement::current_allowed()), run_entry});
}

CellSettings cell_settings(const mx::Plan& plan, const std::string& worker, const std::string& folder) {
  CellSettings s;
  static_cast<mx::Settings&>(s) = plan.settings;
  s.worker_path = worker;
  s.data_root = rs::layout::path_in(folder, rs::layout::kData);
  return s;
}

}  // namespace

RunSession::RunSession(const mx::Plan& plan, SessionOptions options)
    : plan_(plan), options_(std::move(options)), progress_redraws_(progress_redraws()) {
  if (options_.executor.runs_here()) check_placement_here(plan_);
  if (::access(options_.worker.c_str(), X_OK) != 0)
    throw std::runtime_error("worker not found: " + options_.worker + " (set ALLOCMARK_WORKER)");
  allocators_ = probe_plan_allocators(plan_, options_.worker);
  if (!options_.system_thp.empty()) {
    if (!options_.executor.runs_here())
      throw mx::ConfigError("--system-thp: sets this machine's mode, and --executor " + options_.executor.name() +
                            " runs cells on other machines");
    if (auto problem = system_thp_problem(); !problem.empty()) throw mx::ConfigError("--system-thp: " + problem);
    // Before anything is written: a second run changing the machine's mode is refused here.
    thp_lock_.emplace(options_.command);
  }
}

SessionOutcome RunSession::run() {
  const SessionOptions& o = options_;
  // Asked before the folder's records are read and its parts gathered: a task that ends between
  // the two would leave a record no one gathers and its cell run a second time.
  refuse_while_cells_run_elsewhere(o.out_dir, "run again with --resume");
  rs::ResultsDir dir(o.out_dir, {o.resume, o.extend, o.discard_corrupt, o.command});
  for (const auto& n : dir.notes()) std::cerr << "allocmark: " << dir.path() << ": " << n << "\n";
  // The records there read once as every reader, and the summaries after each cell, will read them:
  // one no reader accepts (a wrong shape, a value no measurement gives) stops the run here, naming
  // its line, before the machine's settings, meta.json or a cell are touched.
  if (dir.had_results()) (void)rs::Model::load({dir.path()}, rs::LoadOptions{.require_cells = false, .own_folder = true});
  // Before the machine is described: meta.json says the mode the cells ran under. Put back when
  // this function returns or throws (and by its restorer if the driver is killed).
  std::optional<SystemThpSwitch> thp_switch;
  if (!o.system_thp.empty()) thp_switch.emplace(o.system_thp, *thp_lock_, std::cerr);
  json machine = rs::machine_info();
  if (thp_switch) machine[rs::machine_key::thp_enabled_set_by_run] = {{"mode", o.system_thp}, {"was", thp_switch->original()}};
  // Every record this invocation writes carries its id, and so does its entry in meta.json's runs.
  const std::string run_id = random_id();
  const std::string mode = !o.mode.empty() ? o.mode : o.resume ? "resume" : o.extend ? "extend" : "run";
  namespace entry = rs::meta::run_entry;
  json run_entry{{entry::kMode, mode}, {entry::kRunId, run_id}, {entry::kExecutor, o.executor.name()}, {entry::kStarted, std::time(nullptr)},
                 {entry::kCommand, o.command}, {rs::meta::kMatrix, plan_.as_json()}, {rs::meta::kMatrixFile, o.matrix_path}};
  json meta = dir.read_meta();
  if (dir.had_results() && meta.is_null())
    throw rs::ResultsError(fmt::format("{} holds results but no {}; cannot tell what it was run with", dir.path(), rs::layout::kMeta));
  if (dir.had_results()) {
    // The folder's promise: its cells come from one machine and, unless extended on purpose, one
    // matrix. Cells run by a batch scheduler come from its nodes, each record naming its host, so
    // the machine submitting them need not be the one that ran the earlier cells.
    if (o.executor.runs_here())
      if (auto diff = rs::machine_differences(meta.value(rs::meta::kMachine, json::object()), machine); !diff.empty())
        throw mx::ConfigError(dir.path() + " was recorded on another machine (" + diff +
                              "); cells from different machines are not comparable: use another --out");
    if (o.resume)
      if (auto diff = mx::matrix_differences(meta.value(rs::meta::kMatrix, json::object()), plan_.as_json()); !diff.empty())
        throw mx::ConfigError("--resume: the matrix differs from the one recorded in " + rs::layout::path_in(dir.path(), rs::layout::kMeta) + ": " + diff +
                              ". Resume with the same matrix, or add cells on purpose with --extend");
    meta[rs::meta::kRuns].push_back(run_entry);
  } else {
    meta = fresh_meta(plan_, o.matrix_path, machine, allocators_, o.worker, run_entry);
  }
  if (o.extend) {
    // Allocators new to the folder join its description.
    for (const auto& a : allocators_) {
      bool known = false;
      for (const auto& b : meta[rs::meta::kAllocators]) known = known || b == a;
      if (!known) meta[rs::meta::kAllocators].push_back(a);
    }
  }
  add_node_machines(meta, dir.path());
  dir.write_meta(meta);
  record_planned_cells(plan_, dir.path());

  std::unique_ptr<Executor> executor =
      o.executor.make(cell_settings(plan_, o.worker, dir.path()), dir.path(), run_id, &std::cerr);
  // What the executor learns as cells run joins meta.json also when the run stops early.
  struct DescribeOnExit {
    rs::ResultsDir& dir;
    const Executor& executor;
    ~DescribeOnExit() {
      try {
        json meta = dir.read_meta();
        if (executor.describe(meta)) dir.write_meta(meta);
      } catch (const std::exception&) {
      }
    }
  } describe_on_exit{dir, *executor};
  SessionOutcome outcome;
  outcome.report = run_matrix(plan_, dir, *executor, {o.retry_failed, progress_redraws_, &std::cerr, run_id});
  outcome.folder = dir.path();
  outcome.returned_early = executor->returned_early();
  return outcome;
}

std::string session_summary(const SessionOutcome& outcome, std::ostream& messages, bool with_recommendation) {
  if (outcome.returned_early) return *outcome.returned_early;
  const MatrixRunReport& report = outcome.report;
  const std::string& folder = outcome.folder;
  if (report.interrupted) {
    messages << fmt::format("allocmark: interrupted; {} finished cells are in {}; `allocmark run ... --out {} --resume` completes it\n",
                            report.ran + report.already_recorded, folder, folder);
    return "";
  }
  std::string text;
  try {
    rs::Model model = rs::Model::load({folder});
    for (const auto& w : model.warnings()) messages << "allocmark: warning: " << w << "\n";
    // The answer per workload, not every phase: `show` prints the full table.
    if (with_recommendation) text = rs::text::recommendation_text(rs::recommend(model), folder);
    // The recommendation ranks time too: say where this machine makes times depend on cell order.
    if (std::string notice = rs::page_reporting_notice(rs::meta::read(folder).value); !notice.empty() && !text.empty())
      text += "\nNote on time: " + notice + ".\n";
  } catch (const rs::ResultsError&) {
  }
  namespace lay = rs::layout;
  text += fmt::format("\n{} cells run, {} not ok; results in {}/ ({}, {}, {}, {}, {}/)\n", report.ran, report.not_ok, folder,
                      lay::kResults, lay::kSummaryCsv, lay::kSummaryJson, lay::kMeta, lay::kLogs);
  if (report.not_ok_in_folder > report.not_ok)
    text += fmt::format("{} cells of this matrix recorded earlier are not ok; --retry-failed reruns them\n",
                        report.not_ok_in_folder - report.not_ok);
  return text;
}

}  // namespace allocmark::runner
