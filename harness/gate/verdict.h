// The gate's rule (docs/gate.md): a cell and phase regresses on a metric only when
//   (a) its median moved the wrong way beyond a dead band of max(tolerance, k x the baseline's
//       relative median absolute deviation), and by at least one huge page for byte metrics, and
//   (b) a one-sided exact Mann-Whitney U test supports the move at alpha, which the sample sizes
//       must be able to reach (3 and 3: only complete separation, p = 0.05), and, with --confirm,
//   (c) an independent rerun of only the flagged cells, interleaved, flags them again.
// Improvements mirror it. Too few repetitions, a baseline too noisy to judge, or another machine
// make a cell "not comparable", each saying why; what changed under test is listed, not refused
// (unless strict). A gate that judged nothing is an error, never a pass.
#pragma once

#include <array>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
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
  bool allow_mismatch = false;      // judge despite a machine difference (verdicts say so); other
                                    // causes of "not comparable" still fail the gate
};

// What judge_creep found for a verdict against its series' last stable segment in a history
// (gate --history; docs/gate.md "Creep against the history").
struct CreepReading {
  std::string since_commit;  // the segment's first commit
  std::size_t values = 0;    // the segment's repetitions
  std::string verdict;       // the results' against the segment, by judge's rule
  std::string reason;        // judge's note on it (why not comparable, why a move passed)
  double change = 0, band = 0, p = 1;
  bool shows_creep() const { return verdict == "regressed"; }
};

struct Verdict {
  std::string cell, metric;
  std::string allocator, workload, phase;  // what `cell` names, for rerunning it
  int threads = 0;
  std::string verdict;  // regressed | improved | pass | missing | not comparable
  std::string reason;
  std::string cell_name() const { return gate::cell_name(allocator, workload, threads); }
  results::Spread before, after;
  // The medians' relative change, wherever both sides have values: also on a "not comparable" row,
  // whose move is shown (marked as not judged) rather than hidden behind +0.0%.
  double change = 0, band = 0, p = 1;
  nlohmann::json changed = nlohmann::json::object();  // under-test field -> [before, after]
  bool other_machine = false;  // judged although the machine differs (--allow-mismatch)
  // Set by judge_creep wherever it could judge the cell against a segment (also where the baseline
  // flagged it), so that a confirming rerun compares the creep of both readings.
  std::optional<CreepReading> creep;
  bool by_creep = false;  // regressed only by creep: a pass against the baseline that judge_creep turned
  bool judged() const { return verdict != "not comparable"; }
};

struct GateResult {
  std::vector<Verdict> verdicts;  // regressions, missing, not comparable, improvements, passes
  std::string machine_difference;
  int exit_code = 0;              // 0 pass/improved, 1 regressed or missing, 2 not comparable
  std::string summary;            // the one-line verdict
};

// A verdict naming `cell` and `metric`, nothing judged yet.
Verdict identify(const GateCell& cell, const std::string& metric);

// A baseline phase whose every value of a metric other than bytes is 0 (the throughput of a phase
// that did no operations) has no such figure: nothing a relative move could be measured against.
GateResult judge(const RunSummary& baseline, const RunSummary& now, const std::vector<std::string>& metrics,
                 const std::string& phase, const RuleSettings& rule);

// GateError saying why, when `result` (of judging `baseline_path` with these metrics and phase)
// holds no verdict: a gate that compared nothing must not pass.
void require_judgement(const GateResult& result, const RunSummary& baseline, const std::string& baseline_path,
                       const std::vector<std::string>& metrics, const std::string& phase);

// (c) of the rule: the first judgement's regressions and improvements stand where `rerun` (the
// same baseline judged against an independent rerun of those cells) flags them the same way;
// the others become passes that say what the first run showed. A creep regression (by_creep)
// stands where the rerun's reading against the same segment shows the creep too (judge_creep
// applied to `rerun` as to `first`); a baseline flag the rerun clears is judged for creep on both
// readings, as every pass is. Flagged verdicts of the cells in `not_rerun` (Verdict::cell_name()
// -> why the rerun could not run them) become "not comparable" saying why. Other verdicts are kept.
GateResult confirm(const GateResult& first, const GateResult& rerun,
                   const std::map<std::string, std::string>& not_rerun = {});

// A series' last stable segment in a history (`gate --history`; docs/gate.md "Creep"): every
// repetition of the commits since the series' last change point, for one cell phase and metric.
struct StableSegment {
  std::string cell, metric;  // as Verdict::cell ("glibc size_mix t1 churn") and Verdict::metric
  std::string since_commit;  // the segment's first commit
  std::vector<double> values;
};

// Creep: a verdict that passes against the baseline becomes "regressed" ("cumulative +N% since
// COMMIT", by_creep) where the results regress against its cell's segment by judge's own rule, the
// segment's repetitions standing in for the baseline's. Every regressed, improved or passing
// verdict with a segment keeps what that showed (Verdict::creep); verdicts with no segment, or
// with more than one (two cells of one name), are kept as they are; the result is concluded again.
void judge_creep(GateResult& result, const RunSummary& now, const std::vector<StableSegment>& segments,
                 const RuleSettings& rule);

// The verdicts a confirming rerun must revisit.
inline bool needs_confirmation(const Verdict& v) { return v.verdict == "regressed" || v.verdict == "improved"; }

// Shared by the gate's and compare's reports: one verdict as JSON (the two spreads under the given
// names), and a value and its spread as text ("12.3 MiB [12.1-12.6 MiB] n=3").
nlohmann::json verdict_json(const Verdict& v, const std::string& before_name, const std::string& after_name);
std::string spread_text(const results::Spread& s, const std::string& metric);

// A report of verdicts for people, in one style for gate and compare. Markdown (a pull-request
// comment) opens with the conclusion, then `context`, what changed under test (once per change, as
// field diffs naming the cells), the rows a reader must see, and the `collapsed` rows (passes,
// figures that did not move) folded into a <details> block. The table, for a terminal, keeps every
// row in the same order and ends with the conclusion, where a terminal leaves it in view and where
// `tail -1` finds it. Text that comes from records and baselines (cells, notes, changes, context)
// is escaped for the medium (results/safe_text.h); labels, headings and the conclusion's own words
// are allocmark's.
struct VerdictReport {
  std::vector<Verdict> verdicts;
  std::vector<std::string> labels;         // each row's first column
  std::vector<bool> collapsed;             // rows folded away in markdown
  std::array<std::string, 3> headings;     // {first column, before, after}
  std::string collapsed_name;              // what the folded rows are ("pass", "same")
  std::string conclusion;                  // the one line: "gate: PASS (...)"
  std::vector<std::string> context;        // lines before the rows: the folders, a machine difference
};
std::string render_verdict_report(const VerdictReport& report, bool markdown);

// table | markdown | json
std::string render_gate(const GateResult& result, const std::string& format);

}  // namespace allocmark::gate
