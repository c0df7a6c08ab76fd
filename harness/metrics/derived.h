// Every figure allocmark derives from measured ones, defined once. The metric table
// (results/metric_table.cpp) names which metric each computes; nothing else computes them. They
// are the results' formulas kept on the floor of the measurements, so the producers of a record
// (the worker, a program cell's phases) use them without reaching up.
#pragma once

#include <optional>

namespace allocmark::results {

// RSS above the worker's idle baseline per live requested byte: (peak RSS - idle RSS) / peak live
// bytes. 1.0 is the physical floor; above it is what the allocator holds beyond what was asked.
// Undefined (nullopt) without live bytes.
inline std::optional<double> rss_above_idle_over_live(double peak_rss, double idle_rss, double peak_live) {
  if (!(peak_live > 0)) return std::nullopt;
  return (peak_rss - idle_rss) / peak_live;
}

// Operations per second of wall time; 0 for a zero-length interval.
inline double ops_per_second(double ops, double wall_s) { return wall_s > 0 ? ops / wall_s : 0.0; }

// Seconds from the nanosecond counters (lock waits, run-queue waits: summed over threads, so they
// can exceed the wall time).
inline double nanoseconds_as_seconds(double ns) { return ns / 1e9; }

// How much worse the runner-up is than the best (lower is better): 0.25 = 25 % more.
inline double relative_margin(double best, double runner_up) { return best > 0 ? runner_up / best - 1 : 0.0; }

// Spread of repetitions relative to their median: (max - min) / median.
inline double relative_range(double min, double max, double median) { return median > 0 ? (max - min) / median : 0.0; }

// `advise`'s trade-off between memory and time, equal weights: each as a ratio to the best
// allocator's value, summed (2.0 = best at both).
inline double tradeoff_score(double peak_rss, double best_peak_rss, double wall_s, double best_wall_s) {
  return (best_peak_rss > 0 ? peak_rss / best_peak_rss : 1.0) + (best_wall_s > 0 ? wall_s / best_wall_s : 1.0);
}

// Share of the allocator's lock acquisitions that found the lock taken and had to wait
// (contention.num_wait / num_ops); undefined without acquisitions.
inline std::optional<double> contended_share(double waits, double acquisitions) {
  if (!(acquisitions > 0)) return std::nullopt;
  return waits / acquisitions;
}

// Share of sampled blocks whose page is on the node of the CPU that allocated them (move_pages
// after the phase): 1.0 all local. Undefined without a resident sampled block.
inline std::optional<double> local_fraction(double local_blocks, double sampled_blocks) {
  if (!(sampled_blocks > 0)) return std::nullopt;
  return local_blocks / sampled_blocks;
}

// Events per million operations (voluntary context switches: a thread sleeping, on a futex in a
// contended lock among others); undefined without operations.
inline std::optional<double> per_million_ops(double events, double ops) {
  if (!(ops > 0)) return std::nullopt;
  return events / ops * 1e6;
}

// Share of the threads' runnable time spent waiting on a run queue rather than on a CPU:
// wait / (wait + run), from /proc/PID/task/*/schedstat; undefined when the threads never ran.
inline std::optional<double> runqueue_wait_share(double wait_ns, double run_ns) {
  if (!(wait_ns + run_ns > 0)) return std::nullopt;
  return wait_ns / (wait_ns + run_ns);
}

}  // namespace allocmark::results
