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
  std::string describe;  // a JSON file for the charts' structure (--describe); empty: none
};

// plots/ in the source tree, or $ALLOCMARK_PLOTS_DIR.
std::string plots_dir();

// Checks that DIR is a results folder (std::invalid_argument otherwise) and that its summary files
// are what results.jsonl holds now (ensure_summaries); checks that the script and
// /usr/bin/python3 exist (std::runtime_error naming what is missing).
void prepare_charts(const ChartRequest& request);

// Reads DIR/results.jsonl through the results model, as `show` and `report` do (ResultsError for a
// folder without a finished cell), and writes DIR's summary.json, summary.csv and timelines.jsonl
// (what plots/ reads) again, saying so, where they differ from what the model renders now: a
// folder from before them, or results.jsonl changed since the run wrote them.
// std::invalid_argument for a folder without results.jsonl.
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

// The same for another entry point of plots/ (compare_plots.py) writing into `out`.
DrawnCharts run_plots_script_captured(const std::string& script_name, const std::vector<std::string>& args,
                                      const std::string& out);

// A folder removed with everything in it when the page is done (or fails): where charts are drawn
// before they are embedded.
class TemporaryFolder {
 public:
  TemporaryFolder();
  ~TemporaryFolder();
  TemporaryFolder(const TemporaryFolder&) = delete;
  TemporaryFolder& operator=(const TemporaryFolder&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// A file's bytes (a chart to embed); std::runtime_error naming it when it cannot be read.
std::string read_file(const std::string& path);

}  // namespace allocmark::report
