// One cell, start to finish, on this host: start its process with the allocator preloaded (the
// worker, or a program cell's command: cell_launcher.h), sample its RSS from /proc/PID on the
// parent's clock, collect its events until the report pipe closes, and hand back the finished
// record. Local runs call it from the local executor; a batch scheduler runs it on the cell's own
// host through `allocmark cell`.
#pragma once

#include <functional>
#include <nlohmann/json.hpp>
#include <string>

#include "harness/matrix/plan.h"

namespace allocmark::runner {

// How to run a cell: the plan's settings (data_root: where cells keep on-disk state, each in
// DATA_ROOT/<its log's name>.data, removed once its worker has ended unless keep_data; empty: no
// folder) and the worker to start.
struct CellSettings : matrix::Settings {
  std::string worker_path;
};

struct CellHooks {
  std::function<void()> on_tick;          // about once a second while the cell runs; may be empty
  std::function<bool()> stop_requested;   // true: kill the worker, report `interrupted`; may be empty
};

struct CellOutcome {
  nlohmann::json record;     // one results.jsonl object
  bool interrupted = false;  // not to be recorded: the cell did not finish
};

// Throws std::runtime_error when the worker cannot be started at all (no pipe, log or fork).
CellOutcome run_cell_here(const matrix::Cell& cell, const CellSettings& settings, const std::string& log_path,
                          const CellHooks& hooks = {});

// The description of a cell the worker reads (its argv): the cell plus how to run it.
nlohmann::json worker_spec(const matrix::Cell& cell, const CellSettings& settings, const std::string& data_dir);

// The cell's data folder (see CellSettings::data_root); "" when there is no data root.
std::string cell_data_dir(const CellSettings& settings, const std::string& log_path);

}  // namespace allocmark::runner
