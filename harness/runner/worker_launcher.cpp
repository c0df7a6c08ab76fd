// Workload cells: allocmark-worker measures itself and reports every phase on fd 3; the driver
// keeps its events as they come and gives the cell a data folder of its own.
#include <unistd.h>

#include <filesystem>
#include <stdexcept>

#include "harness/record/cell.h"
#include "harness/results/folder.h"
#include "harness/results/folder_layout.h"
#include "harness/runner/cell_launcher.h"
#include "harness/runner/environment.h"

namespace allocmark::runner {
namespace {

using nlohmann::json;

// The data root (DIR/data) as an entry of the folder above it (the results folder), so that the
// root and every cell folder in it are reached without following links: a link planted there
// never sends a worker's data, or its removal, outside the results folder.
struct DataRoot {
  results::Folder above;
  std::string name;
};
DataRoot locate_data_root(const std::string& data_root) {
  std::filesystem::path root = std::filesystem::path(data_root).lexically_normal();
  if (root.filename().empty()) root = root.parent_path();
  const std::string above = root.parent_path().empty() ? "." : root.parent_path().string();
  std::error_code ec;
  std::filesystem::create_directories(above, ec);
  return {results::Folder(above), root.filename().string()};
}

class WorkerLauncher : public CellLauncher {
 public:
  WorkerLauncher(const matrix::Cell& cell, const CellSettings& settings, const std::string& log_path)
      : cell_(cell), settings_(settings), log_path_(log_path), data_dir_(cell_data_dir(settings, log_path)) {}

  Spawned start() override {
    if (!data_dir_.empty()) {
      try {
        DataRoot root = locate_data_root(settings_.data_root);
        root.above.sub(root.name, /*create=*/true);
      } catch (const results::ResultsError& e) {
        throw std::runtime_error(std::string("cannot create the data folder: ") + e.what());
      }
    }
    SpawnOptions options;
    apply_thp_mode(cell_.allocator, options);
    return spawn_worker(settings_.worker_path, {"--cell", worker_spec(cell_, settings_, data_dir_).dump()},
                        worker_environment(cell_.allocator), log_path_, options);
  }

  void take_event(const json& event, RecordBuilder& builder) override { builder.on_event(event); }

  // A cell that crashed or timed out leaves nothing behind either.
  void clean_up() override {
    if (data_dir_.empty() || settings_.keep_data) return;
    try {
      DataRoot root = locate_data_root(settings_.data_root);
      if (auto data = root.above.sub_if_exists(root.name)) data->remove_tree(results::layout::data_folder_name(log_path_));
      root.above.remove_if_empty(root.name);  // only when no other cell's folder is kept there
    } catch (const results::ResultsError&) {
      // A data root that became a link is left alone, and what is below it; the record counts more.
    }
  }

 private:
  const matrix::Cell& cell_;
  const CellSettings& settings_;
  const std::string log_path_;
  const std::string data_dir_;
};

}  // namespace

std::string cell_data_dir(const CellSettings& settings, const std::string& log_path) {
  if (settings.data_root.empty()) return "";
  return settings.data_root + "/" + results::layout::data_folder_name(log_path);
}

json worker_spec(const matrix::Cell& cell, const CellSettings& settings, const std::string& data_dir) {
  json spec = matrix::settings_json(settings, matrix::kWorker);
  spec.update(record::worker_cell(cell));
  spec.update({{"driver_pid", ::getpid()}, {"data_dir", data_dir}});
  return spec;
}

std::unique_ptr<CellLauncher> worker_launcher(const matrix::Cell& cell, const CellSettings& settings, const std::string& log_path) {
  return std::make_unique<WorkerLauncher>(cell, settings, log_path);
}

}  // namespace allocmark::runner
