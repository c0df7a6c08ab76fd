// `allocmark cell SPEC.json [--record FILE]`: runs one cell on this host with the same unit as a
// local run (fresh worker, preload proof, exact per-phase peaks, RSS sampled here) and writes its
// finished record. The entry point for executors that place cells on other hosts.
//
// SPEC: {"cell": <as in a plan>, "settings": {the settings rows of scope kCellSpec
// (harness/settings/settings.h); one absent takes its default}, "log": "path of the worker's log"}, and from a batch executor also "attempt" (the record's attempt, as the driver
// would stamp it) and "machines_dir" (where this host's machine description goes, HOST.json, once
// per host, for the folder's meta.json). Without "log" the log is FILE.log beside --record, or
// none (a program cell, whose stdout is kept beside its log, needs one).
//
// Where a cell writes. A spec belongs to one folder, its home: a spec at F/slurm/SUB/cells/N.json
// (where the Slurm executor writes them) belongs to the results folder F; any other spec belongs to
// the folder that holds it. The log, data_root (default HOME/data), machines_dir and --record must
// lie inside the home, reached from it through real folders only: a path that leaves it (an
// absolute path elsewhere, "..") or a symbolic link at any step, or as the file or folder itself,
// is refused (exit 2) before anything runs. So a spec taken from someone else's results folder can
// neither truncate, remove nor write anything outside that folder.
//
// "run_id" (from a batch executor): the submitting run's id, stamped on the record with a
// record_id of its own; a cell run by hand is a run of its own.
#include <fmt/format.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>

#include "harness/cli/common.h"
#include "harness/record/record_keys.h"
#include "harness/results/folder_layout.h"
#include "harness/results/results_dir.h"
#include "harness/runner/cell_runner.h"
#include "harness/runner/executor.h"
#include "harness/runner/matrix_runner.h"
#include "units/input_file.h"

namespace allocmark::cli {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using results::Folder;

// The folder a spec belongs to (see the header comment).
fs::path home_of(const fs::path& spec) {
  const fs::path cells = spec.parent_path(), submission = cells.parent_path(), slurm = submission.parent_path();
  if (cells.filename() == results::layout::kSubmissionCells && slurm.filename() == results::layout::kSlurm &&
      !slurm.parent_path().empty())
    return slurm.parent_path();
  return spec.parent_path();
}

// Refuses `path` (named by `what`) unless it lies inside `home` and every step from the home to it
// is a real folder, and the last step, when it exists, is `wanted`.
void check_inside(const fs::path& home, const std::string& path, const std::string& what, Folder::Type wanted) {
  const fs::path target = fs::absolute(path).lexically_normal();
  const fs::path rel = target.lexically_relative(home);
  if (rel.empty() || *rel.begin() == ".." || rel == ".")
    throw matrix::ConfigError(fmt::format("{}: {} is outside {}, the folder this cell belongs to (a cell writes only "
                                          "inside it: see `allocmark cell --help`)",
                                          what, path, home.string()));
  if (std::distance(rel.begin(), rel.end()) == 1 && wanted == Folder::Type::file && results::layout::is_own_entry(rel.string()))
    throw matrix::ConfigError(fmt::format("{}: {} is the {} of the folder this cell belongs to; a cell never writes over it",
                                          what, path, rel.string()));
  try {
    std::optional<Folder> at;
    at.emplace(home.string());
    std::vector<std::string> steps;
    for (const auto& step : rel) steps.push_back(step.string());
    for (std::size_t i = 0; i + 1 < steps.size(); ++i) {
      std::optional<Folder> next = at->sub_if_exists(steps[i]);
      if (!next) return;  // created by the cell, inside the home
      at = std::move(next);
    }
    const Folder::Type found = at->type(steps.back());
    if (found != Folder::Type::missing && found != wanted)
      throw results::ResultsError(results::misplaced(at->path_of(steps.back()), found, results::type_name(wanted)));
  } catch (const results::ResultsError& e) {
    throw matrix::ConfigError(what + ": " + e.what());
  }
}

json read_spec(const std::string& spec_path) {
  std::error_code ec;
  if (fs::is_directory(spec_path, ec))
    throw matrix::ConfigError(spec_path + ": is a folder, not a cell description (a JSON file, e.g. DIR/slurm/s1/cells/0.json)");
  if (std::string problem = units::input_file_problem(spec_path); !problem.empty())
    throw matrix::ConfigError("spec: " + problem + " (expected a cell description, JSON)");
  std::ifstream in(spec_path, std::ios::binary);
  if (!in) throw matrix::ConfigError(spec_path + ": cannot read the cell description: " + std::strerror(errno));
  json spec = json::parse(in, nullptr, false);
  if (spec.is_discarded()) throw matrix::ConfigError(spec_path + ": not valid JSON (expected a cell description)");
  if (!spec.is_object()) throw matrix::ConfigError(spec_path + ": expected a JSON object (a cell description)");
  return spec;
}

int run_one(const std::string& spec_path, const std::string& record_path) {
  const json spec = read_spec(spec_path);
  const fs::path home = home_of(fs::absolute(spec_path).lexically_normal());
  matrix::Cell cell;
  try {
    cell = matrix::checked_cell(spec.contains("cell") ? spec["cell"] : json());
  } catch (const matrix::ConfigError& e) {
    throw matrix::ConfigError(spec_path + ": " + e.what());
  }
  const json s = spec.value("settings", json::object());
  if (!s.is_object()) throw matrix::ConfigError(spec_path + ": settings: expected an object");
  runner::CellSettings settings;
  static_cast<matrix::Settings&>(settings) = matrix::settings_from_json(s, matrix::kCellSpec, spec_path + ": settings");
  settings.worker_path = worker_path();
  if (spec.contains("log") && !spec["log"].is_string()) throw matrix::ConfigError(spec_path + ": log: expected a path (a string)");
  if (spec.contains("machines_dir") && !spec["machines_dir"].is_string())
    throw matrix::ConfigError(spec_path + ": machines_dir: expected a path (a string)");
  if (spec.contains("attempt") && !spec["attempt"].is_number_integer())
    throw matrix::ConfigError(spec_path + ": attempt: expected an integer of at least 1");
  const int attempt = spec.value("attempt", 1);
  if (attempt < 1) throw matrix::ConfigError(spec_path + ": attempt: expected an integer of at least 1");
  if (spec.contains("run_id") && !spec["run_id"].is_string()) throw matrix::ConfigError(spec_path + ": run_id: expected a string");
  const std::string run_id = spec.value("run_id", "");

  // Every place the cell writes, checked before it runs (see the header comment).
  if (!record_path.empty()) {
    check_writable_file(record_path, "--record");
    check_inside(home, record_path, "--record", Folder::Type::file);
  }
  const std::string log = spec.value("log", record_path.empty() ? std::string() : record_path + ".log");
  if (log.empty() && matrix::is_program(cell.workload))
    throw matrix::ConfigError(spec_path + ": a program cell keeps its stdout beside its log: give the spec a \"log\" or pass --record");
  if (!log.empty()) check_inside(home, log, spec_path + ": log", Folder::Type::file);
  if (settings.data_root.empty()) settings.data_root = (home / results::layout::kData).string();
  check_inside(home, settings.data_root, spec_path + ": settings.data_root", Folder::Type::folder);
  const std::string machines = spec.value("machines_dir", "");
  if (!machines.empty()) check_inside(home, machines, spec_path + ": machines_dir", Folder::Type::folder);

  if (!machines.empty()) runner::describe_this_node(machines);
  runner::CellHooks hooks{nullptr, [] { return runner::g_interrupted.load(); }};
  runner::CellOutcome outcome = runner::run_cell_here(cell, settings, log.empty() ? "/dev/null" : log, hooks);
  if (outcome.interrupted) return kExitInterrupted;
  if (spec.contains("attempt")) outcome.record[record::kRecordAttempt] = attempt;
  runner::stamp_record_ids(outcome.record, run_id);
  std::string text = outcome.record.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";  // never lose a cell to a stray byte
  if (record_path.empty()) {
    std::cout << text;
  } else {
    try {
      results::write_file_atomically(record_path, text);
    } catch (const results::ResultsError& e) {
      throw runner::RunStopped(e.what(), 0, record_path);
    }
  }
  return outcome.record.value(record::kRecordStatus, "") == "ok" ? kExitOk : kExitCellsFailed;
}

}  // namespace

Subcommand add_cell_command(CLI::App& app) {
  auto spec = std::make_shared<std::string>();
  auto record = std::make_shared<std::string>();
  auto* cell = app.add_subcommand("cell", "run one described cell on this host and write its record (for executors); "
                                          "it writes only inside the folder its description belongs to");
  cell->add_option("spec", *spec, "cell description (JSON file)")->required();
  cell->add_option("--record", *record, "write the record here (atomically) instead of to standard output");
  return {cell, [spec, record] { return run_one(*spec, *record); }};
}

}  // namespace allocmark::cli
