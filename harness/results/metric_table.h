// Every metric allocmark reports, one row each, in the style of mimalloc's options table: its name
// (and the old names still accepted), unit, formula, better direction and display. The model, every
// reporter, the gate, compare, the report's verdicts and summary.json (which carries the table for
// plots/) read these rows; nothing else names a metric's unit, direction or format.
//
// Two tables: the fields the model reads from a record's phase (where each is, how it folds over a
// cell's phases), and the metrics. Both are expanded from the record's field table
// (harness/record/fields.h), whose rows that are shown are the measured metrics, and the derived
// metrics' rows below (formulas in derived.h). The model reads only measured values from a record;
// every derived figure is a metric here (the whole-cell figures a record still carries at its top
// are not read). "How to add a metric": docs/ARCHITECTURE.md.
#pragma once

#include <array>
#include <cmath>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "harness/record/fields.h"  // ALLOCMARK_PHASE_FIELDS and the lists it expands

namespace allocmark::results {

// ---------------------------------------------------------------------------------------------
// Fields: what the model keeps of a phase. The enum names the rows of kFieldTable (same order).

// The fields are the rows of the record's field table (harness/record/fields.h) that the model reads,
// in its order: where each is in a phase and in a node, and how it folds over a cell's phases.
#define ALLOCMARK_FIELD_ENUMERATOR(kind, name, ...) ALLOCMARK_IF_READ_##kind(name, )

enum class Field : std::size_t { ALLOCMARK_PHASE_FIELDS(ALLOCMARK_FIELD_ENUMERATOR) kCount };
inline constexpr std::size_t kFieldCount = static_cast<std::size_t>(Field::kCount);

using record::Fold;

struct FieldRow {
  Field field;
  std::string_view name;  // the model's name (thp_fault_alloc, alloc_p50_ns), the metric's where one measures it
  std::string_view unit;
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
// Metrics: one row each (MetricRow's columns below), of two kinds.
//   measured: a row of the record's field table shown (`shown`, harness/record/fields.h) is the
//            metric of the same name, the field as recorded in its unit, shown as its
//            `presentation` column says: adding a measured figure is that one row;
//   derived: a formula over fields (metric_table.cpp, over derived.h), one DERIVED row below:
//            DERIVED(name, after, alias, unit, description, formula, better, display, header, width,
//            note, gated, node_column, default_per_node).
// Every output lists them in one order: the measured metrics in their field rows' order, each
// followed by the derived metrics whose `after` names it (in this list's order).
// clang-format off
#define ALLOCMARK_DERIVED_METRICS(DERIVED)                                                                           \
  DERIVED(rss_above_idle_over_live, end_rss_bytes, "rss_over_live", "ratio",                                         \
      "(peak RSS - idle RSS) / peak live requested bytes; 1.0 is the physical floor",                                \
      rss_above_idle, lower, ratio, "RSS-idle/live", 20,                                                             \
      "RSS-idle/live: (peak RSS - idle baseline) / peak live requested bytes", true, 0, false)                       \
  DERIVED(ops_per_s, end_rss_bytes, "", "1/s", "operations per second of wall time",                                 \
      throughput, higher, si, "ops/s", 24, "", true, 4, true)                                                        \
  DERIVED(lock_wait_s, sys_s, "", "s",                                                                               \
      "time threads waited for allocator locks (jemalloc's mutex profiling, numap's counters)",                      \
      ns_as_seconds<F::lock_wait_ns>, lower, seconds, "lock wait s", 24,                                             \
      "lock wait: allocator lock waits summed over threads (jemalloc, numap)", false, 0, false)                      \
  DERIVED(contended_share, peak_live_bytes, "", "ratio",                                                             \
      "share of allocator lock acquisitions that had to wait (contention num_wait / num_ops)",                       \
      (of_two<F::lock_waits, F::lock_ops, contended_share>), lower, percent, "contended", 20,                        \
      "contended: share of allocator lock acquisitions that waited (jemalloc, numap)", false, 0, false)              \
  DERIVED(local_fraction, numa_resident_bytes, "", "ratio",                                                          \
      "share of sampled blocks whose page is on the allocating thread's node (move_pages after the phase)",          \
      (of_two<F::local_blocks, F::sampled_blocks, local_fraction>), higher, percent, "local", 20,                    \
      "local: share of sampled blocks whose page is on the allocating thread's node", false, 2, true)                \
  DERIVED(vol_ctx_switches_per_mop, free_max_ns, "", "1/Mop",                                                        \
      "voluntary context switches (a thread sleeping, e.g. on a futex) per million operations",                      \
      (of_two<F::voluntary_ctx_switches, F::ops, per_million_ops>), lower, rate, "vol cs/Mop", 20,                   \
      "vol cs/Mop: voluntary context switches per million operations", false, 0, false)                              \
  DERIVED(runqueue_wait_s, free_max_ns, "", "s",                                                                     \
      "time the process's threads were runnable but waiting for a CPU, summed over threads (schedstat)",             \
      ns_as_seconds<F::runqueue_wait_ns>, lower, seconds, "runqueue wait s", 24, "", false, 0, false)                \
  DERIVED(runqueue_wait_share, free_max_ns, "", "ratio",                                                             \
      "run-queue wait / (run-queue wait + time on a CPU) of the process's threads",                                  \
      (of_two<F::runqueue_wait_ns, F::run_ns, runqueue_wait_share>), lower, percent, "runqueue share", 20,           \
      "runqueue share: run-queue wait / (wait + on-CPU time) of the threads", false, 0, false)
// clang-format on

// The measured metrics, then the derived ones; the order of the outputs is metric_table()'s.
#define ALLOCMARK_MEASURED_ENUMERATOR(kind, name, type, unit, fold, phase_path, node_path, sums, show, ...) \
  ALLOCMARK_IF_SHOWN_##show(name, )
#define ALLOCMARK_DERIVED_ENUMERATOR(name, ...) name,
enum class Metric : std::size_t {
  ALLOCMARK_PHASE_FIELDS(ALLOCMARK_MEASURED_ENUMERATOR) ALLOCMARK_DERIVED_METRICS(ALLOCMARK_DERIVED_ENUMERATOR) kCount
};
#undef ALLOCMARK_MEASURED_ENUMERATOR
#undef ALLOCMARK_DERIVED_ENUMERATOR
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

// The rows in the order every output lists them (metric_row(m) for one).
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
