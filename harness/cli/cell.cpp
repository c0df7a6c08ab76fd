// `allocmark cell SPEC.json [--record FILE]`: runs one cell on this host with the same unit as a
// local run (fresh worker, preload proof, exact per-phase peaks, RSS sampled here) and writes its
// finished record. The entry point for executors that place cells on other hosts.
//
// SPEC: {"cell": <as in a plan>, "settings": {"timeout_s", "sample_ms", "max_timeline_points",
// "pin", "nodes", "latency_every", "node_figures"}, "log": "path of the worker's log"}, and from a batch executor also "attempt" (the
// record's attempt, as the driver would stamp it) and "machines_dir" (where this host's machine
// description goes, HOST.json, once per host, for the folder's meta.json),
// "data_root" and "keep_data" (data_root defaults to a data/ folder beside the log), and "run_id"
// (the submitting run's id, stamped on the record with a record_id of its own).
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iostream>

#include "harness/cli/common.h"
#include "harness/results/machine.h"
#include "harness/results/results_dir.h"
#include "harness/runner/cell_runner.h"
#include "harness/runner/matrix_runner.h"

namespace allocmark::cli {
namespace {

using nlohmann::json;

int run_one(const std::string& spec_path, const std::string& record_path) {
  std::ifstream in(spec_path);
  if (!in) throw matrix::ConfigError(spec_path + ": cannot read the cell description");
  json spec = json::parse(in, nullptr, false);
  if (spec.is_discarded() || !spec.is_object()) throw matrix::ConfigError(spec_path + ": not a JSON object");
  matrix::Cell cell = matrix::cell_from_json(spec.value("cell", json::object()));
  json s = spec.value("settings", json::object());
  runner::CellSettings settings{worker_path(), s.value("timeout_s", 300.0), s.value("sample_ms", 10),
                                s.value("max_timeline_points", 2000), matrix::recorded_pin(s), "", false};
  settings.latency_every = s.value("latency_every", 0);
  settings.node_figures = s.value("node_figures", true);
  if (!(settings.timeout_s > 0) || settings.sample_ms < 1 || settings.max_timeline_points < 2 || settings.latency_every < 0)
    throw matrix::ConfigError(spec_path + ": settings: timeout_s must be > 0, sample_ms >= 1, max_timeline_points >= 2, latency_every >= 0");
  std::string log = spec.value("log", record_path.empty() ? std::string("/dev/null") : record_path + ".log");
  settings.data_root = s.value("data_root", std::string());
  if (settings.data_root.empty())
    settings.data_root = (log == "/dev/null" ? std::filesystem::current_path() : std::filesystem::absolute(log).parent_path()).string() + "/data";
  settings.keep_data = s.value("keep_data", false);
  runner::CellHooks hooks{nullptr, [] { return runner::g_interrupted.load(); }};
  const int attempt = spec.value("attempt", 1);
  if (attempt < 1) throw matrix::ConfigError(spec_path + ": attempt must be >= 1");
  // A batch task's records carry the submitting run's id; a cell run by hand is a run of its own.
  if (spec.contains("run_id") && !spec["run_id"].is_string()) throw matrix::ConfigError(spec_path + ": run_id must be a string");
  const std::string run_id = spec.value("run_id", "");
  if (std::string machines = spec.value("machines_dir", ""); !machines.empty()) {
    json machine = results::machine_info();
    std::string path = machines + "/" + machine.value("host", "unknown") + ".json";
    std::error_code ec;
    std::filesystem::create_directories(machines, ec);
    if (!std::filesystem::exists(path, ec)) results::write_file_atomically(path, machine.dump(2) + "\n");
  }
  runner::CellOutcome outcome = runner::run_cell(cell, settings, log, hooks);
  if (outcome.interrupted) return kExitInterrupted;
  if (spec.contains("attempt")) outcome.record["attempt"] = attempt;
  runner::stamp_record_ids(outcome.record, run_id);
  std::string text = outcome.record.dump() + "\n";
  if (record_path.empty()) {
    std::cout << text;
  } else {
    std::string tmp = record_path + ".tmp";
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << text;
    out.close();
    if (!out || ::rename(tmp.c_str(), record_path.c_str()) != 0) {
      ::unlink(tmp.c_str());
      throw runner::RunStopped("cannot write " + record_path, 0, record_path);
    }
  }
  return outcome.record.value("status", "") == "ok" ? kExitOk : kExitCellsFailed;
}

}  // namespace

Subcommand add_cell_command(CLI::App& app) {
  auto spec = std::make_shared<std::string>();
  auto record = std::make_shared<std::string>();
  auto* cell = app.add_subcommand("cell", "run one described cell on this host and write its record (for executors)");
  cell->add_option("spec", *spec, "cell description (JSON file)")->required();
  cell->add_option("--record", *record, "write the record here (atomically) instead of to standard output");
  return {cell, [spec, record] { return run_one(*spec, *record); }};
}

}  // namespace allocmark::cli
