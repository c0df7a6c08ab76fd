// What every subcommand shares: exit codes, the registration shape, and small flag helpers.
// One file per subcommand registers itself on the CLI11 app and returns the function that runs it;
// main.cpp only dispatches and turns exceptions into exit codes.
#pragma once

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

#include "harness/matrix/config.h"
#include "harness/matrix/plan.h"

namespace allocmark::results {
class Model;
}

namespace allocmark::cli {

// The driver's exit codes (README "Exit codes"; docs/ARCHITECTURE.md "What a results folder promises").
enum ExitCode : int {
  kExitOk = 0,           // every cell ok (or: a command that reads results succeeded)
  kExitCellsFailed = 1,  // the matrix ran; some cell failed, crashed or timed out (all recorded)
  kExitUsage = 2,        // bad usage, configuration or input: nothing was run or written
  kExitStopped = 3,      // a run stopped early on an environment failure (disk full, spawn failed); finished cells are recorded
  kExitInterrupted = 130 // SIGINT/SIGTERM: finished cells are recorded
};

struct Subcommand {
  CLI::App* app = nullptr;
  std::function<int()> run;
};

Subcommand add_list_command(CLI::App& app);
Subcommand add_run_command(CLI::App& app);
Subcommand add_show_command(CLI::App& app);
Subcommand add_cell_command(CLI::App& app);
Subcommand add_baseline_command(CLI::App& app);
Subcommand add_gate_command(CLI::App& app);
Subcommand add_plot_command(CLI::App& app);
Subcommand add_compare_command(CLI::App& app);
Subcommand add_report_command(CLI::App& app);
Subcommand add_status_command(CLI::App& app);
Subcommand add_merge_command(CLI::App& app);
Subcommand add_advise_command(CLI::App& app);
Subcommand add_lab_command(CLI::App& app);
Subcommand add_topology_command(CLI::App& app);
Subcommand add_trace_command(CLI::App& app);
Subcommand add_build_command(CLI::App& app);

// "a,b" "c" -> {"a","b","c"}; empty items are an error naming the flag (",," or a trailing comma
// is a typo, not a request for a default).
std::vector<std::string> split_commas(const std::vector<std::string>& items, const std::string& flag);

// -o FILE of the commands that write a file: everything that would make the write fail (a folder,
// a missing or read-only folder, a read-only file, a device or fifo), and everything that would
// destroy results: a file inside one of the folders `reading` that the command reads and that a
// run wrote there (results/folder_layout.h: results.jsonl, meta.json, logs/, parts/, ...), or such
// a file of any other results folder (a folder holding results.jsonl or meta.json). The path is
// judged both as written and with every link followed; checked before any work; invalid_argument
// naming the flag.
void check_output_file(const std::string& out, const std::string& flag = "-o",
                       const std::vector<std::string>& reading = {});
// Only the first half: whether a file can be written at `out` (not a folder, device or fifo; its
// folder exists and is writable; the file, if any, is writable). For `cell --record`, whose place
// in a results folder is its own rule.
void check_writable_file(const std::string& out, const std::string& flag);
// --out FOLDER of the commands that write several files into a folder (plot, compare --charts):
// not a file, creatable or writable, and not inside a run's own entries (logs/, parts/, ...) of
// a folder in `reading` or of any results folder. invalid_argument naming the flag.
void check_output_folder(const std::string& out, const std::string& flag, const std::vector<std::string>& reading = {});

// What a reader says on stderr before its answer: each folder a run is writing now
// (Model::writer_notices) and the model's warnings, each as one terminal-safe line.
void print_reading_notes(const results::Model& model);
// The same for a folder read without a Model of its own here (compare, plot): results::writer_notice.
void print_writer_notice(const std::string& dir);
// Where the machine of any of `dirs` makes times depend on cell order (results::page_reporting_notice:
// free page reporting), one note on stderr naming those folders: the readers that rank or compare
// times (show, compare) say it as `run`'s recommendation and the report do (plot draws them and
// leaves the note to the report beside its charts).
void print_time_notes(const std::vector<std::string>& dirs);

// --metric of gate and compare: gate metric names, checked; `fallback` when none is given.
std::vector<std::string> parse_gate_metrics(const std::vector<std::string>& raw, const std::vector<std::string>& fallback);

// allocmark-worker next to this binary, or $ALLOCMARK_WORKER.
std::string worker_path();

// This process's command line, for meta.json and the results folder's lock.
std::string command_line();

// The built-in variants (configs/variants.toml).
matrix::MatrixFile load_variants();

}  // namespace allocmark::cli
