// Expansion of a matrix (file + flags + built-in variants) into the list of cells to run, with
// every name, library and parameter checked first: a plan either is complete and valid or the
// build throws ConfigError and nothing runs.
#pragma once

#include <nlohmann/json.hpp>

#include <map>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "harness/matrix/config.h"
#include "harness/record/cell.h"
#include "harness/settings/settings.h"
#include "harness/placement/placement.h"

namespace allocmark::matrix {

// What resolving NAME@VERSION does with a release that is not built yet: build it (progress on
// `progress`; `allocmark run`), or refuse, naming `allocmark build` and adding `refusal` ("; or drop
// --no-build").
struct ReleasePolicy {
  bool build = false;
  std::ostream* progress = nullptr;
  std::string refusal;
};

// Axes and settings given on the command line; each replaces the file's value when present.
struct Overrides : SettingChoices {
  std::optional<std::vector<std::string>> allocators, workloads;
  std::optional<std::vector<int>> threads;
  std::optional<std::vector<std::string>> thp;  // --thp
  // The THP mode of the machine the cells run on when it is not this one (the lab's guest: its
  // --thp, "" when not named), and how to name it in a message.
  std::optional<std::string> cells_machine_thp;
  std::string cells_machine;
  std::vector<std::string> sets;  // "workload.param=value"
  std::vector<std::string> programs;  // "NAME=COMMAND ARGS" (--program)
  ReleasePolicy releases;  // NAME@VERSION not built yet: refused unless `run` builds it
};

// A cell and its allocator are the record's (harness/record/cell.h: one codec for every place a
// cell is written).
using record::Cell;
using record::kThpNameMark;
using record::ResolvedAllocator;
using record::thp_mode_problem;
using record::thp_modes;
using record::thp_obtained_by;

struct Plan {
  std::vector<Cell> cells;
  std::vector<ResolvedAllocator> allocators;  // distinct, in matrix order
  Settings settings;
  std::vector<std::string> notes;  // e.g. a default backend skipped because it is not installed
  std::optional<double> expect_hours;  // the matrix file's [matrix] expect_hours
  std::string expect_hours_origin;     // where it is set
  nlohmann::json as_json() const;  // the matrix as run, for meta.json
};

// meta.json's matrix object (Plan::as_json): its keys besides the settings rows', for the writer and
// every reader (matrix_differences, the report). Its entries are the cell codec's
// (record::meta_allocator, record::meta_workload; read back by allocator_of_meta, workload_of_meta).
namespace matrix_key {
inline constexpr const char* kAllocators = "allocators";  // each allocator of the matrix once
inline constexpr const char* kWorkloads = "workloads";    // each parameter set of a workload once
inline constexpr const char* kThreads = "threads";        // the threads the cells ran, ascending
inline constexpr const char* kCells = "cells";            // how many
inline constexpr const char* kNotes = "notes";
}  // namespace matrix_key

// What differs between two matrices as recorded by Plan::as_json() ("threads: [1, 2] -> [1]; ..."),
// "" when they would run the same cells with the same measurement settings (the settings rows of
// scope kCompared; not the timeout, which decides when a cell is given up, not what it measured).
std::string matrix_differences(const nlohmann::json& recorded, const nlohmann::json& now);

// The cell a description names (record::cell_description: `allocmark cell`, which runs one cell on
// the host a scheduler chose), with its backend and workload known here; throws ConfigError naming
// the missing, mistyped or unknown field.
Cell checked_cell(const nlohmann::json& description);

// `file` is the matrix file if one was given; `variants` the built-in variants file.
Plan build_plan(const std::optional<MatrixFile>& file, const MatrixFile& variants, const Overrides& flags);

// NAME@VERSION[:VARIANT]: the variant NAME[:VARIANT] with a release of its backend built from source
// in place of the system's library (docs/versions.md). Its '@' is the first one; "@thp=" (the thp
// axis' mark, which only the plan adds) is never a version. The one reading of the grammar: the
// report's version section splits recorded allocator names with it too.
struct ReleaseName {
  std::string variant, version;  // "jemalloc:bg" (the thp mark kept), "5.2.1"
  bool named = false;            // an '@' that is not the thp mark
};
ReleaseName split_release(const std::string& name);

// Resolves one allocator name against the variant definitions and the backends; throws ConfigError.
// NAME@VERSION[:VARIANT] runs a release built from source (docs/versions.md).
ResolvedAllocator resolve_allocator(const std::string& name, const std::map<std::string, AllocatorDef>& defs,
                                    const std::string& context, const ReleasePolicy& policy = {});

}  // namespace allocmark::matrix
