// One cell of a matrix, and its one codec. Each row of ALLOCMARK_CELL_FIELDS is a field of Cell and
// says how it is spelled wherever a cell travels; everything below is expanded from the rows:
// the cell description (`allocmark cell`, Slurm's cells/N.json), the worker's description, the
// record's cell fields (results.jsonl), meta.json's per-allocator and per-workload entries, and
// the cell's identity (Cell::key, also what the results model gives a record written without
// one). Adding a cell input is one field of Cell and one row.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "units/config_error.h"

namespace allocmark::record {

// 64-bit FNV-1a: cell keys and stdout checksums (stable across builds and hosts).
uint64_t fnv1a64(const void* data, std::size_t size, uint64_t h = 1469598103934665603ULL);

inline constexpr const char* kThpNameMark = "@thp=";
// The modes the thp axis takes, in the kernel's order.
const std::vector<std::string>& thp_modes();
// "" for one of them, else "'MODE' is not a transparent huge page mode (valid: ...)".
std::string thp_mode_problem(const std::string& mode);
// How a cell gets its mode, its record's thp.how (and a baseline's thp_how): set for its own
// process (never), or the machine's own.
inline constexpr const char* kThpHowPrctl = "prctl";
inline constexpr const char* kThpHowMachine = "machine";
std::string thp_obtained_by(const std::string& mode);

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
  // A release built from its pinned source (allocators/releases/, `allocmark build`) in place of the
  // system's library, from the allocator's name NAME@VERSION: {name, version, source_sha256,
  // recipe_sha256, compiler, build} (its build.json); empty for a system or user library.
  std::map<std::string, std::string> release;
};

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

// The rows. Columns:
//   member    the field of Cell
//   type      text, count (an integer of at least 1), texts (an object of strings), facts (an
//             object of strings written only when it has any) or thp (a thp mode; "" for the
//             machine's, which only the description writes)
//   in        where the description holds it: allocator (its "allocator" object) or cell (top level)
//   name      its key in the description
//   required  whether a description must name it (else absent or null is "")
//   worker    its key in the worker's description, nullptr when the worker is not told it
//   rec       its key in the record, nullptr when the record does not carry it
//   meta      its key in meta.json's matrix entry (an allocator's or a workload's), nullptr if none
//   part      how it enters the key: none, path (a "/"-separated part, after `label`) or digest
//             (a line of the hashed identity: label + value, or each entry NAME=VALUE)
//   setup     its key in the gate's setup of a cell (what a confirming rerun must run as the
//             results did; the gate names a cell by allocator, workload and threads), nullptr if none
// The key's parts and lines follow the rows' order.
#define ALLOCMARK_CELL_FIELDS(X)                                                                                                                   \
  /* row,         member,                type,  in,        name,          required, worker,      rec,         meta,      part,   label,  setup */  \
  X(allocator,   allocator.name,        text,  allocator, "name",        true,     "allocator", "allocator", "name",    path,   "",     nullptr)   \
  X(backend,     allocator.backend,     text,  allocator, "backend",     true,     "backend",   "backend",   "backend", none,   "",     "backend") \
  X(library,     allocator.library,     text,  allocator, "library",     false,    "library",   "preload",   "library", digest, "",     "library") \
  X(thp,         allocator.thp,         thp,   allocator, "thp",         false,    nullptr,     "thp",       "thp",     digest, "thp=", nullptr)   \
  X(env,         allocator.env,         texts, allocator, "env",         false,    nullptr,     "env",       "env",     digest, "",     "env")     \
  X(description, allocator.description, text,  allocator, "description", false,    nullptr,     nullptr,     nullptr,   none,   "",     nullptr)   \
  X(release,     allocator.release,     facts, allocator, "release",     false,    nullptr,     "release",   "release", none,   "",     nullptr)   \
  X(workload,    workload,              text,  cell,      "workload",    true,     "workload",  "workload",  "name",    path,   "",     nullptr)   \
  X(threads,     threads,               count, cell,      "threads",     true,     "threads",   "threads",   nullptr,   path,   "t",    nullptr)   \
  X(rep,         rep,                   count, cell,      "rep",         true,     "rep",       "rep",       nullptr,   path,   "r",    nullptr)   \
  X(params,      params,                texts, cell,      "params",      true,     "params",    "params",    "params",  digest, "",     "params")

// A row by name, for a reader that takes a record's cell fields one by one, each with its own
// rule (the results model: a required allocator, an optional rep), and the row's record key.
#define ALLOCMARK_CELL_ROW(row, ...) row,
enum class CellField { ALLOCMARK_CELL_FIELDS(ALLOCMARK_CELL_ROW) };
#undef ALLOCMARK_CELL_ROW
const char* record_key(CellField field);
// Its key in meta.json's matrix entry (an allocator's or a workload's), and in the gate's setup of
// a cell (cell_setup); nullptr where none.
const char* meta_key(CellField field);
const char* setup_key(CellField field);
// How a record's cell got its thp mode (thp_obtained_by), "" where the record does not say.
std::string thp_how_in(const nlohmann::json& record);

// The cell description (`allocmark cell`, Slurm) and back. cell_from_description throws
// ConfigError naming the missing or mistyped field by its path ("cell.allocator.name: missing");
// whether the names it holds exist (a backend, a workload) is the plan's to check.
nlohmann::json cell_description(const Cell& cell);
Cell cell_from_description(const nlohmann::json& j);

// The cell's part of the worker's description (its settings are the settings table's), and the
// cell the worker reads back from it (what it does not name keeps Cell's default: a probe's
// description names only the allocator).
nlohmann::json worker_cell(const Cell& cell);
Cell cell_of_worker(const nlohmann::json& description);

// The record's cell fields (the library it preloads is "preload"; "library" is what served malloc).
nlohmann::json record_cell(const Cell& cell);
// The cell a record describes, as far as it says (a record written by hand may leave fields out,
// or give a parameter as a number): what the results model keys a record without a key by.
Cell cell_of_record(const nlohmann::json& record);

// The gate's setup of a cell ({backend, library, env, params}: GateCell::setups, a baseline's
// allocator_config and under_test), and an object's entries as text (a string as it is, anything
// else as JSON: a record or baseline written by hand), for a setup of what a reader found.
nlohmann::json cell_setup(const Cell& cell);
// A setup read back (backend, library, env, params; leniently, as the record readers read).
Cell cell_of_setup(const nlohmann::json& setup);
std::map<std::string, std::string> texts_of(const nlohmann::json& object);

// meta.json's matrix entries: an allocator's ({name, backend, library, env, thp}) and the
// workload's ({name, params}) of a cell.
nlohmann::json meta_allocator(const ResolvedAllocator& allocator);
nlohmann::json meta_workload(const Cell& cell);
// And read back, leniently (what an entry does not hold, or holds mistyped, stays Cell's default),
// for the readers of meta.json (run, report): an allocator entry's allocator, a workload entry's
// workload and params.
ResolvedAllocator allocator_of_meta(const nlohmann::json& entry);
Cell workload_of_meta(const nlohmann::json& entry);

}  // namespace allocmark::record
