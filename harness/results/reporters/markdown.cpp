// A GitHub-flavoured markdown table of the same cells as the terminal table, errors listed
// under it, for pasting into issues and write-ups.
#include <fmt/format.h>

#include "harness/results/reporters/reporter.h"
#include "harness/results/reporters/text.h"
#include "harness/results/safe_text.h"

namespace allocmark::results {
namespace {

// The first `from_records` cells (the group's names), the status and the headers (a workload's
// metric names) come from records: each renders as the text it is in a pull-request comment, never
// as markup. The figures are this reporter's own formatting.
std::string row_text(const std::vector<std::string>& cells, const std::string& status, std::size_t from_records) {
  std::string out = "|";
  for (std::size_t i = 0; i < cells.size(); ++i) out += " " + (i < from_records ? markdown_text(cells[i]) : cells[i]) + " |";
  return out + " " + markdown_text(status) + " |\n";
}

class MarkdownReporter : public Reporter {
 public:
  std::vector<Metric> default_metrics() const override { return text::default_human_metrics(); }

  std::string render(const Model&, const Grouping& grouping, const std::vector<Metric>& metrics) const override {
    text::TextReport report = text::text_report(grouping, metrics);
    std::vector<std::string> headers;
    std::string rule = "|";
    for (const auto& c : report.columns) {
      headers.push_back(c.header);
      rule += c.right_aligned ? " --: |" : " :-- |";
    }
    std::string out = row_text(headers, "status", headers.size()) + rule + " :-- |\n";
    std::string errors;
    for (const auto& row : report.rows) {
      out += row_text(row.cells, row.status, grouping.dimensions.size());
      std::string where;
      for (std::size_t i = 0; i < grouping.dimensions.size(); ++i) where += (i ? " " : "") + row.cells[i];
      for (const auto& e : row.errors) errors += fmt::format("- {}: {}\n", markdown_text(where), markdown_text(e.substr(0, 200)));
    }
    if (!errors.empty()) out += "\nErrors:\n\n" + errors;
    return out + "\n" + report.footnote + "\n";
  }
};

}  // namespace

std::unique_ptr<Reporter> make_markdown_reporter() { return std::make_unique<MarkdownReporter>(); }

}  // namespace allocmark::results
