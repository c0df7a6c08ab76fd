// The report of one results folder (`allocmark report DIR`): one self-contained HTML page with the
// machine and matrix, the verdict per workload, every chart `allocmark plot` draws for the run
// (embedded), the per-phase table and the cells that did not finish ok with their reasons.
#pragma once

#include <string>
#include <vector>

namespace allocmark::report {

struct RunReport {
  std::string html;
  std::size_t charts = 0;               // images embedded
  std::vector<std::string> chart_errors;  // charts that failed to draw (the page says so too)
};

// Reads DIR through the results model (throws results::ResultsError for a folder that is not a
// results folder or holds no cell) and draws its charts into a temporary folder, removed after.
RunReport build_run_report(const std::string& dir);

}  // namespace allocmark::report
