// The fixed-width terminal table of `allocmark show`: one row per group, medians with their
// min-max spread, each group's failures beneath it, a footnote on what the figures are.
#include <fmt/format.h>

#include <algorithm>

#include "harness/results/reporters/reporter.h"
#include "harness/results/reporters/text.h"
#include "harness/results/safe_text.h"

namespace allocmark::results {
namespace {

class TableReporter : public Reporter {
 public:
  std::vector<Metric> default_metrics() const override { return text::default_human_metrics(); }

  std::string render(const Model&, const Grouping& grouping, const std::vector<Metric>& metrics) const override {
    text::TextReport report = text::text_report(grouping, metrics);
    // A name column is as wide as its longest name (allocator names grow with variants and the thp
    // axis: jemalloc:thpalways@thp=madvise), so the columns after it stay aligned.
    for (std::size_t i = 0; i < report.columns.size(); ++i) {
      text::Column& c = report.columns[i];
      if (c.right_aligned) continue;
      for (const auto& row : report.rows)
        if (i < row.cells.size()) c.width = std::max(c.width, terminal_line(row.cells[i]).size());
    }
    // Every text may come from a record (names, statuses, errors): shown, never obeyed by the terminal.
    auto line = [&](const std::vector<std::string>& cells, const std::string& status) {
      std::string out;
      for (std::size_t i = 0; i < cells.size(); ++i) {
        const text::Column& c = report.columns[i];
        const std::string cell = terminal_line(cells[i]);
        if (i) out += " ";
        out += c.right_aligned ? fmt::format("{:>{}}", cell, c.width) : fmt::format("{:<{}}", cell, c.width);
      }
      return out + "  " + terminal_line(status) + "\n";
    };
    std::vector<std::string> headers;
    for (const auto& c : report.columns) headers.push_back(c.header);
    std::string out = line(headers, "status");
    for (const auto& row : report.rows) {
      out += line(row.cells, row.status);
      // Errors are indented past the identifying columns so the row they belong to stays visible.
      for (const auto& e : row.errors) out += fmt::format("{:>50}  ! {}\n", "", terminal_line(e.substr(0, 200)));
    }
    return out + return_curves(grouping) + "\n" + report.footnote + "\n";
  }

 private:
  // The return curve of each group that has one (the last phase's row), one line each under the
  // table, so the columns show has always printed stay as they were.
  static std::string return_curves(const Grouping& grouping) {
    std::string out;
    for (const Group& g : grouping.groups) {
      if (g.metric(Metric::rss_after_10ms_bytes).n == 0) continue;
      std::string who;
      for (const auto& v : g.values) who += (who.empty() ? "" : " ") + value_label(v);
      std::string points;
      for (Metric m : {Metric::end_rss_bytes, Metric::rss_after_10ms_bytes, Metric::rss_after_100ms_bytes, Metric::rss_settled_bytes})
        points += (points.empty() ? "" : " -> ") + text::spread_text(m, g.metric(m));
      out += terminal_line(fmt::format("return curve, {}: {} MiB", who, points)) + "\n";
    }
    return out.empty() ? out : "\nRSS after the last phase, the worker idle (its end -> +10 ms -> +100 ms -> settled):\n" + out;
  }
};

}  // namespace

std::unique_ptr<Reporter> make_table_reporter() { return std::make_unique<TableReporter>(); }

}  // namespace allocmark::results
