#include "harness/results/metric_table.h"

#include <fmt/format.h>

#include <algorithm>

#include "harness/metrics/derived.h"
#include "harness/results/results_dir.h"  // ResultsError

namespace allocmark::results {

namespace {

constexpr std::array<FieldRow, kFieldCount> kFieldTable{{
    {Field::wall_s, "wall_s", "", Fold::sum, false},
    {Field::ops, "ops", "ops", Fold::sum, false},
    {Field::peak_rss_bytes, "peak_rss_bytes", "", Fold::max, false},
    {Field::end_rss_bytes, "end_rss_bytes", "", Fold::last, false},
    {Field::peak_live_bytes, "peak_live_bytes", "", Fold::max, false},
    // The process's counters (harness/metrics/figure_names.h), each under its own name in the phase.
#define ALLOCMARK_COUNTER_FIELD_ROW(name) {Field::name, #name, "", Fold::sum, false},
    ALLOCMARK_PROCESS_COUNTERS(ALLOCMARK_COUNTER_FIELD_ROW)
#undef ALLOCMARK_COUNTER_FIELD_ROW
    // Allocators with lock counters (jemalloc, numap).
    {Field::lock_wait_ns, "contention.total_wait_ns", "", Fold::sum, false},
    {Field::lock_ops, "contention.num_ops", "", Fold::sum, false},
    {Field::lock_waits, "contention.num_wait", "", Fold::sum, false},
    // numa_maps at the phase end and move_pages of sampled blocks, per node; the phase's are the sums.
    {Field::numa_resident_bytes, "", "resident_bytes", Fold::last, true},
    {Field::sampled_blocks, "", "sampled_blocks", Fold::sum, true},
    {Field::local_blocks, "", "local_blocks", Fold::sum, true},
    {Field::node_threads, "", "threads", Fold::max, false},
    // Sampled call latencies (null where not sampled: rocksdb and program cells, latency_every = 0).
    {Field::alloc_p50_ns, "contention.latency.malloc.p50_ns", "latency.malloc.p50_ns", Fold::max, false},
    {Field::alloc_p99_ns, "contention.latency.malloc.p99_ns", "latency.malloc.p99_ns", Fold::max, false},
    {Field::alloc_p999_ns, "contention.latency.malloc.p999_ns", "latency.malloc.p999_ns", Fold::max, false},
    {Field::alloc_max_ns, "contention.latency.malloc.max_ns", "latency.malloc.max_ns", Fold::max, false},
    {Field::free_p50_ns, "contention.latency.free.p50_ns", "latency.free.p50_ns", Fold::max, false},
    {Field::free_p99_ns, "contention.latency.free.p99_ns", "latency.free.p99_ns", Fold::max, false},
    {Field::free_p999_ns, "contention.latency.free.p999_ns", "latency.free.p999_ns", Fold::max, false},
    {Field::free_max_ns, "contention.latency.free.max_ns", "latency.free.max_ns", Fold::max, false},
    // schedstat of the process's threads.
    {Field::runqueue_wait_ns, "contention.runqueue_wait_ns", "", Fold::sum, false},
    {Field::run_ns, "contention.run_ns", "", Fold::sum, false},
    // Transparent huge pages: the process's at the phase end (smaps_rollup) and the system's
    // events during it (/proc/vmstat, every process's).
    {Field::anon_huge_bytes, "anon_huge_bytes", "", Fold::last, false},
#define ALLOCMARK_THP_FIELD_ROW(name) {Field::thp_##name, "thp_events." #name, "", Fold::sum, false},
    ALLOCMARK_THP_EVENTS(ALLOCMARK_THP_FIELD_ROW)
#undef ALLOCMARK_THP_FIELD_ROW
    // The whole system's huge pages per node at the phase end (node meminfo, every process's); the
    // phase's is the sum over its nodes.
    {Field::system_anon_huge_bytes, "", "system_anon_huge_bytes", Fold::last, true},
}};

// A metric that is one field as recorded.
template <Field F>
std::optional<double> measured(const FieldValues& p, std::optional<double>) {
  return p.get(F);
}

// A metric that is a formula of derived.h over two fields, undefined where either is missing.
template <Field A, Field B, auto Fn>
std::optional<double> of_two(const FieldValues& p, std::optional<double>) {
  auto a = p.get(A), b = p.get(B);
  if (!a || !b) return std::nullopt;
  return Fn(*a, *b);
}

std::optional<double> rss_above_idle(const FieldValues& p, std::optional<double> idle) {
  auto peak = p.get(Field::peak_rss_bytes), live = p.get(Field::peak_live_bytes);
  if (!peak || !live || !idle) return std::nullopt;
  return rss_above_idle_over_live(*peak, *idle, *live);
}

// Of a phase, a node or a whole cell alike: total operations over total time, never a sum of
// rates (older records also carry each phase's ops_per_s, which is this same quotient; not read).
std::optional<double> throughput(const FieldValues& p, std::optional<double>) {
  auto ops = p.get(Field::ops), wall = p.get(Field::wall_s);
  if (!ops || !wall) return std::nullopt;
  return ops_per_second(*ops, *wall);
}

template <Field F>
std::optional<double> ns_as_seconds(const FieldValues& p, std::optional<double>) {
  auto ns = p.get(F);
  if (!ns) return std::nullopt;
  return nanoseconds_as_seconds(*ns);
}

using F = Field;
using M = Metric;
using D = Display;
constexpr Better kLower = Better::lower, kHigher = Better::higher;

// name, alias, unit, description, formula, better, display, header, width, note, gated, node column (0: none), default node column
constexpr std::array<MetricRow, kMetricCount> kMetricTable{{
    {M::peak_rss_bytes, "peak_rss_bytes", "peak_rss", "bytes", "exact peak RSS of the phase (VmHWM after a clear_refs reset)",
     measured<F::peak_rss_bytes>, kLower, D::mib, "peak RSS MiB", 24, "peak RSS: exact per phase (VmHWM after a clear_refs reset)",
     true, 0, false},
    {M::end_rss_bytes, "end_rss_bytes", "end_rss", "bytes", "RSS at the phase end", measured<F::end_rss_bytes>, kLower, D::mib,
     "end RSS MiB", 24, "", true, 0, false},
    {M::rss_above_idle_over_live, "rss_above_idle_over_live", "rss_over_live", "ratio",
     "(peak RSS - idle RSS) / peak live requested bytes; 1.0 is the physical floor", rss_above_idle, kLower, D::ratio,
     "RSS-idle/live", 20, "RSS-idle/live: (peak RSS - idle baseline) / peak live requested bytes", true, 0, false},
    {M::ops_per_s, "ops_per_s", "", "1/s", "operations per second of wall time", throughput, kHigher, D::si, "ops/s", 24, "",
     true, 4, true},
    {M::wall_s, "wall_s", "", "s", "wall time", measured<F::wall_s>, kLower, D::seconds, "wall s", 24, "", false, 0, false},
    {M::minor_faults, "minor_faults", "", "count", "minor page faults", measured<F::minor_faults>, kLower, D::si,
     "minor faults", 20, "", false, 0, false},
    {M::major_faults, "major_faults", "", "count", "major page faults", measured<F::major_faults>, kLower, D::si,
     "major faults", 20, "", false, 0, false},
    {M::voluntary_ctx_switches, "voluntary_ctx_switches", "", "count", "voluntary context switches",
     measured<F::voluntary_ctx_switches>, kLower, D::si, "vol ctx switches", 20, "", false, 0, false},
    {M::involuntary_ctx_switches, "involuntary_ctx_switches", "", "count", "involuntary context switches",
     measured<F::involuntary_ctx_switches>, kLower, D::si, "invol ctx switches", 20, "", false, 0, false},
    {M::user_s, "user_s", "", "s", "user CPU time", measured<F::user_s>, kLower, D::seconds, "user s", 24, "", false, 0, false},
    {M::sys_s, "sys_s", "", "s", "system CPU time", measured<F::sys_s>, kLower, D::seconds, "sys s", 24, "", false, 0, false},
    {M::lock_wait_s, "lock_wait_s", "", "s",
     "time threads waited for allocator locks (jemalloc's mutex profiling, numap's counters)", ns_as_seconds<F::lock_wait_ns>,
     kLower, D::seconds, "lock wait s", 24, "lock wait: allocator lock waits summed over threads (jemalloc, numap)", false, 0,
     false},
    {M::peak_live_bytes, "peak_live_bytes", "", "bytes", "peak live requested bytes (the workload's own exact count)",
     measured<F::peak_live_bytes>, kLower, D::mib, "peak live MiB", 24, "", false, 0, false},
    {M::contended_share, "contended_share", "", "ratio",
     "share of allocator lock acquisitions that had to wait (contention num_wait / num_ops)",
     of_two<F::lock_waits, F::lock_ops, contended_share>, kLower, D::percent, "contended", 20,
     "contended: share of allocator lock acquisitions that waited (jemalloc, numap)", false, 0, false},
    {M::numa_resident_bytes, "numa_resident_bytes", "", "bytes",
     "resident bytes at the phase end from /proc/PID/numa_maps (per node with --by ...,node)", measured<F::numa_resident_bytes>,
     kLower, D::mib, "node RSS MiB", 24, "node RSS: resident bytes at the phase end from numa_maps (per node with --by ...,node)",
     false, 1, true},
    {M::local_fraction, "local_fraction", "", "ratio",
     "share of sampled blocks whose page is on the allocating thread's node (move_pages after the phase)",
     of_two<F::local_blocks, F::sampled_blocks, local_fraction>, kHigher, D::percent, "local", 20,
     "local: share of sampled blocks whose page is on the allocating thread's node", false, 2, true},
    {M::node_threads, "node_threads", "", "count", "worker threads that ended the phase on the node (--by ...,node)",
     measured<F::node_threads>, kLower, D::si, "threads on node", 16, "", false, 3, true},
    {M::alloc_p50_ns, "alloc_p50_ns", "", "ns", "median malloc call latency (one call in N timed per thread)",
     measured<F::alloc_p50_ns>, kLower, D::nanoseconds, "malloc p50 ns", 20,
     "call latency: one call in N per thread timed, ns unless marked", false, 5, false},
    {M::alloc_p99_ns, "alloc_p99_ns", "", "ns", "99th percentile malloc call latency (sampled)", measured<F::alloc_p99_ns>, kLower,
     D::nanoseconds, "malloc p99 ns", 20, "", false, 6, true},
    {M::alloc_p999_ns, "alloc_p999_ns", "", "ns", "99.9th percentile malloc call latency (sampled)", measured<F::alloc_p999_ns>,
     kLower, D::nanoseconds, "malloc p99.9 ns", 20, "", false, 7, false},
    {M::alloc_max_ns, "alloc_max_ns", "", "ns", "slowest sampled malloc call", measured<F::alloc_max_ns>, kLower, D::nanoseconds,
     "malloc max ns", 20, "", false, 0, false},
    {M::free_p50_ns, "free_p50_ns", "", "ns", "median free call latency (one call in N timed per thread)",
     measured<F::free_p50_ns>, kLower, D::nanoseconds, "free p50 ns", 20, "", false, 8, false},
    {M::free_p99_ns, "free_p99_ns", "", "ns", "99th percentile free call latency (sampled)", measured<F::free_p99_ns>, kLower,
     D::nanoseconds, "free p99 ns", 20, "", false, 9, true},
    {M::free_p999_ns, "free_p999_ns", "", "ns", "99.9th percentile free call latency (sampled)", measured<F::free_p999_ns>, kLower,
     D::nanoseconds, "free p99.9 ns", 20, "", false, 10, false},
    {M::free_max_ns, "free_max_ns", "", "ns", "slowest sampled free call", measured<F::free_max_ns>, kLower, D::nanoseconds,
     "free max ns", 20, "", false, 0, false},
    {M::vol_ctx_switches_per_mop, "vol_ctx_switches_per_mop", "", "1/Mop",
     "voluntary context switches (a thread sleeping, e.g. on a futex) per million operations",
     of_two<F::voluntary_ctx_switches, F::ops, per_million_ops>, kLower, D::rate, "vol cs/Mop", 20,
     "vol cs/Mop: voluntary context switches per million operations", false, 0, false},
    {M::runqueue_wait_s, "runqueue_wait_s", "", "s",
     "time the process's threads were runnable but waiting for a CPU, summed over threads (schedstat)",
     ns_as_seconds<F::runqueue_wait_ns>, kLower, D::seconds, "runqueue wait s", 24, "", false, 0, false},
    {M::runqueue_wait_share, "runqueue_wait_share", "", "ratio",
     "run-queue wait / (run-queue wait + time on a CPU) of the process's threads",
     of_two<F::runqueue_wait_ns, F::run_ns, runqueue_wait_share>, kLower, D::percent, "runqueue share", 20,
     "runqueue share: run-queue wait / (wait + on-CPU time) of the threads", false, 0, false},
    {M::anon_huge_bytes, "anon_huge_bytes", "", "bytes",
     "anonymous memory in transparent huge pages at the phase end (AnonHugePages of /proc/PID/smaps_rollup)",
     measured<F::anon_huge_bytes>, kLower, D::mib, "huge MiB", 20,
     "huge MiB: anonymous memory in transparent huge pages at the phase end (part of end RSS)", true, 0, false},
    {M::thp_fault_alloc, "thp_fault_alloc", "", "count",
     "page faults served by a huge page during the phase, system-wide (/proc/vmstat thp_fault_alloc)",
     measured<F::thp_fault_alloc>, kLower, D::si, "THP faults", 20, "THP faults, fallbacks, collapses, splits: system-wide",
     false, 0, false},
    {M::thp_fault_fallback, "thp_fault_fallback", "", "count",
     "faults that wanted a huge page and got small pages, system-wide (/proc/vmstat thp_fault_fallback)",
     measured<F::thp_fault_fallback>, kLower, D::si, "THP fallbacks", 20, "", false, 0, false},
    {M::thp_collapse_alloc, "thp_collapse_alloc", "", "count",
     "small pages khugepaged collapsed into a huge page, system-wide (/proc/vmstat thp_collapse_alloc)",
     measured<F::thp_collapse_alloc>, kLower, D::si, "THP collapses", 20, "", false, 0, false},
    {M::thp_split_page, "thp_split_page", "", "count",
     "huge pages split back into small pages, system-wide (/proc/vmstat thp_split_page)",
     measured<F::thp_split_page>, kLower, D::si, "THP splits", 20, "", false, 0, false},
    {M::thp_split_pmd, "thp_split_pmd", "", "count",
     "huge-page mappings split into small-page mappings (advice or an unmap on part of one), system-wide "
     "(/proc/vmstat thp_split_pmd)",
     measured<F::thp_split_pmd>, kLower, D::si, "THP map splits", 20, "", false, 0, false},
    {M::thp_deferred_split_page, "thp_deferred_split_page", "", "count",
     "partly unmapped huge pages queued to be split later, each still holding its 2 MiB until memory pressure, "
     "system-wide (/proc/vmstat thp_deferred_split_page)",
     measured<F::thp_deferred_split_page>, kLower, D::si, "THP deferred", 20, "", false, 0, false},
    {M::system_anon_huge_bytes, "system_anon_huge_bytes", "", "bytes",
     "anonymous memory in transparent huge pages at the phase end, system-wide: every process's, not only the cell's "
     "(AnonHugePages of /sys/devices/system/node/nodeN/meminfo; per node with --by ...,node)",
     measured<F::system_anon_huge_bytes>, kLower, D::mib, "sys huge MiB", 20,
     "sys huge MiB: the whole system's transparent huge pages at the phase end (every process's), per node with --by ...,node",
     false, 11, false},
}};

// The enums index the tables: a row out of place is a compile error, not a wrong figure.
constexpr bool fields_in_order() {
  for (std::size_t i = 0; i < kFieldCount; ++i)
    if (static_cast<std::size_t>(kFieldTable[i].field) != i) return false;
  return true;
}
constexpr bool metrics_in_order() {
  for (std::size_t i = 0; i < kMetricCount; ++i)
    if (static_cast<std::size_t>(kMetricTable[i].metric) != i) return false;
  return true;
}
static_assert(fields_in_order(), "kFieldTable rows must follow enum Field");
static_assert(metrics_in_order(), "kMetricTable rows must follow enum Metric");

template <class Keep>
std::vector<Metric> metrics_where(Keep keep) {
  std::vector<Metric> out;
  for (const auto& row : kMetricTable)
    if (keep(row)) out.push_back(row.metric);
  return out;
}

}  // namespace

const std::array<FieldRow, kFieldCount>& field_table() { return kFieldTable; }

std::string_view display_name(Display d) {
  switch (d) {
    case Display::mib: return "mib";
    case Display::ratio: return "ratio";
    case Display::si: return "si";
    case Display::rate: return "rate";
    case Display::percent: return "percent";
    case Display::nanoseconds: return "nanoseconds";
    case Display::seconds: return "seconds";
  }
  return "?";
}
const std::array<MetricRow, kMetricCount>& metric_table() { return kMetricTable; }
const MetricRow& metric_row(Metric m) { return kMetricTable[static_cast<std::size_t>(m)]; }

std::optional<Metric> metric_from_name(std::string_view name, bool* alias_used) {
  for (const auto& row : kMetricTable)
    if (row.name == name || (!row.alias.empty() && row.alias == name)) {
      if (alias_used) *alias_used = row.name != name;
      return row.metric;
    }
  return std::nullopt;
}

Metric parse_metric_name(std::string_view name, const std::string& flag, const std::vector<Metric>& allowed,
                         std::vector<std::string>& notes) {
  bool alias = false;
  auto m = metric_from_name(name, &alias);
  if (!m || std::find(allowed.begin(), allowed.end(), *m) == allowed.end())
    throw ResultsError(fmt::format("{}: unknown metric '{}' (choose from {})", flag, name, metric_names(allowed)));
  if (alias) notes.push_back(renamed_metric_note(flag, name, *m));
  return *m;
}

std::string renamed_metric_note(std::string_view flag, std::string_view old_name, Metric m) {
  return fmt::format("{} {}: now called {} (the old name still works)", flag, old_name, metric_row(m).name);
}

std::vector<Metric> all_metrics() {
  return metrics_where([](const MetricRow&) { return true; });
}
std::vector<Metric> gated_metrics() {
  return metrics_where([](const MetricRow& r) { return r.gated; });
}
std::vector<Metric> node_metrics() {
  std::vector<Metric> out = metrics_where([](const MetricRow& r) { return r.node_column > 0; });
  std::stable_sort(out.begin(), out.end(), [](Metric a, Metric b) { return metric_row(a).node_column < metric_row(b).node_column; });
  return out;
}
std::vector<Metric> default_node_metrics() {
  std::vector<Metric> out = node_metrics();
  std::erase_if(out, [](Metric m) { return !metric_row(m).default_per_node; });
  return out;
}

namespace {
// Beyond any machine: more bytes than a 57-bit address space (x86-64 and arm64 with 5-level page
// tables), more operations a second than 10^12, a count or a number of nanoseconds beyond 10^18
// (32 years in ns), a time beyond 10^9 s (32 years, even summed over threads), a ratio beyond 10^9.
constexpr double kMaxBytes = 144115188075855872.0;  // 2^57
constexpr double kMaxOpsPerSecond = 1e12;
constexpr double kMaxCount = 1e18;
constexpr double kMaxSeconds = 1e9;
constexpr double kMaxRatio = 1e9;
}  // namespace

namespace {
// `held`: bytes a running process holds (its RSS), never 0; others (huge pages, a node's share) may be.
std::string bytes_problem(std::string_view name, double v, bool held) {
  const auto wrong = [&](std::string_view expected) { return fmt::format("{} is not a {}: {}", v, name, expected); };
  if (!std::isfinite(v)) return wrong("not a finite number");
  if (held ? v <= 0 : v < 0) return wrong(held ? "expected bytes above 0 (a running process holds memory)" : "expected bytes of 0 or more");
  if (v > kMaxBytes) return wrong("more bytes than a 57-bit address space holds");
  return "";
}
}  // namespace

std::string field_bytes_problem(std::string_view field, double v) { return bytes_problem(field, v, false); }

std::string value_problem(Metric m, double v) {
  const MetricRow& row = metric_row(m);
  const auto wrong = [&](std::string_view expected) { return fmt::format("{} is not a {}: {}", v, row.name, expected); };
  if (!std::isfinite(v)) return fmt::format("{} is not a {}: not a finite number", v, row.name);
  const std::string_view unit = row.unit;
  if (unit == "bytes") {
    return bytes_problem(row.name, v, m == Metric::peak_rss_bytes || m == Metric::end_rss_bytes);
  } else if (unit == "1/s") {
    if (v < 0) return wrong("expected 0 or more operations a second");
    if (v > kMaxOpsPerSecond) return wrong("more than 10^12 operations a second");
  } else if (unit == "ratio" && row.display == Display::percent) {
    if (v < 0 || v > 1) return wrong("expected a share from 0 to 1");
  } else if (unit == "ratio") {
    // (peak - idle) / live may fall below 0 when the phase's peak is under the idle RSS.
    if (std::abs(v) > kMaxRatio) return wrong("its magnitude exceeds 10^9");
  } else if (unit == "s") {
    if (v < 0 || v > kMaxSeconds) return wrong("expected seconds from 0 to 10^9");
  } else if (v < 0 || v > (unit == "1/Mop" ? kMaxCount * 1e6 : kMaxCount)) {  // counts, ns, events per Mop
    return wrong(unit == "1/Mop" ? "expected events per million operations from 0 to 10^24"
                 : unit == "ns"  ? "expected nanoseconds from 0 to 10^18"
                                 : "expected a count from 0 to 10^18");
  }
  return "";
}

std::string metric_names(const std::vector<Metric>& metrics) {
  std::string out;
  for (Metric m : metrics) out += (out.empty() ? "" : ", ") + std::string(metric_row(m).name);
  return out;
}

}  // namespace allocmark::results
