// `allocmark run`'s flags and body, shared with `advise`, which runs a program matrix through it.
#pragma once

#include <CLI/CLI.hpp>

#include <optional>
#include <string>
#include <vector>

#include "harness/matrix/plan.h"

namespace allocmark::cli {

struct RunFlags {
  std::string matrix_path;
  std::vector<std::string> allocators_raw, workloads_raw, threads_raw, sets, programs;
  std::optional<int> reps;
  std::optional<std::string> size;
  std::optional<double> timeout_s;
  std::optional<int> sample_ms;
  std::optional<std::string> latency_every;  // checked by make_plan
  bool no_node_figures = false;
  std::string out_dir;
  bool out_given = false;
  bool resume = false, extend = false, retry_failed = false, discard_corrupt = false, dry_run = false, no_pin = false, keep_data = false;
  std::optional<std::string> pin, nodes;
  std::string executor = "local";  // local | slurm
  std::vector<std::string> slurm_opts;
  std::optional<int> cells_per_task;
  bool no_wait = false;
  std::string command_line;
};

// Registers `run`'s flags on `cmd` (also on a parser of its own: `lab` reads the command it boots
// a guest for with exactly these flags).
void add_run_flags(CLI::App* cmd, RunFlags& f);
// The plan the flags describe, every name, library and parameter checked (ConfigError otherwise);
// `matrix_path` is the matrix file read, "" for none.
matrix::Plan make_run_plan(const RunFlags& f, std::string& matrix_path);
// Runs the matrix the flags describe into a results folder and prints its table; returns the exit code.
int run_command(const RunFlags& f);
// results/<prefix><date-time>
std::string default_out_dir(const char* prefix);

}  // namespace allocmark::cli
