// The measured figures of a record's phase, one row each, in the style of the settings table
// (ALLOCMARK_SETTINGS): every place a figure is written, read or summarised expands these rows.
//   - the phase figures a producer fills (metrics::PhaseFigures: the worker for a built-in workload,
//     the driver for a program cell) and their keys in the record (metrics::phase_record());
//   - the results model's fields (results::Field, results::field_table()): where the reader finds
//     each in a phase and in a node, and how it folds over a cell's phases;
//   - the schema's field lists (docs/results-schema.md, checked against these rows by
//     RecordFields.TheSchemaListsEveryField in metrics_test).
// Adding a measured figure is one row here and its measurement (where the producer reads it); a
// metric of the same name then takes it by name (results/metric_table.cpp, `measured<F::name>`).
// Figures computed from these are the model's metrics, never a record field (metrics/derived.h).
//
// A row: X(kind, name, type, unit, fold, phase_path, node_path, phase_sums_nodes)
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
// statistic. Field and metric alloc_p50_ns .. free_max_ns; phase contention.latency.malloc.p50_ns,
// node latency.malloc.p50_ns.
#define ALLOCMARK_LATENCY_EACH(Y, X) \
  ALLOCMARK_LATENCY_STATS(Y, X, alloc, malloc) ALLOCMARK_LATENCY_STATS(Y, X, free, free)
#define ALLOCMARK_LATENCY_STATS(Y, X, prefix, call) \
  Y(X, prefix, call, p50_ns) Y(X, prefix, call, p99_ns) Y(X, prefix, call, p999_ns) Y(X, prefix, call, max_ns)
#define ALLOCMARK_LATENCY_NAME_ONLY(X, prefix, call, stat) X(prefix##_##stat)
// The latencies' names: alloc_p50_ns ... free_max_ns (both the field and the metric).
#define ALLOCMARK_CALL_LATENCIES(X) ALLOCMARK_LATENCY_EACH(ALLOCMARK_LATENCY_NAME_ONLY, X)

// clang-format off
#define ALLOCMARK_PHASE_FIELDS(X)                                                                                   \
  X(read,     wall_s,              void,          "s",     sum,  "wall_s",              "",               false)  \
  X(figure,   ops,                 Count,         "count", sum,  "ops",                 "ops",            false)  \
  X(figure,   peak_rss_bytes,      OptionalU64,   "bytes", max,  "peak_rss_bytes",      "",               false)  \
  X(figure,   end_rss_bytes,       OptionalU64,   "bytes", last, "end_rss_bytes",       "",               false)  \
  X(recorded, start_live_bytes,    OptionalI64,   "bytes", last, "start_live_bytes",    "",               false)  \
  X(figure,   peak_live_bytes,     OptionalI64,   "bytes", max,  "peak_live_bytes",     "",               false)  \
  X(recorded, end_live_bytes,      OptionalI64,   "bytes", last, "end_live_bytes",      "",               false)  \
  ALLOCMARK_PROCESS_COUNTERS_EACH(ALLOCMARK_COUNTER_FIELD, X)                                                       \
  X(read,     lock_wait_ns,        void,          "ns",    sum,  "contention.total_wait_ns", "",          false)  \
  X(read,     lock_ops,            void,          "count", sum,  "contention.num_ops",  "",               false)  \
  X(read,     lock_waits,          void,          "count", sum,  "contention.num_wait", "",               false)  \
  X(read,     numa_resident_bytes, void,          "bytes", last, "",                    "resident_bytes", true)   \
  X(read,     sampled_blocks,      void,          "count", sum,  "",                    "sampled_blocks", true)   \
  X(read,     local_blocks,        void,          "count", sum,  "",                    "local_blocks",   true)   \
  X(read,     node_threads,        void,          "count", max,  "",                    "threads",        false)  \
  ALLOCMARK_LATENCY_EACH(ALLOCMARK_LATENCY_FIELD, X)                                                                \
  X(read,     runqueue_wait_ns,    void,          "ns",    sum,  "contention.runqueue_wait_ns", "",       false)  \
  X(read,     run_ns,              void,          "ns",    sum,  "contention.run_ns",   "",               false)  \
  X(figure,   anon_huge_bytes,     OptionalU64,   "bytes", last, "anon_huge_bytes",     "",               false)  \
  ALLOCMARK_THP_EVENTS_EACH(ALLOCMARK_THP_FIELD, X)                                                                 \
  X(read,     system_anon_huge_bytes, void,       "bytes", last, "",            "system_anon_huge_bytes", true)   \
  X(read,     rss_after_10ms_bytes,  void,        "bytes", last, "return_curve.after_10ms.rss_bytes",  "", false)  \
  X(read,     rss_after_100ms_bytes, void,        "bytes", last, "return_curve.after_100ms.rss_bytes", "", false)  \
  X(read,     rss_settled_bytes,     void,        "bytes", last, "return_curve.settled.rss_bytes",     "", false)
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
#define ALLOCMARK_COUNTER_FIELD(X, name, unit) X(counter, name, void, unit, sum, #name, "", false)
#define ALLOCMARK_LATENCY_FIELD(X, prefix, call, stat)                                                          \
  X(read, prefix##_##stat, void, "ns", max, "contention.latency." #call "." #stat, "latency." #call "." #stat, \
    false)
#define ALLOCMARK_THP_FIELD(X, name) X(thp, thp_##name, void, "count", sum, "thp_events." #name, "", false)

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

#define ALLOCMARK_FIELD_SPEC(kind, name, type, unit, fold, phase_path, node_path, sums) \
  FieldSpec{Kind::kind, #name, unit, Fold::fold, phase_path, node_path, sums},
inline constexpr FieldSpec kPhaseFields[] = {ALLOCMARK_PHASE_FIELDS(ALLOCMARK_FIELD_SPEC)};
#undef ALLOCMARK_FIELD_SPEC

// Whether the results model reads a row (every kind but `recorded`): the rows of results::Field.
#define ALLOCMARK_IF_READ_figure(...) __VA_ARGS__
#define ALLOCMARK_IF_READ_read(...) __VA_ARGS__
#define ALLOCMARK_IF_READ_counter(...) __VA_ARGS__
#define ALLOCMARK_IF_READ_thp(...) __VA_ARGS__
#define ALLOCMARK_IF_READ_recorded(...)
// Whether a row is a member of PhaseFigures of its own type (figure, recorded).
#define ALLOCMARK_IF_MEMBER_figure(...) __VA_ARGS__
#define ALLOCMARK_IF_MEMBER_recorded(...) __VA_ARGS__
#define ALLOCMARK_IF_MEMBER_read(...)
#define ALLOCMARK_IF_MEMBER_counter(...)
#define ALLOCMARK_IF_MEMBER_thp(...)

}  // namespace allocmark::record
