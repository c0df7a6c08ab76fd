// The measured figures of one phase as every producer reports them: the worker for a built-in
// workload and the driver for a program cell. One spelling of the record's phase fields
// (docs/results-schema.md), which the results model reads; producers add their own extras
// (thread_cpus, maps, alloc_stats, contention, workload_metrics) to the object this returns.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>

#include "harness/metrics/proc.h"
#include "harness/results/derived.h"

namespace allocmark::metrics {

struct PhaseFigures {
  std::string name;
  int64_t begin_ns = 0, end_ns = 0;
  uint64_t ops = 0;
  std::optional<uint64_t> peak_rss_bytes, end_rss_bytes;  // absent: /proc could not be read
  bool peak_rss_reset = false;  // VmHWM was reset at the phase start, so the peak is the phase's own
  std::optional<int64_t> start_live_bytes, peak_live_bytes, end_live_bytes;  // absent: not counted
  TaskCounters counters;        // what the phase added (faults, CPU time, context switches)
};

inline nlohmann::json phase_record(const PhaseFigures& f) {
  using nlohmann::json;
  auto maybe = [](const auto& v) { return v ? json(*v) : json(nullptr); };
  const double wall = (f.end_ns - f.begin_ns) / 1e9;
  return json{{"name", f.name},
              {"wall_s", wall},
              {"ops", f.ops},
              {"ops_per_s", results::ops_per_second(static_cast<double>(f.ops), wall)},
              {"peak_rss_bytes", maybe(f.peak_rss_bytes)},
              {"peak_rss_exact", f.peak_rss_reset && f.peak_rss_bytes.has_value()},
              {"end_rss_bytes", maybe(f.end_rss_bytes)},
              {"start_live_bytes", maybe(f.start_live_bytes)},
              {"peak_live_bytes", maybe(f.peak_live_bytes)},
              {"end_live_bytes", maybe(f.end_live_bytes)},
              {"minor_faults", f.counters.minor_faults},
              {"major_faults", f.counters.major_faults},
              {"voluntary_ctx_switches", f.counters.voluntary_ctx_switches},
              {"involuntary_ctx_switches", f.counters.involuntary_ctx_switches},
              {"user_s", f.counters.user_s},
              {"sys_s", f.counters.sys_s},
              {"t_begin_ns", f.begin_ns},
              {"t_end_ns", f.end_ns}};
}

}  // namespace allocmark::metrics
