// The measured figures of one phase as every producer reports them: the worker for a built-in
// workload and the driver for a program cell. One spelling of the record's phase fields
// (docs/results-schema.md), which the results model reads. Only what was measured: every figure
// computed from these (ops/s, RSS/live, shares) is the model's (harness/results/metric_table.cpp),
// so a record never holds a second, possibly different, copy of a formula. Producers add their
// own extras (thread_cpus, maps, alloc_stats, workload_metrics) to the object this returns, and
// `contention` from contention_record().
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "harness/metrics/proc.h"
#include "harness/record/event_keys.h"
#include "harness/record/fields.h"  // the phase figures' rows

namespace allocmark::metrics {

// The phase's own figures are the rows of the record's field table (harness/record/fields.h) of
// kind figure or recorded, each a member of its row's type; the counters and THP events are the
// rows of kind counter and thp.
struct PhaseFigures {
  std::string name;
  int64_t begin_ns = 0, end_ns = 0;
  bool peak_rss_reset = false;  // VmHWM was reset at the phase start, so the peak is the phase's own
  TaskCounters counters;        // what the phase added (faults, CPU time, context switches)
  std::optional<ThpEvents> thp_events;  // the system's THP events during the phase; absent: unread
#define ALLOCMARK_FIGURE_MEMBER(kind, name, type, ...) ALLOCMARK_IF_MEMBER_##kind(record::type name{};)
  ALLOCMARK_PHASE_FIELDS(ALLOCMARK_FIGURE_MEMBER)
#undef ALLOCMARK_FIGURE_MEMBER
};

// A phase's `thp_events` object: one key per row of ALLOCMARK_THP_EVENTS.
inline nlohmann::json thp_events_record(const ThpEvents& e) {
  nlohmann::json out = nlohmann::json::object();
#define ALLOCMARK_THP_KEY(name) out[#name] = e.name;
  ALLOCMARK_THP_EVENTS(ALLOCMARK_THP_KEY)
#undef ALLOCMARK_THP_KEY
  return out;
}

// A figure as the record holds it: its value, or null where it is absent.
template <class T>
nlohmann::json figure_value(const T& v) { return nlohmann::json(v); }
template <class T>
nlohmann::json figure_value(const std::optional<T>& v) { return v ? nlohmann::json(*v) : nlohmann::json(nullptr); }

inline nlohmann::json phase_record(const PhaseFigures& f) {
  using nlohmann::json;
  json out{{"name", f.name},
           {"wall_s", (f.end_ns - f.begin_ns) / 1e9},
           {"peak_rss_exact", f.peak_rss_reset && f.peak_rss_bytes.has_value()},
           {"thp_events", f.thp_events ? thp_events_record(*f.thp_events) : json(nullptr)},
           {record::event_key::t_begin_ns, f.begin_ns},  // the phase_end event's edges (record.cpp: start_ms, end_ms)
           {record::event_key::t_end_ns, f.end_ns}};
#define ALLOCMARK_FIGURE_KEY(kind, name, ...) ALLOCMARK_IF_MEMBER_##kind(out[#name] = figure_value(f.name);)
  ALLOCMARK_PHASE_FIELDS(ALLOCMARK_FIGURE_KEY)
#undef ALLOCMARK_FIGURE_KEY
#define ALLOCMARK_COUNTER_KEY(name) out[#name] = f.counters.name;
  ALLOCMARK_PROCESS_COUNTERS(ALLOCMARK_COUNTER_KEY)
#undef ALLOCMARK_COUNTER_KEY
  return out;
}

// One entry of a phase's `nodes`: one NUMA node at the phase end, as every producer reports it
// (the worker's NodeFigures, the driver's ProgramPhases). One spelling of the node fields
// (docs/results-schema.md, "nodes"); absent figures are null. A program cell has no crew
// threads, ops, sampled blocks or latency: those stay absent.
struct PhaseNodeFigures {
  int node = -1;
  std::optional<std::vector<int>> threads;  // the crew threads that ended the phase on the node
  std::optional<uint64_t> ops;              // their operations
  std::optional<uint64_t> resident_bytes;   // the process's, from numa_maps
  std::optional<uint64_t> sampled_blocks, local_blocks;
  std::optional<double> local_fraction;
  nlohmann::json latency = nullptr;         // {"malloc": latency_record, "free": ...}; null: not timed
  // The whole system's AnonHugePages on the node (read_system_node_huge): every process's, so on a
  // shared machine not only this cell's.
  std::optional<uint64_t> system_anon_huge_bytes;
};

inline nlohmann::json node_record(const PhaseNodeFigures& n) {
  using nlohmann::json;
  auto maybe = [](const auto& v) { return v ? json(*v) : json(nullptr); };
  return json{{"node", n.node},
              {"threads", maybe(n.threads)},
              {"ops", maybe(n.ops)},
              {"resident_bytes", maybe(n.resident_bytes)},
              {"sampled_blocks", maybe(n.sampled_blocks)},
              {"local_blocks", maybe(n.local_blocks)},
              {"local_fraction", maybe(n.local_fraction)},
              {"latency", n.latency},
              {"system_anon_huge_bytes", maybe(n.system_anon_huge_bytes)}};
}

// [node 0, node 1, ... up to the highest node read] of a system-wide huge-page reading, null for
// nodes not read: how the driver and a program cell's companion pass it on.
inline nlohmann::json system_node_huge_list(const SystemNodeHuge& h) {
  int highest = -1;
  for (int n = 0; n < kMaxNumaNodes; ++n)
    if (h.bytes[n]) highest = n;
  nlohmann::json out = nlohmann::json::array();
  for (int n = 0; n <= highest; ++n) out.push_back(h.bytes[n] ? nlohmann::json(*h.bytes[n]) : nlohmann::json(nullptr));
  return out;
}

// Sampled allocation-call latency of one kind of call (malloc or free) in a phase.
struct LatencySummary {
  uint64_t samples = 0;
  uint64_t p50_ns = 0, p99_ns = 0, p999_ns = 0, max_ns = 0;
};

// What a phase's `contention` holds besides the allocator's own lock counters: the figures every
// backend gets (docs/results-schema.md, "contention").
struct PhaseContention {
  nlohmann::json native = nlohmann::json::object();  // the allocator's lock counters for the phase
  uint32_t latency_every = 0;                        // one call in N timed
  std::optional<LatencySummary> allocs, frees;       // absent: not sampled, for `latency_absent`
  std::string latency_absent;
  std::optional<SchedTotals> sched;                  // absent: the task folder could not be read
};

inline nlohmann::json latency_record(const LatencySummary& s) {
  using nlohmann::json;
  auto value = [&](uint64_t v) { return s.samples ? json(v) : json(nullptr); };
  return {{"samples", s.samples}, {"p50_ns", value(s.p50_ns)}, {"p99_ns", value(s.p99_ns)},
          {"p999_ns", value(s.p999_ns)}, {"max_ns", value(s.max_ns)}};
}

// The phase's `contention` object: the native counters as they are, then `latency` (or null and
// `latency_absent`) and run-queue wait. Measured values only: the shares and rates over them are
// the results model's metrics (runqueue_wait_share, vol_ctx_switches_per_mop).
inline nlohmann::json contention_record(const PhaseContention& c) {
  using nlohmann::json;
  json out = c.native.is_object() ? c.native : json::object();
  if (c.allocs && c.frees) {
    out["latency"] = {{"every", c.latency_every}, {"malloc", latency_record(*c.allocs)}, {"free", latency_record(*c.frees)}};
  } else {
    out["latency"] = nullptr;
    out["latency_absent"] = c.latency_absent;
  }
  if (c.sched) {
    out["runqueue_wait_ns"] = c.sched->wait_ns;
    out["run_ns"] = c.sched->run_ns;
    out["runqueue_threads"] = c.sched->threads;
  } else {
    out["runqueue_wait_ns"] = out["run_ns"] = out["runqueue_threads"] = nullptr;
  }
  return out;
}

}  // namespace allocmark::metrics
