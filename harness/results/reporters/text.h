// The human rendering shared by the table and markdown reporters: which columns a grouping has,
// how each metric is written (MiB, ratios, k/M/G rates, seconds), the status and footnote. The
// two reporters only lay these cells out differently.
#pragma once

#include <string>
#include <vector>

#include "harness/results/model.h"

namespace allocmark::results::text {

struct Column {
  std::string header;
  std::size_t width;  // minimum, for the fixed-width table
  bool right_aligned;
};

struct Row {
  std::vector<std::string> cells;  // one per TextReport::columns
  std::string status;              // "3 ok, 1 timeout"
  std::vector<std::string> errors; // as recorded (with "... and N more" when the group had more)
};

struct TextReport {
  std::vector<Column> columns;  // the grouping's dimensions, then the metrics; the status follows them
  std::vector<Row> rows;
  std::string footnote;         // what the figures are, ending in how they are aggregated
};

TextReport text_report(const Grouping& grouping, const std::vector<Metric>& metrics);

// The metrics `show` has always printed: peak RSS, RSS-idle/live, ops/s.
std::vector<Metric> default_human_metrics();

}  // namespace allocmark::results::text
