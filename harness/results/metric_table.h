// Every metric allocmark reports, one row each, in the style of mimalloc's options table: its name
// (and the old names still accepted), unit, formula, better direction and display. The model, every
// reporter, the gate, compare, the report's verdicts and summary.json (which carries the table for
// plots/) read these rows; nothing else names a metric's unit, direction or format.
//
// Two tables: the fields the model reads from a record's phase (where each is, how it folds over a
// cell's phases), and the metrics computed from them (formulas in derived.h). The model reads only
// measured values from a record; every derived figure is a metric here (the whole-cell figures a
// record still carries at its top are not read). "How to add a metric": docs/ARCHITECTURE.md.
#pragma once

#include <array>
#include <cmath>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "harness/metrics/figure_names.h"  // ALLOCMARK_PROCESS_COUNTERS, ALLOCMARK_THP_EVENTS

namespace allocmark::results {

// ---------------------------------------------------------------------------------------------
// Fields: what the model keeps of a phase. The enum names the rows of kFieldTable (same order).

// Figures that are both a field of each phase and a metric of the same name, so both enums list
// them from one list: the process's counters (summed over a cell) and the THP events (figure_names.h,
// which the records' writers expand too), and the sampled call latencies (the worst phase's; here).
#define ALLOCMARK_ENUMERATOR(name) name,
#define ALLOCMARK_CALL_LATENCIES(X) \
  X(alloc_p50_ns) X(alloc_p99_ns) X(alloc_p999_ns) X(alloc_max_ns) X(free_p50_ns) X(free_p99_ns) X(free_p999_ns) X(free_max_ns)
// The system's THP events, as field and metric thp_NAME.
#define ALLOCMARK_THP_ENUMERATOR(name) thp_##name,

enum class Field : std::size_t {
  wall_s,
  ops,
  peak_rss_bytes,
  end_rss_bytes,
  peak_live_bytes,
  ALLOCMARK_PROCESS_COUNTERS(ALLOCMARK_ENUMERATOR)
  lock_wait_ns,
  lock_ops,
  lock_waits,
  numa_resident_bytes,
  sampled_blocks,
  local_blocks,
  node_threads,
  ALLOCMARK_CALL_LATENCIES(ALLOCMARK_ENUMERATOR)
  runqueue_wait_ns,
  run_ns,
  anon_huge_bytes,
  ALLOCMARK_THP_EVENTS(ALLOCMARK_THP_ENUMERATOR)
  system_anon_huge_bytes,
  kCount
};
inline constexpr std::size_t kFieldCount = static_cast<std::size_t>(Field::kCount);

// How a field of several phases becomes the whole cell's (and a node's over its phases).
enum class Fold {
  sum,   // counts and times
  max,   // peaks, and call latency percentiles (the worst phase's)
  last,  // states at the phase end
};

struct FieldRow {
  Field field;
  // Where it is in a record's phase: a dotted path ("contention.latency.malloc.p50_ns"); "" for a
  // phase figure that is the sum of its nodes' (node_path).
  std::string_view phase_path;
  // Where it is in one of the phase's `nodes` entries; "" where nodes do not carry it. "threads"
  // counts the entries of a list.
  std::string_view node_path;
  Fold fold;
  bool phase_sums_nodes;  // without a phase_path: the phase's figure is the sum of its nodes'

};
const std::array<FieldRow, kFieldCount>& field_table();

struct FieldValues {
  std::array<double, kFieldCount> values;  // NaN: not in the record
  FieldValues() { values.fill(std::nan("")); }
  std::optional<double> get(Field f) const {
    double v = values[static_cast<std::size_t>(f)];
    return std::isnan(v) ? std::nullopt : std::optional<double>(v);
  }
  void set(Field f, double v) { values[static_cast<std::size_t>(f)] = v; }
};

// ---------------------------------------------------------------------------------------------
// Metrics. The enum names the rows of the metric table (same order, checked at compile time).

enum class Metric : std::size_t {
  peak_rss_bytes,
  end_rss_bytes,
  rss_above_idle_over_live,
  ops_per_s,
  wall_s,
  ALLOCMARK_PROCESS_COUNTERS(ALLOCMARK_ENUMERATOR)
  lock_wait_s,
  peak_live_bytes,
  contended_share,
  numa_resident_bytes,
  local_fraction,
  node_threads,
  ALLOCMARK_CALL_LATENCIES(ALLOCMARK_ENUMERATOR)
  vol_ctx_switches_per_mop,
  runqueue_wait_s,
  runqueue_wait_share,
  anon_huge_bytes,
  ALLOCMARK_THP_EVENTS(ALLOCMARK_THP_ENUMERATOR)
  system_anon_huge_bytes,
  kCount
};
inline constexpr std::size_t kMetricCount = static_cast<std::size_t>(Metric::kCount);

enum class Better { lower, higher };

// How a value is written for people: the table and markdown reporters, the gate's and compare's
// reports, the run report. Machine formats (csv, json) always write the number itself.
enum class Display {
  mib,          // bytes as MiB, one decimal
  ratio,        // two decimals
  si,           // counts and rates with k/M/G
  rate,         // often below one: three significant digits
  percent,      // a share of a whole (0..1) written as a percentage, two significant digits
  nanoseconds,  // ns, switching to us/ms/s
  seconds,      // three significant digits below a second
};

// "mib", "ratio", ...: summary.json's name for a display, for readers that format figures themselves.
std::string_view display_name(Display d);

// A metric's value for one phase (or a cell folded into one, or a node's share): from the fields,
// and the cell's idle RSS for the metrics that subtract it.
using Formula = std::optional<double> (*)(const FieldValues& phase, std::optional<double> idle_rss_bytes);

struct MetricRow {
  Metric metric;
  std::string_view name;     // on every command line, in summary.json, csv, baselines and verdicts
  std::string_view alias;    // the name it had before (accepted with a note), "" if none
  std::string_view unit;
  std::string_view description;
  Formula formula;
  Better better;
  Display display;
  std::string_view header;   // the table reporter's column heading
  std::size_t width;         // its minimum width
  std::string_view note;     // footnote under the table ("" where the header says it all)
  bool gated;                // judged by gate, baseline and compare (and their default set)
  int node_column;           // its place among the node rows' metrics (`--by ...,node`, summary.json's
                             // node_groups), from 1; 0: node rows do not carry it
  bool default_per_node;     // ... shown there unless asked for others
};

const std::array<MetricRow, kMetricCount>& metric_table();
const MetricRow& metric_row(Metric m);

// A metric by its name or its old name; `alias_used` says which (for the note a caller prints).
std::optional<Metric> metric_from_name(std::string_view name, bool* alias_used = nullptr);

// "FLAG OLD: now called NEW (the old name still works)": what a command says for an old name.
std::string renamed_metric_note(std::string_view flag, std::string_view old_name, Metric m);

// Parses a user's metric name as `flag` gives it: an unknown name throws ResultsError listing the
// names (canonical only) of `allowed`; an old name is accepted and `notes` gets "FLAG OLD: now
// called NEW (the old name still works)".
Metric parse_metric_name(std::string_view name, const std::string& flag, const std::vector<Metric>& allowed,
                         std::vector<std::string>& notes);

std::vector<Metric> all_metrics();
std::vector<Metric> gated_metrics();
std::vector<Metric> node_metrics();
std::vector<Metric> default_node_metrics();

// What is wrong with `value` as a value of metric `m` ("" when nothing), by its unit: a number that
// is not finite; bytes below 0 (a peak or end RSS of 0 or less: a running process holds memory) or
// beyond a 57-bit address space; below 0 or above 10^12 operations a second; a share outside 0..1;
// a ratio beyond 10^9 in magnitude; seconds below 0 or above 10^9; counts and nanoseconds below 0
// or above 10^18. No measurement gives such a value. One rule set: the model holds each phase of
// every record it reads to it, and the gate each value of a baseline.
std::string value_problem(Metric m, double value);
// The same rule for a record's field of bytes that is no metric (idle_rss_bytes): from 0 (hand-made
// records write 0 for a figure they do not have) to 2^57.
std::string field_bytes_problem(std::string_view field, double value);

// "peak_rss_bytes, rss_above_idle_over_live, ..." for help texts and messages.
std::string metric_names(const std::vector<Metric>& metrics);

}  // namespace allocmark::results
