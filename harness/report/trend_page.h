// The trend page of a history (in report/: it is a page built from the report's pieces, over the
// history below it) (`allocmark history report DB -o page.html`; docs/history.md "The
// trend page"): one self-contained HTML page, built like the run report (report/html.h's document,
// charts drawn by plots/history_plots.py into a temporary folder and embedded), that opens on the
// changes, newest first, then draws each series on a commit axis (the median per commit, the
// repetitions' min-max as a band, each change point's commit range marked with its size), then
// lists the commits newest first with their subjects. Every figure is computed here; Python only
// draws what trend_json() gives it.
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "harness/history/changes.h"
#include "harness/history/store.h"

namespace allocmark::report {

using history::ChangesFound;
using history::HistoryDb;
using history::SeriesKey;

struct TrendInput {
  const HistoryDb* db;
  std::vector<SeriesKey> keys;               // the series drawn
  const ChangesFound* changes;               // find_changes over `keys`
  std::map<std::string, std::string> subjects;  // commit -> its subject, where known
};

// What plots/history_plots.py draws: one chart per cell, metric, branch and testbed, one panel per
// phase, values in the metric's display unit (MiB for bytes). Charts with the newest change first.
nlohmann::ordered_json trend_json(const TrendInput& in);

struct TrendPage {
  std::string html;
  std::size_t charts = 0;                 // images embedded
  std::vector<std::string> chart_errors;  // charts that failed to draw (the page says so too)
};

TrendPage build_trend_page(const TrendInput& in);

}  // namespace allocmark::report
