#include "harness/report/compare_report.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cmath>
#include <filesystem>

#include "harness/report/charts.h"
#include "harness/report/html.h"
#include "harness/report/run_report.h"
#include "harness/results/results_dir.h"

namespace allocmark::report {

namespace {

namespace fs = std::filesystem;

html::TableCell spread_cell(const results::Spread& s, const std::string& metric) {
  if (s.n == 0) return html::TableCell("-");
  return html::TableCell(gate::spread_text(s, metric), s.median);
}

void changes_table(html::Document& doc, const compare::Comparison& c) {
  html::Table t;
  t.id = "changes";
  t.sortable = true;
  t.columns = {{"change"}, {"cell"}, {"metric"}, {"first run", true}, {"second run", true},
               {"relative change", true, "median of the second run against the first"},
               {"range", true, "the change given both runs' min and max"}, {"p", true, "exact one-sided Mann-Whitney U"},
               {"notes"}};
  for (const auto& ch : c.changes) {
    const auto& v = ch.judged;
    const bool both = v.before.n && v.after.n;
    t.rows.push_back({html::TableCell(ch.direction, {}, {}, ch.direction == "worse" ? "bad" : ch.direction == "better" ? "good" : ""),
                      html::TableCell(v.cell), html::TableCell(v.metric), spread_cell(v.before, v.metric), spread_cell(v.after, v.metric),
                      both ? html::TableCell(fmt::format("{:+.1f}%", 100 * v.change), v.change) : html::TableCell("-"),
                      both ? html::TableCell(fmt::format("{:+.1f}% .. {:+.1f}%", 100 * ch.low, 100 * ch.high), ch.low) : html::TableCell("-"),
                      v.p < 1 ? html::TableCell(fmt::format("{:.3f}", v.p), v.p) : html::TableCell("-"), html::TableCell(v.reason)});
  }
  doc.table(t);
}

}  // namespace

CompareReport build_compare_report(const compare::Comparison& c) {
  CompareReport report;
  html::Document doc(fmt::format("allocmark compare: {} -> {}", c.before, c.after));
  doc.heading(1, fmt::format("{} compared with {}", c.after, c.before));
  doc.facts({{"first run", c.before}, {"second run", c.after}, {"metrics", fmt::format("{}", fmt::join(c.metrics, ", "))},
             {"machines", c.machine_difference.empty() ? "the same kind" : "differ: " + c.machine_difference}});
  doc.paragraph(fmt::format("{} of {} cell-phase figures moved. A figure moved when its median changed beyond the dead band "
                            "(max of 5% and 3 x the first run's relative MAD; at least 2 MiB for bytes) and an exact one-sided "
                            "Mann-Whitney U test supports it at 0.05: the CI gate's rule (docs/gate.md).",
                            c.moved(), c.changes.size()),
                c.moved() ? "warn" : "");
  doc.heading(2, "Every figure, moved first", "figures");
  changes_table(doc, c);

  doc.heading(2, "Charts", "charts");
  TemporaryFolder tmp;
  const std::string json_path = tmp.path() + "/compare.json";
  results::write_file_atomically(json_path, compare::comparison_json(c).dump() + "\n");
  const std::string out = tmp.path() + "/charts";
  DrawnCharts drawn = run_plots_script_captured("compare_plots.py", {json_path, "--out", out}, out);
  report.charts = embed_charts(doc, drawn, "docs/charts.md, chart 7", report.chart_errors);
  report.html = doc.str();
  return report;
}

}  // namespace allocmark::report
