// The human rendering shared by the table and markdown reporters: which columns a grouping has,
// how each metric is written (MiB, ratios, k/M/G rates, seconds), the status and footnote. The
// two reporters only lay these cells out differently.
#pragma once

#include <string>
#include <vector>

#include "harness/results/model.h"
#include "harness/results/recommendation.h"

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

// One value of a metric as the table writes it ("912.9k", "12.3" MiB, "1.05"), and a spread as
// "median [min-max]" (the median alone where there is one value or they agree; "-" for none).
std::string value_text(Metric m, double value);
std::string spread_text(Metric m, const Spread& s);
// The column header of a metric ("peak RSS MiB") and its footnote ("" where the header says it all).
std::string metric_header(Metric m);
std::string metric_note(Metric m);

// A ranked figure's value with its unit, as the recommendation writes it: "136.2 MiB", "1.21",
// "912.9k ops/s", "45.1 ns", "x1.08" (the time score: times the best's time).
std::string figure_value(const Ranking& r, double value);
// How much worse than the leader a standing is: "+12%", "+0.4%", "+<0.1%"; "tied" at the same median.
std::string relative_text(double relative);
// "mostly huge pages: jemalloc is +60.2 MiB and holds 52.0 MiB more in huge pages; ..."
// (Ranking::mostly_huge_pages).
std::string huge_pages_text(const Ranking& r);
// "clear, by 12%", "within noise (+0.4%)", "one repetition (+5%)", "alone".
std::string lead_text(Certainty c, double margin);

// The end-of-run summary on the terminal: per workload and thread count one line per headline
// figure (the leader, its value, how sure, every other allocator relative to it), then the ranking
// across the run, and where the full table is (`allocmark show DIR`).
std::string recommendation_text(const Recommendation& r, const std::string& dir);

// The metrics `show` has always printed: peak RSS, RSS-idle/live, ops/s.
std::vector<Metric> default_human_metrics();

}  // namespace allocmark::results::text
