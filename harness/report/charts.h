// Running the chart scripts of plots/ (Debian's /usr/bin/python3 with matplotlib) over results.
// `allocmark plot` and `compare --charts` run them with the terminal as their output;
// `allocmark report` runs allocmark_plots.py into a temporary folder and reads back which charts
// were drawn and which skipped.
#pragma once

#include <string>
#include <vector>

namespace allocmark::report {

// plots/ in the source tree, or $ALLOCMARK_PLOTS_DIR (as configs/ and $ALLOCMARK_CONFIG_DIR).
std::string plots_dir();

// Charts read summary.json: a results folder written before it existed gets it now. Throws
// std::invalid_argument for a folder without results.jsonl.
void ensure_summaries(const std::string& dir);

// Runs plots/SCRIPT (or $ALLOCMARK_PLOTS_DIR/SCRIPT) with /usr/bin/python3 and `args`, with this
// process's stdout and stderr; returns its exit code. Throws std::runtime_error naming what is
// missing when the script or the interpreter is not there.
int run_plots_script(const std::string& script_name, const std::vector<std::string>& args);

struct DrawnCharts {
  int exit_code = 0;
  std::vector<std::string> files;    // as the script printed them, in drawing order
  std::vector<std::string> skipped;  // "scaling: size_mix ran at one thread count only (2)"
  std::vector<std::string> errors;   // "chart contention failed: ..." (a chart that failed to draw)
};

// allocmark_plots.py DIR --out OUT (PNG), its output captured and read back.
DrawnCharts draw_charts_captured(const std::string& dir, const std::string& out);

}  // namespace allocmark::report
