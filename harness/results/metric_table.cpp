#include "harness/results/metric_table.h"

#include <fmt/format.h>

#include <algorithm>
#include <iterator>

#include "harness/metrics/derived.h"
#include "harness/results/results_dir.h"  // ResultsError

namespace allocmark::results {

namespace {

// The rows of the record's field table the model reads (harness/record/fields.h).
#define ALLOCMARK_FIELD_ROW(kind, name, type, unit, fold, phase_path, node_path, sums, ...) \
  ALLOCMARK_IF_READ_##kind(FieldRow{Field::name, #name, unit, phase_path, node_path, Fold::fold, sums}, )
constexpr std::array<FieldRow, kFieldCount> kFieldTable{{ALLOCMARK_PHASE_FIELDS(ALLOCMARK_FIELD_ROW)}};
#undef ALLOCMARK_FIELD_ROW

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

// The metrics' rows in the enum's order: a measured metric from its field row (its unit and
// presentation), then the derived ones.
#define ALLOCMARK_EXPAND(macro, ...) macro(__VA_ARGS__)
#define ALLOCMARK_UNPAREN(...) __VA_ARGS__
#define ALLOCMARK_MEASURED_METRIC(name, unit, alias, description, better, display, ...) \
  MetricRow{M::name, #name, alias, unit, description, measured<F::name>, Better::better, Display::display, __VA_ARGS__},
#define ALLOCMARK_MEASURED_ROW(kind, name, type, unit, fold, phase_path, node_path, sums, show, presentation) \
  ALLOCMARK_IF_SHOWN_##show(ALLOCMARK_EXPAND(ALLOCMARK_MEASURED_METRIC, name, unit, ALLOCMARK_UNPAREN presentation))
#define ALLOCMARK_DERIVED_ROW(name, after, alias, unit, description, formula, better, display, ...) \
  MetricRow{M::name, #name, alias, unit, description, formula, Better::better, Display::display, __VA_ARGS__},
constexpr std::array<MetricRow, kMetricCount> kRowsByEnum{
    {ALLOCMARK_PHASE_FIELDS(ALLOCMARK_MEASURED_ROW) ALLOCMARK_DERIVED_METRICS(ALLOCMARK_DERIVED_ROW)}};
#undef ALLOCMARK_MEASURED_ROW
#undef ALLOCMARK_MEASURED_METRIC
#undef ALLOCMARK_DERIVED_ROW
#undef ALLOCMARK_UNPAREN
#undef ALLOCMARK_EXPAND
#define ALLOCMARK_DERIVED_AFTER(name, after, ...) M::after,
constexpr Metric kDerivedAfter[] = {ALLOCMARK_DERIVED_METRICS(ALLOCMARK_DERIVED_AFTER)};
#undef ALLOCMARK_DERIVED_AFTER
constexpr std::size_t kDerivedCount = std::size(kDerivedAfter), kMeasuredCount = kMetricCount - kDerivedCount;

// The outputs' order: each measured metric, then the derived ones that follow it.
constexpr std::array<MetricRow, kMetricCount> in_output_order() {
  std::array<MetricRow, kMetricCount> out{};
  std::size_t n = 0;
  for (std::size_t i = 0; i < kMeasuredCount; ++i) {
    out[n++] = kRowsByEnum[i];
    for (std::size_t d = 0; d < kDerivedCount; ++d)
      if (kDerivedAfter[d] == kRowsByEnum[i].metric) out[n++] = kRowsByEnum[kMeasuredCount + d];
  }
  return out;
}
constexpr std::array<MetricRow, kMetricCount> kMetricTable = in_output_order();

// Where each metric is in kMetricTable, for metric_row().
constexpr std::array<std::size_t, kMetricCount> positions() {
  std::array<std::size_t, kMetricCount> at{};
  for (std::size_t i = 0; i < kMetricCount; ++i) at[static_cast<std::size_t>(kMetricTable[i].metric)] = i;
  return at;
}
constexpr std::array<std::size_t, kMetricCount> kPosition = positions();

// The enums index the tables: a row out of place is a compile error, not a wrong figure; a derived
// metric after a metric that is not measured would be left out of the outputs.
constexpr bool fields_in_order() {
  for (std::size_t i = 0; i < kFieldCount; ++i)
    if (static_cast<std::size_t>(kFieldTable[i].field) != i) return false;
  return true;
}
constexpr bool metrics_in_order() {
  for (std::size_t i = 0; i < kMetricCount; ++i)
    if (static_cast<std::size_t>(kRowsByEnum[i].metric) != i) return false;
  for (Metric after : kDerivedAfter)
    if (static_cast<std::size_t>(after) >= kMeasuredCount) return false;
  for (std::size_t i = 0; i < kMetricCount; ++i)
    if (static_cast<std::size_t>(kMetricTable[kPosition[i]].metric) != i) return false;
  return true;
}
static_assert(fields_in_order(), "kFieldTable rows must follow enum Field");
static_assert(metrics_in_order(),
              "the metric rows must follow enum Metric, and each derived metric come after a measured one");

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
const MetricRow& metric_row(Metric m) { return kMetricTable[kPosition[static_cast<std::size_t>(m)]]; }

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
