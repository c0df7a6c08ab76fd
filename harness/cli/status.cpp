// `allocmark status DIR [--json]`: where a results folder stands (harness/runner/folder_status.h);
// this file parses its flags and prints the answer as text or JSON.
#include <fmt/format.h>

#include <filesystem>
#include <iostream>

#include "harness/cli/common.h"
#include "harness/results/folder_layout.h"
#include "harness/results/model.h"
#include "harness/results/results_dir.h"
#include "harness/results/safe_text.h"
#include "harness/runner/folder_status.h"

namespace allocmark::cli {
namespace {

using nlohmann::json;
namespace rs = allocmark::results;

int status(const std::string& dir, bool as_json) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) throw rs::ResultsError(dir + ": no such results folder");
  if (!fs::exists(rs::layout::path_in(dir, rs::layout::kMeta), ec))
    throw rs::ResultsError(fmt::format("{}: no {} (not a results folder?)", dir, rs::layout::kMeta));
  const runner::QueueSnapshot queue = runner::snapshot_queue(dir);  // before the records: see its header
  rs::Model model = rs::Model::load({dir}, {/*require_cells=*/false});
  print_reading_notes(model);
  const json s = runner::folder_status(dir, queue, model);
  if (as_json) {
    std::cout << s.dump(2) << "\n";
    return kExitOk;
  }
  const auto n = [&](const char* field) { return s[field].get<std::size_t>(); };
  // Host, node and submission names and the lock's text come from the folder: shown, never obeyed.
  std::string text = fmt::format("{}: {} cells: {} ok, {} failed, {} running, {} pending, {} missing\n", dir, n("cells"), n("ok"),
                                 n("failed"), n("running"), n("pending"), n("missing"));
  if (!s["hosts"].empty()) {
    std::size_t width = 4;
    for (const auto& [name, c] : s["hosts"].items()) width = std::max(width, name.size());
    text += fmt::format("  {:<{}}  {:>6}  {:>6}  {:>7}\n", "host", width, "ok", "failed", "running");
    for (const auto& [name, c] : s["hosts"].items())
      text += fmt::format("  {:<{}}  {:>6}  {:>6}  {:>7}\n", name.empty() ? "?" : name, width, c["ok"].get<std::size_t>(),
                          c["failed"].get<std::size_t>(), c["running"].get<std::size_t>());
  }
  for (const auto& j : s["slurm_jobs"])
    text += fmt::format("Slurm job {} ({}): {} tasks running, {} pending\n", j["job"].get<long>(),
                        j["submission"].get<std::string>(), j["tasks_running"].get<std::size_t>(),
                        j["tasks_pending"].get<std::size_t>());
  if (!s["squeue_error"].is_null())
    text += "squeue failed (" + s["squeue_error"].get<std::string>() + "): running and pending cells are counted as missing\n";
  const bool held = !s["run_in_progress"].is_null();
  if (held) text += "a run holds the folder: " + s["run_in_progress"].get<std::string>() + "\n";
  if (n("missing") && !held && n("running") + n("pending") == 0)
    text += fmt::format("`allocmark run ... --out {} --resume` runs the {} missing cells{}\n", dir, n("missing"),
                        n("failed") ? " (add --retry-failed to rerun the failed ones)" : "");
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
