// The measured figures of a record's phase, one row each, in the style of the settings table
// (ALLOCMARK_SETTINGS): every place a figure is written, read or summarised expands these rows.
//   - the phase figures a producer fills (metrics::PhaseFigures: the worker for a built-in workload,
//     the driver for a program cell) and their keys in the record (metrics::phase_record());
//   - the results model's fields (results::Field, results::field_table()): where the reader finds
//     each in a phase and in a node, and how it folds over a cell's phases;
//   - the schema's field lists (docs/results-schema.md, checked against these rows by
//     RecordFields.TheSchemaListsEveryField in metrics_test);
//   - the results model's measured metrics (results::Metric, metric_table()): a row that is
//     `shown` is the metric of the same name, presented as its last column says; the metrics'
//     order in every output is these rows' order, with the derived metrics placed after the rows
//     they name (results/metric_table.h, ALLOCMARK_DERIVED_METRICS).
// Adding a measured figure is one row here and its measurement (where the producer reads it).
// Figures computed from these are the model's metrics, never a record field (metrics/derived.h).
//
// A row: X(kind, name, type, unit, fold, phase_path, node_path, phase_sums_nodes, show, presentation)
//   kind     figure:   a PhaseFigures member of `type`, written under its name, read by the model;
//            recorded: the same, but not read by the model (a record's figure for its readers);
//            read:     read by the model, written by another part of the record's writer (the
//                      phase's clock, contention_record(), node_record()); `type` unused;
//            counter:  a member of PhaseFigures::counters (metrics::TaskCounters), read by the model;
//            thp:      a member of PhaseFigures::thp_events (metrics::ThpEvents), read by the model.
//   unit     "bytes", "count", "s", "ns" (the metric of the same name has it too)
//   fold     how several phases make the whole cell's (and a node's over its phases): sum, max, last
//   phase_path  where it is in a record's phase (dotted); "" for a figure that is the sum of its nodes'
//   node_path   where it is in one of the phase's `nodes`; "" where nodes do not carry it ("threads"
//               counts the entries of a list)
//   phase_sums_nodes  without a phase_path: the phase's figure is the sum of its nodes'
//   show     shown: a metric of the same name (a row the model reads); hidden: a field only
//   presentation  for a shown row, the metric's columns besides its name, unit and formula
//            (results::MetricRow): (alias, description, better, display, header, width, note,
//            gated, node_column, default_per_node), `better` and `display` as the enumerators'
//            names (lower, mib); () for a hidden row
// The process's counters and the THP events are rows too, from figure_names.h's lists (their
// readers in proc.h expand the same lists); the call latencies from the two lists below.
//
// Floor 2.5 (tests/include_floors_test.py): below the metrics (3), whose phase_record.h expands it.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

#include "harness/record/figure_names.h"  // ALLOCMARK_PROCESS_COUNTERS, ALLOCMARK_THP_EVENTS

// Sampled call latencies: each kind of call (the model's prefix, the record's name) times each
// statistic, with how each is shown (the note under the table and the node rows' columns per call).
// Field and metric alloc_p50_ns .. free_max_ns; phase contention.latency.malloc.p50_ns, node
// latency.malloc.p50_ns.
#define ALLOCMARK_LATENCY_EACH(Y, X)                                                                           \
  ALLOCMARK_LATENCY_STATS(Y, X, alloc, malloc, "call latency: one call in N per thread timed, ns unless marked", \
                          5, 6, 7)                                                                             \
  ALLOCMARK_LATENCY_STATS(Y, X, free, free, "", 8, 9, 10)
#define ALLOCMARK_LATENCY_STATS(Y, X, prefix, call, note, p50_column, p99_column, p999_column)                   \
  Y(X, prefix, call, p50_ns,                                                                                    \
    ("", "median " #call " call latency (one call in N timed per thread)", lower, nanoseconds, #call " p50 ns", \
     20, note, false, p50_column, false))                                                                       \
  Y(X, prefix, call, p99_ns,                                                                                    \
    ("", "99th percentile " #call " call latency (sampled)", lower, nanoseconds, #call " p99 ns", 20, "", false, \
     p99_column, true))                                                                                         \
  Y(X, prefix, call, p999_ns,                                                                                   \
    ("", "99.9th percentile " #call " call latency (sampled)", lower, nanoseconds, #call " p99.9 ns", 20, "",    \
     false, p999_column, false))                                                                                \
  Y(X, prefix, call, max_ns,                                                                                    \
    ("", "slowest sampled " #call " call", lower, nanoseconds, #call " max ns", 20, "", false, 0, false))
#define ALLOCMARK_LATENCY_NAME_ONLY(X, prefix, call, stat, ...) X(prefix##_##stat)
// The latencies' names: alloc_p50_ns ... free_max_ns (both the field and the metric).
#define ALLOCMARK_CALL_LATENCIES(X) ALLOCMARK_LATENCY_EACH(ALLOCMARK_LATENCY_NAME_ONLY, X)

// clang-format off
#define ALLOCMARK_PHASE_FIELDS(X)                                                                                    \
  X(figure,   peak_rss_bytes,      OptionalU64, "bytes", max,  "peak_rss_bytes",     "",               false, shown, \
    ("peak_rss", "exact peak RSS of the phase (VmHWM after a clear_refs reset)", lower, mib, "peak RSS MiB", 24,     \
     "peak RSS: exact per phase (VmHWM after a clear_refs reset)", true, 0, false))                                  \
  X(figure,   end_rss_bytes,       OptionalU64, "bytes", last, "end_rss_bytes",      "",               false, shown, \
    ("end_rss", "RSS at the phase end", lower, mib, "end RSS MiB", 24, "", true, 0, false))                          \
  X(read,     wall_s,              void,        "s",     sum,  "wall_s",             "",               false, shown, \
    ("", "wall time", lower, seconds, "wall s", 24, "", false, 0, false))                                            \
  X(figure,   ops,                 Count,       "count", sum,  "ops",                "ops",            false, hidden, \
    ())                                                                                                              \
  ALLOCMARK_PROCESS_COUNTERS_EACH(ALLOCMARK_COUNTER_FIELD, X)                                                        \
  X(recorded, start_live_bytes,    OptionalI64, "bytes", last, "start_live_bytes",   "",               false, hidden, \
    ())                                                                                                              \
  X(figure,   peak_live_bytes,     OptionalI64, "bytes", max,  "peak_live_bytes",    "",               false, shown, \
    ("", "peak live requested bytes (the workload's own exact count)", lower, mib, "peak live MiB", 24, "", false, 0, \
     false))                                                                                                         \
  X(recorded, end_live_bytes,      OptionalI64, "bytes", last, "end_live_bytes",     "",               false, hidden, \
    ())                                                                                                              \
  X(read,     lock_wait_ns,        void,        "ns",    sum,  "contention.total_wait_ns", "",         false, hidden, \
    ())                                                                                                              \
  X(read,     lock_ops,            void,        "count", sum,  "contention.num_ops", "",               false, hidden, \
    ())                                                                                                              \
  X(read,     lock_waits,          void,        "count", sum,  "contention.num_wait", "",              false, hidden, \
    ())                                                                                                              \
  X(read,     numa_resident_bytes, void,        "bytes", last, "",                   "resident_bytes", true,  shown, \
    ("", "resident bytes at the phase end from /proc/PID/numa_maps (per node with --by ...,node)", lower, mib,       \
     "node RSS MiB", 24,                                                                                             \
     "node RSS: resident bytes at the phase end from numa_maps (per node with --by ...,node)", false, 1, true))      \
  X(read,     sampled_blocks,      void,        "count", sum,  "",                   "sampled_blocks", true,  hidden, \
    ())                                                                                                              \
  X(read,     local_blocks,        void,        "count", sum,  "",                   "local_blocks",   true,  hidden, \
    ())                                                                                                              \
  X(read,     node_threads,        void,        "count", max,  "",                   "threads",        false, shown, \
    ("", "worker threads that ended the phase on the node (--by ...,node)", lower, si, "threads on node", 16, "",    \
     false, 3, true))                                                                                                \
  ALLOCMARK_LATENCY_EACH(ALLOCMARK_LATENCY_FIELD, X)                                                                 \
  X(read,     runqueue_wait_ns,    void,        "ns",    sum,  "contention.runqueue_wait_ns", "",      false, hidden, \
    ())                                                                                                              \
  X(read,     run_ns,              void,        "ns",    sum,  "contention.run_ns",  "",               false, hidden, \
    ())                                                                                                              \
  X(figure,   anon_huge_bytes,     OptionalU64, "bytes", last, "anon_huge_bytes",    "",               false, shown, \
    ("", "anonymous memory in transparent huge pages at the phase end (AnonHugePages of /proc/PID/smaps_rollup)",    \
     lower, mib, "huge MiB", 20,                                                                                     \
     "huge MiB: anonymous memory in transparent huge pages at the phase end (part of end RSS)", true, 0, false))     \
  ALLOCMARK_THP_EVENTS_EACH(ALLOCMARK_THP_FIELD, X)                                                                  \
  X(read,     system_anon_huge_bytes, void,     "bytes", last, "",          "system_anon_huge_bytes",  true,  shown, \
    ("", "anonymous memory in transparent huge pages at the phase end, system-wide: every process's, not only the "  \
     "cell's (AnonHugePages of /sys/devices/system/node/nodeN/meminfo; per node with --by ...,node)", lower, mib,    \
     "sys huge MiB", 20, "sys huge MiB: the whole system's transparent huge pages at the phase end (every "          \
     "process's), per node with --by ...,node", false, 11, false))                                                   \
  X(read,     rss_after_10ms_bytes,  void,      "bytes", last, "return_curve.after_10ms.rss_bytes",  "", false, shown, \
    ("", "RSS 10 ms after the last phase's end, the worker idle (the return curve's first point; settle_ms > 0)",    \
     lower, mib, "RSS +10ms MiB", 20, "", false, 0, false))                                                          \
  X(read,     rss_after_100ms_bytes, void,      "bytes", last, "return_curve.after_100ms.rss_bytes", "", false, shown, \
    ("", "RSS 100 ms after the last phase's end, the worker idle: the held RSS the recommendation ranks", lower, mib, \
     "RSS +100ms MiB", 20, "RSS +10ms, +100ms, settled: the return curve, RSS after the last phase with the worker " \
     "idle", false, 0, false))                                                                                       \
  X(read,     rss_settled_bytes,     void,      "bytes", last, "return_curve.settled.rss_bytes",     "", false, shown, \
    ("", "RSS at the end of the settle after the last phase (settle_ms after its end, the worker idle)", lower, mib, \
     "RSS settled MiB", 20, "", false, 0, false))
// clang-format on
//   wall_s                 the phase's clock (phase_record() from begin_ns and end_ns)
//   lock_*                 allocators with lock counters (jemalloc, numap): contention_record() copies them
//   numa_resident_bytes .. numa_maps at the phase end and move_pages of sampled blocks, per node
//   node_threads           the crew threads that ended the phase on the node
//   latencies              null where calls are not sampled: rocksdb and program cells, latency_every = 0
//   runqueue_wait_ns, run_ns  schedstat of the process's threads (contention_record())
//   anon_huge_bytes        the process's huge pages at the phase end (smaps_rollup)
//   thp_*                  the system's THP events during the phase (/proc/vmstat, every process's)
//   system_anon_huge_bytes the whole system's huge pages per node at the phase end (every process's)
//   rss_after_*, rss_settled  the return curve: the process's RSS 10 ms, 100 ms and settle_ms after the
//                          last phase's end, the worker idle (its settle); only the last phase has them

// The rows the lists make. Counters: TaskCounters' members, each under its own name in the phase.
// Latencies: alloc_p50_ns from contention.latency.malloc.p50_ns, in a node latency.malloc.p50_ns.
// THP events: field thp_NAME from the phase's thp_events.NAME.
#define ALLOCMARK_COUNTER_FIELD(X, name, unit, presentation) \
  X(counter, name, void, unit, sum, #name, "", false, shown, presentation)
#define ALLOCMARK_LATENCY_FIELD(X, prefix, call, stat, presentation)                                            \
  X(read, prefix##_##stat, void, "ns", max, "contention.latency." #call "." #stat, "latency." #call "." #stat, \
    false, shown, presentation)
#define ALLOCMARK_THP_FIELD(X, name, presentation) \
  X(thp, thp_##name, void, "count", sum, "thp_events." #name, "", false, shown, presentation)

namespace allocmark::record {

// The types of PhaseFigures' members (a row's `type`).
using Count = std::uint64_t;
using OptionalU64 = std::optional<std::uint64_t>;  // absent: could not be read
using OptionalI64 = std::optional<std::int64_t>;   // absent: not counted

// How a figure of several phases becomes the whole cell's (and a node's over its phases).
enum class Fold {
  sum,   // counts and times
  max,   // peaks, and call latency percentiles (the worst phase's)
  last,  // states at the phase end
};

enum class Kind { figure, recorded, read, counter, thp };

// One row as data, for the model's field table and the schema check.
struct FieldSpec {
  Kind kind;
  std::string_view name, unit;
  Fold fold;
  std::string_view phase_path, node_path;
  bool phase_sums_nodes;
};

#define ALLOCMARK_FIELD_SPEC(kind, name, type, unit, fold, phase_path, node_path, sums, ...) \
  FieldSpec{Kind::kind, #name, unit, Fold::fold, phase_path, node_path, sums},
inline constexpr FieldSpec kPhaseFields[] = {ALLOCMARK_PHASE_FIELDS(ALLOCMARK_FIELD_SPEC)};
#undef ALLOCMARK_FIELD_SPEC

// Whether the results model reads a row (every kind but `recorded`): the rows of results::Field.
#define ALLOCMARK_IF_READ_figure(...) __VA_ARGS__
#define ALLOCMARK_IF_READ_read(...) __VA_ARGS__
#define ALLOCMARK_IF_READ_counter(...) __VA_ARGS__
#define ALLOCMARK_IF_READ_thp(...) __VA_ARGS__
#define ALLOCMARK_IF_READ_recorded(...)
// Whether a row is a measured metric (shown) or not (hidden): the results model's MEASURED metrics.
#define ALLOCMARK_IF_SHOWN_shown(...) __VA_ARGS__
#define ALLOCMARK_IF_SHOWN_hidden(...)
// Whether a row is a member of PhaseFigures of its own type (figure, recorded).
#define ALLOCMARK_IF_MEMBER_figure(...) __VA_ARGS__
#define ALLOCMARK_IF_MEMBER_recorded(...) __VA_ARGS__
#define ALLOCMARK_IF_MEMBER_read(...)
#define ALLOCMARK_IF_MEMBER_counter(...)
#define ALLOCMARK_IF_MEMBER_thp(...)

}  // namespace allocmark::record
