// Expansion of a matrix (file + flags + built-in variants) into the list of cells to run, with
// every name, library and parameter checked first: a plan either is complete and valid or the
// build throws ConfigError and nothing runs.
#pragma once

#include <nlohmann/json.hpp>

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "harness/matrix/config.h"
#include "harness/settings/settings.h"
#include "harness/placement/placement.h"

namespace allocmark::matrix {

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
};

struct ResolvedAllocator {
  std::string name, backend;
  std::string library;  // absolute path to preload; "" for glibc (nothing preloaded)
  std::map<std::string, std::string> env;
  std::string description;
  bool user_library = false;  // named by path in a config rather than found on the system
  // The transparent-huge-page mode the cell's process runs under, from the thp axis: "" for the
  // machine's as it is (no axis); "never" is set per process (PR_SET_THP_DISABLE before exec,
  // inherited by what the process starts); "madvise" or "always" must be the machine's own mode
  // (another one runs in the lab: `allocmark lab --thp MODE`). On the axis the allocator's name
  // says it: "jemalloc@thp=never" (kThpNameMark).
  std::string thp;
};

inline constexpr const char* kThpNameMark = "@thp=";
// The modes the thp axis takes, in the kernel's order.
const std::vector<std::string>& thp_modes();
// "" for one of them, else "'MODE' is not a transparent huge page mode (valid: ...)".
std::string thp_mode_problem(const std::string& mode);
// How a cell gets its mode ("prctl" for never, "machine" for the machine's own), for its record.
std::string thp_obtained_by(const std::string& mode);

struct Cell {
  ResolvedAllocator allocator;
  std::string workload;
  int threads = 1;
  int rep = 0;
  // Every parameter, defaults applied, in its canonical text (workloads::canonical_param_text):
  // what the key, the records and the worker see.
  std::map<std::string, std::string> params;
  // Identity for --resume: the same cell with the same parameters and environment.
  std::string key() const;
  std::string label() const;  // "jemalloc:bg size_mix t2 r1"
};

struct Plan {
  std::vector<Cell> cells;
  std::vector<ResolvedAllocator> allocators;  // distinct, in matrix order
  Settings settings;
  std::vector<std::string> notes;  // e.g. a default backend skipped because it is not installed
  std::optional<double> expect_hours;  // the matrix file's [matrix] expect_hours
  std::string expect_hours_origin;     // where it is set
  nlohmann::json as_json() const;  // the matrix as run, for meta.json
};

// What differs between two matrices as recorded by Plan::as_json() ("threads: [1, 2] -> [1]; ..."),
// "" when they would run the same cells with the same measurement settings (the settings rows of
// scope kCompared; not the timeout, which decides when a cell is given up, not what it measured).
std::string matrix_differences(const nlohmann::json& recorded, const nlohmann::json& now);

// A cell as JSON and back (for `allocmark cell`, which runs one cell on the host a scheduler chose).
// from_json throws ConfigError naming the missing or mistyped field.
nlohmann::json cell_to_json(const Cell& cell);
Cell cell_from_json(const nlohmann::json& j);

// `file` is the matrix file if one was given; `variants` the built-in variants file.
Plan build_plan(const std::optional<MatrixFile>& file, const MatrixFile& variants, const Overrides& flags);

// Resolves one allocator name against the variant definitions and the backends; throws ConfigError.
ResolvedAllocator resolve_allocator(const std::string& name, const std::map<std::string, AllocatorDef>& defs,
                                    const std::string& context);

}  // namespace allocmark::matrix
