// Choosing a reporter by name, and the summary files the driver keeps up to date in a results
// folder.
#include "harness/results/reporters/reporter.h"

#include "harness/results/folder_layout.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>

#include <fmt/format.h>

namespace allocmark::results {

const std::vector<std::string>& reporter_formats() {
  static const std::vector<std::string> formats{"table", "csv", "json", "markdown"};
  return formats;
}

std::unique_ptr<Reporter> make_reporter(std::string_view format) {
  if (format == "table") return make_table_reporter();
  if (format == "csv") return make_csv_reporter();
  if (format == "json") return make_json_reporter();
  if (format == "markdown") return make_markdown_reporter();
  return nullptr;
}

std::string render_report(const Model& model, std::string_view format, const ReportOptions& options,
                          std::vector<std::string>* notes) {
  auto reporter = make_reporter(format);
  if (!reporter) throw ResultsError(fmt::format("unknown report format '{}'", format));
  // Node rows carry only the per-node metrics: show those unless asked for others.
  const bool by_node = std::find(options.by.begin(), options.by.end(), Dimension::node) != options.by.end();
  const std::vector<Metric> metrics = !options.metrics.empty() ? options.metrics : by_node ? default_node_metrics() : reporter->default_metrics();
  Grouping grouping = model.group(options.by, options.filter);
  if (notes) *notes = pooling_notes(grouping);
  if (!options.workload_metrics.empty() || !reporter->all_workload_metrics_by_default())
    select_workload_metrics(grouping, options.workload_metrics);
  return reporter->render(model, grouping, metrics);
}

SummaryFiles render_summaries(const Model& model) {
  SummaryFiles out;
  out.csv = cells_csv(model);
  const Grouping grouping = model.group(default_dimensions());
  nlohmann::ordered_json summary = summary_json(model, grouping, all_metrics());
  out.timelines = chart_timelines(model, grouping);
  // The same groups split by NUMA node, with the per-node metrics only (charts of placement).
  std::vector<Dimension> by_node = default_dimensions();
  by_node.push_back(Dimension::node);
  summary["node_groups"] = summary_json(model, model.group(by_node), node_metrics())["groups"];
  out.json = summary.dump(2) + "\n";
  return out;
}

void write_summaries(const std::string& dir) {
  // Rendered before any is written, so a failure leaves the previous files in place.
  write_summaries(dir, render_summaries(Model::load({dir}, LoadOptions{.require_cells = false, .own_folder = true})));
}

void write_summaries(const std::string& dir, const SummaryFiles& files) {
  write_file_atomically(layout::path_in(dir, layout::kSummaryCsv), files.csv);
  write_file_atomically(layout::path_in(dir, layout::kSummaryJson), files.json);
  write_file_atomically(layout::path_in(dir, layout::kTimelines), files.timelines);
}

SummaryFiles read_summaries(const std::string& dir) {
  const auto text = [&](const char* name) {
    const std::string path = layout::path_in(dir, name);
    check_readable_file(path);  // a fifo there: refused, never waited on
    std::error_code ec;
    if (!std::filesystem::is_regular_file(path, ec)) return std::string();
    std::ifstream in(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
  };
  return {text(layout::kSummaryCsv), text(layout::kSummaryJson), text(layout::kTimelines)};
}

}  // namespace allocmark::results
