// Two runs of the same cells side by side (an allocator upgrade, a new MALLOC_CONF, a code
// change): per cell, phase and metric, both runs' spreads, the relative change and whether it
// moved. "Moved" is decided by the gate's rule (harness/gate/verdict.h: dead band, one huge page,
// exact one-sided Mann-Whitney U), so a cell that moves here is exactly one the CI gate would flag.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "harness/gate/verdict.h"

namespace allocmark::compare {

struct Change {
  gate::Verdict judged;   // before = the first run's spread, after = the second's
  std::string direction;  // worse | better | same | only before | only after | not comparable
  // The change's range given both spreads: (after.min - before.max) / before.median up to
  // (after.max - before.min) / before.median; what a chart draws as its error bar.
  double low = 0, high = 0;
  bool moved() const { return direction == "worse" || direction == "better"; }
};

struct Comparison {
  std::string before, after;  // the folders
  std::vector<std::string> metrics;
  std::string machine_difference;  // "" when both ran on the same kind of machine
  std::vector<Change> changes;     // moved first, largest change first; then one-sided, not comparable, same
  std::size_t moved() const;
};

// The gated metrics (peak_rss_bytes, rss_above_idle_over_live, end_rss_bytes, ops_per_s) by default. A machine
// difference is reported, not refused: the comparison is the user's question.
Comparison compare_runs(const std::string& before, const std::string& after, const std::vector<std::string>& metrics);

nlohmann::json comparison_json(const Comparison& comparison);
// table | markdown | json
std::string render_comparison(const Comparison& comparison, const std::string& format);

}  // namespace allocmark::compare
