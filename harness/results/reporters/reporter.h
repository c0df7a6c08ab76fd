// Output formats of grouped results, one file each (as google/benchmark's reporters): table.cpp
// (the terminal table `show` prints), csv.cpp, json.cpp, markdown.cpp. They differ only in layout;
// grouping and statistics come from the model, the human rendering of a figure from text.h.
#pragma once

#include <nlohmann/json.hpp>

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "harness/results/model.h"

namespace allocmark::results {

inline constexpr int kSummarySchemaVersion = 1;

class Reporter {
 public:
  virtual ~Reporter() = default;
  // The metrics shown when none are asked for.
  virtual std::vector<Metric> default_metrics() const = 0;
  // Whether the grouping's workload metrics are shown when none are asked for (the machine
  // formats show everything; the tables only what is asked for).
  virtual bool all_workload_metrics_by_default() const { return false; }
  // The report of `grouping` (made from `model`) over `metrics`. Warnings are the caller's to
  // print (show: stderr), except where a format carries them (json).
  virtual std::string render(const Model& model, const Grouping& grouping, const std::vector<Metric>& metrics) const = 0;
};

// "table", "csv", "json", "markdown"; nullptr for any other name.
std::unique_ptr<Reporter> make_reporter(std::string_view format);
const std::vector<std::string>& reporter_formats();

std::unique_ptr<Reporter> make_table_reporter();
std::unique_ptr<Reporter> make_csv_reporter();
std::unique_ptr<Reporter> make_json_reporter();
std::unique_ptr<Reporter> make_markdown_reporter();

// What to report: groups and metrics (empty: the reporter's defaults).
struct ReportOptions {
  std::vector<Dimension> by = default_dimensions();
  std::vector<Metric> metrics;
  // Workload metrics by name or prefix* (select_workload_metrics); empty: the reporter's default.
  std::vector<std::string> workload_metrics;
  CellFilter filter;  // which cells the report counts (all by default)
};
// make_reporter(format) over model.group(options.by, options.filter); throws ResultsError for an
// unknown format. `notes`, when given, receives what a reader should be warned of (pooling_notes).
std::string render_report(const Model& model, std::string_view format, const ReportOptions& options = {},
                          std::vector<std::string>* notes = nullptr);

// summary.json's content (docs/results-schema.md): schema_version, the grouping, each metric's
// unit, every group's identity, statuses, errors, metric spreads and the grouping's workload
// metrics' spreads, and the model's warnings.
nlohmann::ordered_json summary_json(const Model& model, const Grouping& grouping, const std::vector<Metric>& metrics);

// summary.csv's content: a header, then one row per cell and phase (one row with an empty phase
// for a cell without phases), winners of retried cells only, in file order.
std::string cells_csv(const Model& model);

// timelines.jsonl's content: one line per ok cell the model kept, in file order, with its labels
// in `grouping` (summary.json's), rep, attempt, whole-cell peak RSS and peak live bytes, its RSS
// timeline and its phases' edges and live bytes (docs/results-schema.md). The charts' only source
// besides summary.json.
std::string chart_timelines(const Model& model, const Grouping& grouping);

// A folder's summary files as the model renders them: summary.csv, summary.json, timelines.jsonl.
struct SummaryFiles {
  std::string csv, json, timelines;
  bool operator==(const SummaryFiles&) const = default;
};
SummaryFiles render_summaries(const Model& model);

// Writes DIR/summary.csv, DIR/summary.json and DIR/timelines.jsonl from DIR/results.jsonl, each atomically (a
// temporary file renamed over the old one). Throws ResultsError on failure.
void write_summaries(const std::string& dir);
// The same files given, written into DIR.
void write_summaries(const std::string& dir, const SummaryFiles& files);
// What DIR holds of them now ("" for a file it lacks).
SummaryFiles read_summaries(const std::string& dir);

}  // namespace allocmark::results
