// The results model: one or several results folders read into compact cells, then grouped and
// summarised. Every reader of results (show and its reporters, summary.csv, summary.json; later the
// gate and compare) goes through it, so the reader rules (corrupt lines, duplicates, attempts,
// identity) are applied in one place and every figure is defined once (formulas in derived.h).
//
// Memory: results.jsonl is streamed line by line; a record's timeline, allocator statistics and
// options are dropped as soon as its line is parsed. What stays per cell is what grouping needs:
// a handful of numbers per phase (the same values a per-group metric vector would hold) plus the
// cell's identity, interned, so a million-line file costs megabytes, not the file's size. Keeping
// cells rather than pre-grouped vectors is what lets a later attempt of a cell replace the earlier
// one, and lets one load serve several groupings (summary.csv per cell, summary.json per phase).
#pragma once

#include <nlohmann/json.hpp>

#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "harness/results/metric_table.h"
#include "harness/results/record_identity.h"
#include "harness/results/results_dir.h"  // ResultsError

namespace allocmark::results {

// ---------------------------------------------------------------------------------------------
// Statistics over repetitions.

// n, median, min, max and median absolute deviation (unscaled: median of |x - median|). n = 0
// leaves the rest at 0: a reporter shows "-", summary.json leaves them out.
struct Spread {
  std::size_t n = 0;
  double median = 0, min = 0, max = 0, mad = 0;
};

// Median of a non-empty list (the mean of the middle two for an even count).
double median(std::vector<double> values);
Spread spread_of(std::vector<double> values);

// ---------------------------------------------------------------------------------------------
// What the model keeps of a phase: the measured fields of metric_table.h.

// One NUMA node's share of a phase: ops (of the threads that ended the phase there), the phase's
// wall_s (so ops_per_s is the node's rate), numa_resident_bytes, sampled/local blocks, node_threads,
// and the latency percentiles of the calls timed on the node's CPUs.
struct NodeValues : FieldValues {
  int node = -1;
};

struct PhaseValues : FieldValues {
  std::string name;
  std::vector<NodeValues> nodes;  // the record's `nodes`, empty for records without them
  // The phase's workload_metrics that are numbers, nested names joined with '.'
  // (ns_per_op.malloc_free_64): (Model::workload_metric_name index, value). Per phase, not per node.
  std::vector<std::pair<std::size_t, double>> workload;
};

// ---------------------------------------------------------------------------------------------
// A cell and what makes two cells repetitions of each other.

// Everything but threads and rep that a cell's result depends on and the harness controls.
// Cells with different identities are never pooled as repetitions: params belong to the
// workload, env and preload (the configured library, which the cell key hashes) to the allocator,
// and host to the machine.
struct CellIdentity {
  std::string allocator, backend, workload;
  nlohmann::json params = nlohmann::json::object(), env = nlohmann::json::object();
  std::string preload;
  std::string host;  // the record's host, else its folder's meta.json machine.host, else ""
};

struct CellResult {
  std::string key;  // the record's key (synthesised from its fields for records without one)
  int attempt = 1;
  int rep = 0;
  int threads = 0;
  std::size_t identity = 0;  // Model::identity(i)
  std::string status;
  std::optional<std::string> error;
  std::optional<double> idle_rss_bytes;
  std::optional<std::string> library, allocator_version;  // what really served malloc, and its version
  // The record's thp.how: "prctl" where the cell set its own mode (the thp axis' never), "machine"
  // where it ran under the machine's, "" for records from before it was written.
  std::string thp_how;
  std::vector<PhaseValues> phases;
  // A program cell's standard output (FNV-1a): the same program should print the same under every
  // allocator; Model warns when it does not.
  std::optional<std::string> stdout_checksum;
  std::string file;  // where the winning record was read: DIR/results.jsonl as given, and its line
  std::size_t line = 0;
  bool whole_file = false;  // the record is all of `file` (a parts/ file a batch task wrote)
  bool ok() const { return status == "ok"; }
};

// ---------------------------------------------------------------------------------------------
// Metrics: the figures summarised per group, one row each in metric_table.h.

// The value of a metric for one phase of a cell (nullopt where the record has no such figure): its
// row's formula.
std::optional<double> metric_value(Metric m, const CellResult& cell, const PhaseValues& phase);

// The cell's phases folded into one, for groupings without the phase dimension, each field by its
// row's Fold (metric_table.h): peaks and call latency percentiles the maxima over the phases, end
// RSS the last phase's, ops/s total ops over total wall time, the rest summed. Nodes the same way.
PhaseValues whole_cell(const CellResult& cell);

// ---------------------------------------------------------------------------------------------
// What a record carries for the scripts that read results.jsonl themselves.

// The version of the records' schema, which every record carries as `schema_version`
// (docs/results-schema.md, "Schema versions"): 1, records written before 2026-12-03 (no such field);
// 2, those of 2026-12-03 up to this field (no such field either), which lacked the figures below;
// 3, every record since. A field is only ever added; one that must go moves the version.
inline constexpr int kRecordSchemaVersion = 3;

// Adds to a record (as runner/record.cpp builds it) the figures records carried before 2026-12-03
// for their readers: at its top `peak_rss_bytes`, `peak_live_bytes`, `fragmentation_ratio` (absent
// without live bytes) and `totals`; in each phase `ops_per_s`; in each phase's `contention`
// `voluntary_ctx_switches_per_mop` and `runqueue_wait_share`. Each is the value of the model's
// metric (metric_value over the phase, or over whole_cell), computed by the metric's own formula,
// so a record never holds a second one; the model reads none of them. Throws ResultsError for a
// record of the wrong shape.
void add_figures_for_readers(nlohmann::json& record);

// ---------------------------------------------------------------------------------------------
// Grouping.

// node: one row per NUMA node of each phase (or cell), from the records' `nodes`; those rows carry
// the per-node metrics (numa_resident_bytes, local_fraction, node_threads, ops_per_s of the threads
// on the node, the call latencies timed on its CPUs) and nothing else. Records without `nodes` fall in node "-" with their whole figures.
enum class Dimension { workload, threads, allocator, phase, backend, host, node };

// A phase (or whole cell) as seen by one node's row.
PhaseValues node_view(const PhaseValues& phase, const NodeValues& node);

std::string_view dimension_name(Dimension d);
std::optional<Dimension> dimension_from_name(std::string_view name);
const std::vector<Dimension>& all_dimensions();
// workload, threads, allocator, phase: the rows of `show` and summary.json.
const std::vector<Dimension>& default_dimensions();

// The phase value of a cell that is not ok or has no phases: its status and error, no metrics.
inline constexpr std::string_view kCellPhase = "(cell)";

struct Group {
  // One value per Grouping::dimensions: threads as an integer, the rest as their label. A label
  // is the plain name unless two groups would otherwise read the same; then it shows what tells
  // them apart: size_mix[live_mib=64], jemalloc[MALLOC_CONF=background_thread:true],
  // jemalloc[library=#1f2e3d] (a long value as a short hash).
  std::vector<nlohmann::json> values;
  std::size_t cells = 0;  // cells (with the phase dimension: cell phases) counted here, any status
  std::map<std::string, std::size_t> statuses;
  std::vector<std::string> errors;  // in file order, at most kMaxErrorsListed
  std::size_t errors_not_listed = 0;
  std::array<Spread, kMetricCount> metrics{};
  // The identity fields every cell of the group shares (allocator, backend, workload, params,
  // env, preload, host, library, allocator_version); a field that varies is left out.
  nlohmann::ordered_json identity = nlohmann::ordered_json::object();

  // Each workload metric (a phase's workload_metrics, see PhaseValues) over the group's cells;
  // only in groupings by phase, since each is a figure of one phase.
  std::map<std::string, Spread> workload_metrics;

  const Spread& metric(Metric m) const { return metrics[static_cast<std::size_t>(m)]; }
};
inline constexpr std::size_t kMaxErrorsListed = 20;

// A dimension value as text (threads as digits).
std::string value_label(const nlohmann::json& value);

// A dimension left out of a grouping whose different values share a row: medians then mix, say,
// one thread's cells with two threads' (a reader warns, `show`).
struct PooledDimension {
  Dimension dimension;
  std::vector<std::string> values;  // the plain names (threads as digits) found together in rows
};

struct Grouping {
  // As asked, plus host (last) when cells from different hosts would otherwise share a row.
  std::vector<Dimension> dimensions;
  // Of workload, threads and allocator, each one not asked for whose values share a row.
  std::vector<PooledDimension> pooled;
  std::vector<Group> groups;  // in order of first appearance in Model::cells()
  // The workload metrics the groups have, in natural order (digit runs compare as numbers:
  // ns_per_op.malloc_free_64 before ns_per_op.malloc_free_128).
  std::vector<std::string> workload_metrics;
  // Per Model::cells() entry: the group its first phase (or its status, for a cell without ok
  // phases) was counted in, so an export per cell names it by the same labels; kNoGroup for a
  // cell the filter left out.
  std::vector<std::size_t> cell_groups;
  static constexpr std::size_t kNoGroup = static_cast<std::size_t>(-1);
};

// One line per pooled dimension, for a reader to print: "rows pool threads 1, 2 (not in --by): ...".
std::vector<std::string> pooling_notes(const Grouping& grouping);

// Why a phase's ops/s is not the allocator's speed, as its workload declares it for the cell's
// parameters (WorkloadInfo::ops_per_s_not_a_speed: a fixed rate or wall time); "" where it is
// one, for unknown workloads and for records from before a parameter existed. Rankings and
// summary.json (hence the charts) both leave such phases out through this one function.
std::string ops_per_s_not_a_speed(const std::string& workload, const nlohmann::json& params, std::string_view phase);

// Which cells a grouping counts: each list empty keeps every value; a workload or allocator is
// matched by its plain name (size_mix, jemalloc:bg).
struct CellFilter {
  std::vector<std::string> workloads, allocators;
  std::vector<int> threads;
  bool empty() const { return workloads.empty() && allocators.empty() && threads.empty(); }
};

// Keeps the workload metrics whose names match one of `patterns` (a name, or a prefix ending in
// '*': ns_per_op.*), in the grouping and in its groups. Throws ResultsError for a pattern that
// matches none of them, listing what there is.
void select_workload_metrics(Grouping& grouping, const std::vector<std::string>& patterns);

// ---------------------------------------------------------------------------------------------
// The model.

struct LoadOptions {
  // A folder without results.jsonl or without a single finished cell is an error for a reader
  // (`show`); the driver writing summaries after its first cell sets this to false.
  bool require_cells = true;
  // The caller is the run that writes the folder: its own lock is not news (writer_notices).
  bool own_folder = false;
};

// "DIR: a run is writing this folder (pid N): K of M cells finished ..." when a run holds DIR's
// lock now (K: cells recorded so far, M: the run's planned cells from DIR/cells.json), else "".
// Readers say it (stderr, or the page's banner) so a partial answer is not taken for a whole one.
std::string writer_notice(const std::string& dir);
// The one check of every reader that must not act on a partial folder (gate, baseline, merge):
// throws ResultsError "writer_notice(dir); REMEDY" when a run holds DIR's lock now.
void refuse_folder_being_written(const std::string& dir, const std::string& remedy);

class Model {
 public:
  // Loads DIR/results.jsonl (and DIR/meta.json for the host) of each folder, in order. Throws
  // ResultsError naming the file (and line) for a missing folder or file, a folder without
  // finished cells (unless allowed), or a record of the wrong shape (a JSON object whose fields
  // have the wrong types or miss allocator, workload, threads or status). Lines that are not JSON
  // objects are skipped with a warning.
  static Model load(const std::vector<std::string>& dirs, const LoadOptions& options = {});
  // In-memory records, as if read from one file named `source` (tests, and callers that built
  // records themselves).
  static Model from_records(const std::vector<nlohmann::json>& records, const std::string& source = "(records)");

  // In file order, except that each family's releases are in version order among the places
  // they hold (order_releases).
  const std::vector<CellResult>& cells() const { return cells_; }
  const CellIdentity& identity(std::size_t index) const { return identities_[index]; }
  const CellIdentity& identity(const CellResult& cell) const { return identities_[cell.identity]; }
  const std::string& workload_metric_name(std::size_t index) const { return workload_metric_names_[index]; }
  // Corrupt or cut-short lines, duplicates, repeated folders and records; in the order found.
  const std::vector<std::string>& warnings() const { return warnings_; }
  // writer_notice() of each folder a run is writing while it was read.
  const std::vector<std::string>& writer_notices() const { return writer_notices_; }

  // Groups by the given dimensions (in this order) the cells `filter` keeps; throws ResultsError if
  // a dimension is repeated.
  Grouping group(const std::vector<Dimension>& by, const CellFilter& filter = {}) const;
  // "--workload: no cell has 'x' (there: a, b)" for the first filter value no cell has, else "":
  // a typo must not read as "no results".
  std::string unknown_filter_value(const CellFilter& filter) const;

  // The streaming steps load() is made of, public for tests. Each file: add_line() per line, then
  // finish_file().
  void add_line(std::string_view text, const std::string& file, std::size_t line, bool unterminated);
  void add_record(const nlohmann::json& record, const std::string& file, std::size_t line);
  void finish_file(const std::string& file);

 private:
  void add_folder(const std::string& dir, const LoadOptions& options);
  void warn_on_differing_outputs();
  // Once all is read: the cells of a family's releases that differ only by release (same backend,
  // workload, params, threads and host) put in version order (releases::release_less, 5.9 before
  // 5.10) among the places they hold in the files, every other cell left in its place. A folder
  // one run wrote is in that order already (the plan's); a folder merged from two runs, or two
  // folders read together, would otherwise list the later run's 4.5.0 after the earlier one's
  // 5.3.0, and every reader (show, summary.json, the gate, charts) lists what it reads in this order.
  void order_releases();
  std::size_t intern(CellIdentity identity);
  std::size_t intern_workload_metric(const std::string& name);

  std::vector<CellResult> cells_;
  std::vector<CellIdentity> identities_;
  std::unordered_map<std::string, std::size_t> identity_index_;
  std::vector<std::string> workload_metric_names_;
  std::unordered_map<std::string, std::size_t> workload_metric_index_;
  std::vector<std::string> warnings_;
  std::vector<std::string> writer_notices_;
  std::vector<std::string> folders_seen_;
  std::string default_host_;  // the current folder's meta.json machine.host

  // Per file: which cell holds each key, so a later attempt replaces it and an equal one is a
  // duplicate. Keys repeat across folders on purpose (the same matrix run twice), so this is
  // reset for every file.
  struct Seen {
    std::size_t cell;
    RecordIdentity identity;  // of the record kept
    std::size_t line;
  };
  std::unordered_map<std::string, Seen> seen_;
  std::vector<std::pair<std::size_t, std::size_t>> duplicates_;  // (line, line of the record kept)
  bool reading_parts_ = false;  // a folder's parts/ files: see add_folder

  // Every record read so far by record_copy_identity() (hashed: a few words per record), with the folder
  // (index in folders_seen_) and line it was first read from: the same record read again is
  // counted once wherever it appears.
  struct FirstRead {
    std::size_t folder;
    std::size_t line;
  };
  std::unordered_map<std::uint64_t, FirstRead> records_read_;
  std::size_t records_in_other_folders_ = 0;
  // Records of other cells or attempts that share a record_id: both kept, said once at the end.
  RecordIdCollisions id_collisions_;
  void warn_on_id_collisions();
};

}  // namespace allocmark::results
