// CSV: `show --format csv` (one row per group: its dimensions, counts and every metric's
// n/median/min/max/mad) and summary.csv (one row per cell and phase, documented in
// docs/results-schema.md). Both quote the same way and write numbers in their shortest exact form.
#include <fmt/format.h>

#include <cmath>
#include <optional>

#include "harness/results/reporters/reporter.h"

namespace allocmark::results {
namespace {

std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\n\r") == std::string::npos) return s;
  std::string quoted = "\"";
  for (char c : s) quoted += c == '"' ? std::string("\"\"") : std::string(1, c);
  return quoted + "\"";
}

// Whole numbers without a decimal point (byte counts stay exact and greppable), the rest in the
// shortest form that reads back to the same double.
std::string number(double v) {
  if (std::nearbyint(v) == v && std::fabs(v) < 9007199254740992.0) return fmt::format("{}", static_cast<long long>(v));
  return fmt::format("{}", v);
}
std::string number(const std::optional<double>& v) { return v ? number(*v) : ""; }

std::string row(const std::vector<std::string>& fields) {
  std::string out;
  for (std::size_t i = 0; i < fields.size(); ++i) out += (i ? "," : "") + csv_field(fields[i]);
  return out + "\n";
}

class CsvReporter : public Reporter {
 public:
  std::vector<Metric> default_metrics() const override { return all_metrics(); }
  bool all_workload_metrics_by_default() const override { return true; }

  std::string render(const Model&, const Grouping& grouping, const std::vector<Metric>& metrics) const override {
    std::vector<std::string> header;
    for (Dimension d : grouping.dimensions) header.emplace_back(dimension_name(d));
    for (const char* h : {"cells", "statuses", "errors"}) header.emplace_back(h);
    for (Metric m : metrics)
      for (const char* stat : {"n", "median", "min", "max", "mad"})
        header.push_back(fmt::format("{}_{}", metric_row(m).name, stat));
    for (const auto& name : grouping.workload_metrics)
      for (const char* stat : {"n", "median", "min", "max", "mad"}) header.push_back(fmt::format("{}_{}", name, stat));
    std::string out = row(header);
    for (const Group& g : grouping.groups) {
      std::vector<std::string> fields;
      for (const auto& v : g.values) fields.push_back(value_label(v));
      fields.push_back(std::to_string(g.cells));
      std::string statuses, errors;
      for (const auto& [status, n] : g.statuses) statuses += fmt::format("{}{}={}", statuses.empty() ? "" : " ", status, n);
      for (const auto& e : g.errors) errors += (errors.empty() ? "" : " | ") + e;
      if (g.errors_not_listed) errors += fmt::format(" | ... and {} more", g.errors_not_listed);
      fields.push_back(statuses);
      fields.push_back(errors);
      auto spread_fields = [&](const Spread& s) {
        fields.push_back(std::to_string(s.n));
        for (double v : {s.median, s.min, s.max, s.mad}) fields.push_back(s.n ? number(v) : "");
      };
      for (Metric m : metrics) spread_fields(g.metric(m));
      for (const auto& name : grouping.workload_metrics) {
        auto it = g.workload_metrics.find(name);
        spread_fields(it == g.workload_metrics.end() ? Spread{} : it->second);
      }
      out += row(fields);
    }
    return out;
  }
};

}  // namespace

std::unique_ptr<Reporter> make_csv_reporter() { return std::make_unique<CsvReporter>(); }

std::string cells_csv(const Model& model) {
  // The documented column order of summary.csv; only ever extended at the end. Each column is a
  // field as the record names it (field_table), but ops_per_s: a metric, under its own name.
  struct Column {
    std::optional<Field> field;  // else the metric ops_per_s
  };
  static const std::vector<Column> phase_columns{
      {Field::wall_s}, {Field::ops}, {std::nullopt}, {Field::peak_rss_bytes}, {Field::end_rss_bytes}, {Field::peak_live_bytes},
      {Field::minor_faults}, {Field::voluntary_ctx_switches}, {Field::involuntary_ctx_switches}, {Field::user_s}, {Field::sys_s}};
  std::vector<std::string> header{"allocator", "backend", "workload", "threads", "rep", "status", "phase"};
  for (const Column& c : phase_columns)
    header.emplace_back(c.field ? field_table()[static_cast<std::size_t>(*c.field)].phase_path : metric_row(Metric::ops_per_s).name);
  for (const char* h : {"idle_rss_bytes", "rss_above_idle_over_live", "library", "error"}) header.emplace_back(h);
  std::string out = row(header);
  for (const CellResult& cell : model.cells()) {
    const CellIdentity& id = model.identity(cell);
    // A cell without phases still gets its row: its status and error are the point.
    std::vector<PhaseValues> no_phase(1);
    const std::vector<PhaseValues>& phases = cell.phases.empty() ? no_phase : cell.phases;
    for (const auto& phase : phases) {
      std::vector<std::string> fields{id.allocator, id.backend, id.workload, std::to_string(cell.threads),
                                      std::to_string(cell.rep), cell.status, phase.name};
      for (const Column& c : phase_columns)
        fields.push_back(number(c.field ? phase.get(*c.field) : metric_value(Metric::ops_per_s, cell, phase)));
      fields.push_back(number(cell.idle_rss_bytes));
      fields.push_back(number(metric_value(Metric::rss_above_idle_over_live, cell, phase)));
      fields.push_back(cell.library.value_or(""));
      fields.push_back(cell.error.value_or(""));
      out += row(fields);
    }
  }
  return out;
}

}  // namespace allocmark::results
