// The gate's rule (docs/gate.md): a cell and phase regresses on a metric only when
//   (a) its median moved the wrong way beyond a dead band of max(tolerance, k x the baseline's
//       relative median absolute deviation), and by at least one huge page for byte metrics, and
//   (b) a one-sided exact Mann-Whitney U test supports the move at alpha, which the sample sizes
//       must be able to reach (3 and 3: only complete separation, p = 0.05).
// Improvements mirror it. Too few repetitions, a baseline too noisy to judge, or another machine
// make a cell "not comparable", each saying why; what changed under test is listed, not refused
// (unless strict).
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "harness/gate/baseline.h"

namespace allocmark::gate {

struct RuleSettings {
  double tolerance = 0.05;          // relative; --tolerance
  double mad_factor = 3;            // k
  double max_relative_mad = 0.10;   // a baseline noisier than this cannot judge a 5-10% move
  double alpha = 0.05;
  std::size_t min_reps = 3;
  double bytes_floor = 2.0 * 1024 * 1024;  // one huge page: less is not a memory regression anyone pays for
  bool strict = false;              // under-test changes make a cell not comparable
  bool allow_mismatch = false;      // judge despite a machine difference (verdicts say so)
};

struct Verdict {
  std::string cell, metric;
  std::string verdict;  // regressed | improved | pass | missing | not comparable
  std::string reason;
  results::Spread before, after;
  double change = 0, band = 0, p = 1;
  nlohmann::json changed = nlohmann::json::object();  // under-test field -> [before, after]
};

struct GateResult {
  std::vector<Verdict> verdicts;  // regressions, improvements, not comparable, missing, passes
  std::string machine_difference;
  int exit_code = 0;              // 0 pass/improved, 1 regressed or missing, 2 not comparable
  std::string summary;            // the one-line verdict
};

GateResult judge(const RunSummary& baseline, const RunSummary& now, const std::vector<std::string>& metrics,
                 const std::string& phase, const RuleSettings& rule);

// table | markdown | json
std::string render_gate(const GateResult& result, const std::string& format);

}  // namespace allocmark::gate
