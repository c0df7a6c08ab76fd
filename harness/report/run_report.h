// The report of one results folder (`allocmark report DIR`): one self-contained HTML page that opens
// on the recommendation (results/recommendation.h: per workload and thread count, and across the
// run), then every chart `allocmark plot` draws for the run (embedded), then, folded, the machine,
// the matrix and the per-phase table, and the cells that did not finish ok with their reasons.
#pragma once

#include <string>
#include <vector>

#include "harness/report/charts.h"
#include "harness/report/html.h"
#include "harness/results/advice.h"

namespace allocmark::report {

struct RunReport {
  std::string html;
  std::size_t charts = 0;               // images embedded
  std::vector<std::string> chart_errors;  // charts that failed to draw (the page says so too)
};

// Reads DIR through the results model (throws results::ResultsError for a folder that is not a
// results folder or holds no cell) and draws its charts into a temporary folder, removed after.
// `page` is where the page will be written: its links to the folder's files (each failed cell's
// log) are relative to it. `advice` (allocmark advise) adds its lines and candidates' table
// before the recommendation.
RunReport build_run_report(const std::string& dir, const std::string& page, const results::Advice* advice = nullptr);

// Embeds the drawn charts (captioned "FILE (caption)"), lists the skipped ones with their reasons
// and the failed ones; `errors` gets the failures. Returns the number of images embedded. Shared
// by every page that carries charts.
std::size_t embed_charts(html::Document& doc, const DrawnCharts& drawn, const std::string& caption,
                         std::vector<std::string>& errors);

}  // namespace allocmark::report
