// Matrix configuration: TOML files (configs/*.toml) plus command-line overrides, validated in full
// before any cell runs. Every error names the file, line and column (or the flag) and the valid
// choices; the CLI turns a ConfigError into exit code 2.
#pragma once

#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "harness/matrix/program.h"
#include "harness/settings/settings.h"

namespace allocmark::matrix {

// The threads axis' limit (the settings' limits are their rows: harness/settings/settings.h).
inline constexpr int kMaxThreads = 1024;
inline constexpr double kMaxExpectHours = 24 * 365;

// An allocator as a matrix names it: a backend, optionally another library of that kind, and the
// environment that configures it. Built-in variants are data in configs/variants.toml.
struct AllocatorDef {
  std::string name;      // "jemalloc:bg"
  std::string backend;   // "jemalloc"
  std::string library;   // explicit library path; "" means the backend's system library
  std::map<std::string, std::string> env;
  std::string description;
  std::string origin;    // "configs/variants.toml:12:1", for messages
  std::string library_origin;  // where `library` is set
};

// A value from a file, with where it came from, so a later check can point at it.
struct Located {
  std::string value;
  std::string origin;  // "path:line:column"
};

// [traces.NAME]: a recorded allocation trace (docs/traces.md) replayed as cells of the replay
// workload: `file` (relative to the matrix file) is its `trace`, any other key one of its
// parameters; `name` is NAME.
struct TraceDef {
  std::string name;
  std::string origin;  // "path:line:column"
  std::map<std::string, Located> params;
};

// A matrix file: its axes, the settings its [matrix] table names (with their positions in
// SettingChoices::origins), parameters, allocators and programs.
struct MatrixFile : SettingChoices {
  std::string path;
  std::vector<std::string> allocators, workloads;
  std::vector<int> threads;
  std::vector<std::string> thp;  // the thp axis: never, madvise, always
  std::string thp_origin;        // where [matrix] thp is
  // [matrix] expect_hours: how long the file's author expects the matrix to take; `run` goes on
  // unattended with an estimate up to it (docs/usage.md).
  std::optional<double> expect_hours;
  std::string expect_hours_origin;
  // [params.<workload>] key = value, values kept as text and checked against the workload's specs.
  std::map<std::string, std::map<std::string, Located>> params;
  std::map<std::string, std::string> params_origin;  // workload -> where its [params.*] table is
  std::map<std::string, AllocatorDef> allocator_defs;
  std::map<std::string, ProgramDef> programs;  // [programs.NAME]
  std::map<std::string, TraceDef> traces;      // [traces.NAME]
};

// Parses a matrix or variants file. `variants_only`: only [allocators.*] tables are allowed.
// `what` names it in the message when it is not a readable regular file ("--confirm-matrix": a
// fifo, a folder, a missing file; units::input_file_problem), a ConfigError before anything is read.
MatrixFile load_matrix_file(const std::string& path, bool variants_only = false, const std::string& what = "matrix");

// Where configs/ lives: $ALLOCMARK_CONFIG_DIR, else the source tree the binary was built from.
std::string config_dir();

}  // namespace allocmark::matrix
