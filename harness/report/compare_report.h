// The page of `allocmark compare BEFORE AFTER -o FILE.html`: what moved between two runs, with
// both runs' spreads, chart 7 and the RSS overlays, self-contained like the run report.
#pragma once

#include <string>
#include <vector>

#include "harness/compare/compare.h"

namespace allocmark::report {

struct CompareReport {
  std::string html;
  std::size_t charts = 0;
  std::vector<std::string> chart_errors;
};

// Draws the comparison's charts into a temporary folder (both results folders need summary.json:
// report::ensure_summaries) and embeds them.
CompareReport build_compare_report(const compare::Comparison& comparison);

}  // namespace allocmark::report
