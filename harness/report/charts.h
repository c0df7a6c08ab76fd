// Running the chart scripts (plots/allocmark_plots.py under Debian's /usr/bin/python3) over a
// results folder. `allocmark plot` runs them with the terminal as their output; `allocmark report`
// runs them into a temporary folder and reads back which charts were drawn and which skipped.
#pragma once

#include <string>
#include <vector>

namespace allocmark::report {

struct ChartRequest {
  std::string dir;  // the results folder
  std::string out;  // where the charts go; empty: the script's default DIR/charts
  std::string format = "png";
  std::vector<std::string> only;  // chart kinds; empty: all
  std::string baseline;
  bool log = false;
};

// plots/ in the source tree, or $ALLOCMARK_PLOTS_DIR.
std::string plots_dir();

// Checks that DIR is a results folder (std::invalid_argument otherwise) and writes its
// summary.json from results.jsonl when the folder predates it; checks that the script and
// /usr/bin/python3 exist (std::runtime_error naming what is missing).
void prepare_charts(const ChartRequest& request);

// Writes DIR's summary.json from results.jsonl when the folder predates it; std::invalid_argument
// for a folder without results.jsonl.
void ensure_summaries(const std::string& dir);

// Runs plots/SCRIPT_NAME (another entry point, e.g. compare_plots.py) with `args` and this
// process's output; throws std::runtime_error when the script or /usr/bin/python3 is missing.
int run_plots_script(const std::string& script_name, const std::vector<std::string>& args);

// Runs the script with this process's stdout and stderr; returns its exit code.
int draw_charts(const ChartRequest& request);

struct DrawnCharts {
  int exit_code = 0;
  std::vector<std::string> files;    // as the script printed them, in drawing order
  std::vector<std::string> skipped;  // "scaling: size_mix ran at one thread count only (2)"
  std::vector<std::string> errors;   // any other line on its stderr (a chart that failed to draw)
};

// Runs the script with its output captured (request.out must be set).
DrawnCharts draw_charts_captured(const ChartRequest& request);

}  // namespace allocmark::report
