#include "harness/results/reporters/text.h"

#include <fmt/format.h>

#include <functional>

namespace allocmark::results::text {
namespace {

using Format = std::function<std::string(double)>;

std::string mib(double bytes) { return fmt::format("{:.1f}", bytes / (1024.0 * 1024.0)); }
std::string ratio(double v) { return fmt::format("{:.2f}", v); }

// Counts and rates with an SI suffix: 912.9k, 5.24M.
std::string si(double v) {
  if (v >= 1e9) return fmt::format("{:.2f}G", v / 1e9);
  if (v >= 1e6) return fmt::format("{:.2f}M", v / 1e6);
  if (v >= 1e3) return fmt::format("{:.1f}k", v / 1e3);
  return fmt::format("{:.0f}", v);
}

// Rates that are often below one (events per million operations): three significant digits.
std::string rate(double v) { return v < 1000 ? fmt::format("{:.3g}", v) : si(v); }

// Call latencies from nanoseconds to seconds.
std::string nanoseconds(double v) {
  if (v >= 1e9) return fmt::format("{:.2f}s", v / 1e9);
  if (v >= 1e6) return fmt::format("{:.2f}ms", v / 1e6);
  if (v >= 1e4) return fmt::format("{:.1f}us", v / 1e3);
  return fmt::format("{:.0f}", v);
}

// Phases last from microseconds to minutes: three significant digits below a second.
std::string seconds(double v) {
  if (v == 0) return "0";
  if (v < 1) return fmt::format("{:.3g}", v);
  if (v < 100) return fmt::format("{:.2f}", v);
  return fmt::format("{:.0f}", v);
}

// A workload's own figures, whatever their scale: four significant digits.
std::string general(double v) { return fmt::format("{:.4g}", v); }

struct MetricColumn {
  Metric metric;
  Column column;
  Format format;
  const char* note;  // for the footnote; nullptr when the header says it all
};

const std::vector<MetricColumn>& metric_columns() {
  static const std::vector<MetricColumn> columns{
      {Metric::peak_rss_bytes, {"peak RSS MiB", 24, true}, mib,
       "peak RSS: exact per phase (VmHWM after a clear_refs reset)"},
      {Metric::end_rss_bytes, {"end RSS MiB", 24, true}, mib, nullptr},
      {Metric::rss_above_idle_over_live, {"RSS-idle/live", 20, true}, ratio,
       "RSS-idle/live: (peak RSS - idle baseline) / peak live requested bytes"},
      {Metric::ops_per_s, {"ops/s", 24, true}, si, nullptr},
      {Metric::wall_s, {"wall s", 24, true}, seconds, nullptr},
      {Metric::minor_faults, {"minor faults", 20, true}, si, nullptr},
      {Metric::major_faults, {"major faults", 20, true}, si, nullptr},
      {Metric::voluntary_ctx_switches, {"vol ctx switches", 20, true}, si, nullptr},
      {Metric::involuntary_ctx_switches, {"invol ctx switches", 20, true}, si, nullptr},
      {Metric::user_s, {"user s", 24, true}, seconds, nullptr},
      {Metric::sys_s, {"sys s", 24, true}, seconds, nullptr},
      {Metric::lock_wait_s, {"lock wait s", 24, true}, seconds,
       "lock wait: allocator lock waits summed over threads (jemalloc, numap)"},
      {Metric::peak_live_bytes, {"peak live MiB", 24, true}, mib, nullptr},
      {Metric::contended_share, {"contended", 20, true}, ratio,
       "contended: share of allocator lock acquisitions that waited (jemalloc, numap)"},
      {Metric::alloc_p50_ns, {"malloc p50 ns", 20, true}, nanoseconds,
       "call latency: one call in N per thread timed, ns unless marked"},
      {Metric::alloc_p99_ns, {"malloc p99 ns", 20, true}, nanoseconds, nullptr},
      {Metric::alloc_p999_ns, {"malloc p99.9 ns", 20, true}, nanoseconds, nullptr},
      {Metric::alloc_max_ns, {"malloc max ns", 20, true}, nanoseconds, nullptr},
      {Metric::free_p50_ns, {"free p50 ns", 20, true}, nanoseconds, nullptr},
      {Metric::free_p99_ns, {"free p99 ns", 20, true}, nanoseconds, nullptr},
      {Metric::free_p999_ns, {"free p99.9 ns", 20, true}, nanoseconds, nullptr},
      {Metric::free_max_ns, {"free max ns", 20, true}, nanoseconds, nullptr},
      {Metric::vol_ctx_switches_per_mop, {"vol cs/Mop", 20, true}, rate,
       "vol cs/Mop: voluntary context switches per million operations"},
      {Metric::runqueue_wait_s, {"runqueue wait s", 24, true}, seconds, nullptr},
      {Metric::runqueue_wait_share, {"runqueue share", 20, true}, ratio,
       "runqueue share: run-queue wait / (wait + on-CPU time) of the threads"},
      {Metric::numa_resident_bytes, {"node RSS MiB", 24, true}, mib,
       "node RSS: resident bytes at the phase end from numa_maps (per node with --by ...,node)"},
      {Metric::local_fraction, {"local", 20, true}, ratio,
       "local: share of sampled blocks whose page is on the allocating thread's node"},
      {Metric::node_threads, {"threads on node", 16, true}, si, nullptr},
  };
  return columns;
}

const MetricColumn& metric_column(Metric m) {
  for (const auto& c : metric_columns())
    if (c.metric == m) return c;
  throw ResultsError(fmt::format("no column for metric {}", metric_info(m).name));
}

Column dimension_column(Dimension d) {
  switch (d) {
    case Dimension::workload: return {"workload", 14, false};
    case Dimension::threads: return {"thr", 3, true};
    case Dimension::allocator: return {"allocator", 18, false};
    case Dimension::phase: return {"phase", 10, false};
    case Dimension::backend: return {"backend", 10, false};
    case Dimension::host: return {"host", 16, false};
    case Dimension::node: return {"node", 4, true};
  }
  return {std::string(dimension_name(d)), 10, false};
}

// "median [min-max]", or only the median where the repetitions agree or there is one.
std::string spread_text(const Spread& s, const Format& format) {
  if (s.n == 0) return "-";
  std::string m = format(s.median);
  return s.n == 1 || s.min == s.max ? m : fmt::format("{} [{}-{}]", m, format(s.min), format(s.max));
}

std::string status_text(const Group& g) {
  std::string out;
  for (const auto& [status, n] : g.statuses) out += fmt::format("{}{} {}", out.empty() ? "" : ", ", n, status);
  return out;
}

}  // namespace

std::string value_text(Metric m, double value) { return metric_column(m).format(value); }
std::string spread_text(Metric m, const Spread& s) { return spread_text(s, metric_column(m).format); }
std::string metric_header(Metric m) { return metric_column(m).column.header; }
std::string metric_note(Metric m) {
  const char* note = metric_column(m).note;
  return note ? note : "";
}

std::vector<Metric> default_human_metrics() {
  return {Metric::peak_rss_bytes, Metric::rss_above_idle_over_live, Metric::ops_per_s};
}

TextReport text_report(const Grouping& grouping, const std::vector<Metric>& metrics) {
  TextReport report;
  for (Dimension d : grouping.dimensions) report.columns.push_back(dimension_column(d));
  for (Metric m : metrics) report.columns.push_back(metric_column(m).column);
  for (const auto& name : grouping.workload_metrics) report.columns.push_back({name, 12, true});
  for (const Group& g : grouping.groups) {
    Row row;
    for (const auto& v : g.values) row.cells.push_back(value_label(v));
    for (Metric m : metrics) row.cells.push_back(spread_text(g.metric(m), metric_column(m).format));
    for (const auto& name : grouping.workload_metrics) {
      auto it = g.workload_metrics.find(name);
      row.cells.push_back(spread_text(it == g.workload_metrics.end() ? Spread{} : it->second, general));
    }
    row.status = status_text(g);
    row.errors = g.errors;
    if (g.errors_not_listed) row.errors.push_back(fmt::format("... and {} more", g.errors_not_listed));
    report.rows.push_back(std::move(row));
  }
  for (Metric m : metrics)
    if (const char* note = metric_column(m).note) report.footnote += std::string(note) + "; ";
  if (!grouping.workload_metrics.empty())
    report.footnote += "workload metrics as each workload defines them (docs/workloads.md); ";
  report.footnote += "median [min-max] over repetitions.";
  return report;
}

}  // namespace allocmark::results::text
