// `allocmark run`'s flags and body, shared with `advise`, which runs a program matrix through it.
#pragma once

#include <CLI/CLI.hpp>

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "harness/matrix/plan.h"

namespace allocmark::cli {

// The text each settings flag was given, by the row's key; checked by setting_choices.
using SettingTexts = std::map<std::string, std::string>;

// Registers the flag of every settings row that has one (settings/settings.h), or only of `keys`.
// Each help gives the row's default; with `plain` (the matrix a plain `run` runs), also that a
// matrix file's value wins, and that file's.
void add_setting_flags(CLI::App* cmd, SettingTexts& texts, const std::vector<std::string>& keys = {},
                       const matrix::MatrixFile* plain = nullptr);
// The flags' texts as the table's values; ConfigError naming the flag and what it takes.
matrix::SettingChoices setting_choices(const SettingTexts& texts);

struct RunFlags {
  std::string matrix_path;
  std::vector<std::string> allocators_raw, workloads_raw, threads_raw, thp_raw, sets, programs;
  SettingTexts settings;  // the settings table's flags, as given
  std::string out_dir;
  bool out_given = false;
  bool resume = false, extend = false, retry_failed = false, discard_corrupt = false, dry_run = false, no_pin = false;
  bool yes = false;  // --yes: go on with a matrix estimated over an hour without asking
  bool no_build = false;  // --no-build: a NAME@VERSION not built yet is refused instead of built first
  std::string executor = "local";  // local | slurm
  std::string system_thp;          // --system-thp MODE
  std::vector<std::string> slurm_opts;
  std::optional<int> cells_per_task;
  bool no_wait = false;
  std::string command_line;
  // The recommendation at the end of the run; advise prints its own, from the same ranking, instead.
  bool print_recommendation = true;
};

// Registers `run`'s flags on `cmd` (also on a parser of its own: `lab` reads the command it boots
// a guest for with exactly these flags).
void add_run_flags(CLI::App* cmd, RunFlags& f);
// The plan the flags describe, every name, library and parameter checked (ConfigError otherwise);
// `matrix_path` is the matrix file read, "" for none.
// `cells_machine_thp`: the THP mode of the machine the cells will run on when it is not this one
// (the lab's guest), with `cells_machine` naming it in messages.
matrix::Plan make_run_plan(const RunFlags& f, std::string& matrix_path, std::optional<std::string> cells_machine_thp = {},
                           const std::string& cells_machine = "");
// Runs the matrix the flags describe into a results folder and prints its table; returns the exit code.
int run_command(const RunFlags& f);
// results/<prefix><date-time>
std::string default_out_dir(const char* prefix);

}  // namespace allocmark::cli
