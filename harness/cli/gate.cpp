// `allocmark gate BASELINE RESULTS` (or --baseline FILE --results DIR): a verdict per cell, phase
// and metric against a baseline (harness/gate/verdict.h has the rule; docs/gate.md its reasoning).
#include <fmt/format.h>

#include <cmath>
#include <filesystem>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <set>

#include "harness/cli/common.h"
#include "harness/cli/history.h"
#include "harness/gate/confirm.h"
#include "harness/gate/verdict.h"
#include "harness/history/bmf.h"
#include "harness/history/changepoints.h"
#include "harness/results/model.h"
#include "harness/results/folder_layout.h"
#include "harness/results/safe_text.h"
#include "harness/runner/session.h"

namespace allocmark::cli {

namespace {

namespace fs = std::filesystem;

double parse_tolerance(const std::string& text) {
  std::string t = text;
  bool percent = !t.empty() && t.back() == '%';
  if (percent) t.pop_back();
  std::size_t used = 0;
  double v = 0;
  try {
    v = std::stod(t, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (t.empty() || used != t.size() || !std::isfinite(v) || v < 0)
    throw matrix::ConfigError("--tolerance: '" + text + "' is not a non-negative number or percentage (e.g. 5%)");
  const double tolerance = percent ? v / 100 : v;
  // A move of more than the whole baseline value can never count: such a gate passes everything.
  if (tolerance > 1)
    throw matrix::ConfigError(fmt::format("--tolerance: '{}' is {:g}%, above 100%, which passes every change (a fraction "
                                          "or a percentage: 0.05 or 5%)",
                                          text, 100 * tolerance));
  return tolerance;
}

void check_results_folder(const std::string& dir) {
  std::error_code ec;
  // Named by both spellings: the input may have come as the second positional or as --results.
  if (!fs::exists(dir, ec)) throw matrix::ConfigError("RESULTS (--results) " + dir + ": no such results folder");
  if (!fs::is_directory(dir, ec))
    throw matrix::ConfigError("RESULTS (--results) " + dir + ": a file; RESULTS takes the results folder to judge and "
                              "comes second (`gate BASELINE RESULTS`); the baseline file comes first");
  results::refuse_folder_being_written(dir, "wait for it to end: the gate would judge a partial run");
}

// The folder a confirming rerun writes: new (or empty), and not one of the judged folder's own files.
void check_confirm_out(const std::string& out, const std::string& results) {
  std::error_code ec;
  if (fs::exists(out, ec) && !fs::is_directory(out, ec))
    throw matrix::ConfigError("--confirm-out " + out + ": a file; --confirm-out names the folder the confirming rerun writes");
  if (!fs::is_directory(out, ec)) {
    check_output_file(out, "--confirm-out", {results});
    return;
  }
  namespace lay = results::layout;
  for (const char* own : {lay::kResults, lay::kMeta, lay::kParts, lay::kSlurm})
    if (fs::exists(fs::path(out) / own, ec))
      throw matrix::ConfigError("--confirm-out " + out + ": already holds results (" + own +
                                "); choose another --confirm-out or remove it");
  check_output_file(lay::path_in(out, lay::kResults), "--confirm-out", {results});
}

std::string default_confirm_dir(std::string results_dir) {
  while (results_dir.size() > 1 && results_dir.back() == '/') results_dir.pop_back();
  return results_dir + "-confirm";
}

struct GateFlags {
  std::string baseline, results, tolerance = "5%", phase, format = "table", confirm_out, confirm_matrix;
  std::vector<std::string> metrics_raw;
  bool strict = false, allow_mismatch = false, confirm = false;
  bool bisect = false;  // --bisect: git bisect run's exit codes (kExitCannotJudge)
  std::string history_db;  // --history DB: the judged run is added there after judging
  history::RunLabels history_labels;
};

// Positional like `compare BEFORE AFTER` and `baseline DIR`. The flags of earlier versions still
// work, hidden from --help: each hands its value to its positional, so the positional's
// requirement, help line and usage are the only ones. The flags are declared first because
// CLI11 runs callbacks in declaration order, before it checks requirements.
void add_gate_inputs(CLI::App* cmd, GateFlags& f) {
  auto positionals = std::make_shared<std::map<std::string, CLI::Option*>>();
  for (const char* flag : {"--baseline", "--results"}) {
    cmd->add_option_function<std::string>(flag,
                                          [positionals, flag = std::string(flag)](const std::string& value) {
                                            CLI::Option* positional = positionals->at(flag);
                                            if (positional->count() > 0)
                                              throw CLI::ValidationError(flag + " and " + positional->get_name() +
                                                                         ": both given; give it once, as " +
                                                                         positional->get_name());
                                            positional->add_result(value);
                                          })
        ->group("");
  }
  (*positionals)["--baseline"] =
      cmd->add_option("baseline", f.baseline, "the baseline file (`allocmark baseline DIR -o FILE` writes it)")->required();
  (*positionals)["--results"] = cmd->add_option("results", f.results, "the results folder to judge")->required();
}

void add_gate_options(CLI::App* cmd, GateFlags& f, const std::string& default_metric) {
  cmd->add_option("--metric", f.metrics_raw,
                  results::metric_names(results::gated_metrics()) + " (comma separated; default " + default_metric + ")");
  cmd->add_option("--tolerance", f.tolerance, "smallest relative move that can count, e.g. 5% (default 5%)");
  cmd->add_option("--phase", f.phase, "judge only this phase");
  cmd->add_option("--format", f.format,
                  "how stdout gives the verdicts: table (a terminal; the verdict line last), markdown (a pull-request "
                  "comment: the verdict line first, passes folded), json, or bmf (RESULTS' judged figures in Bencher "
                  "Metric Format; the verdict line on stderr) (default table)");
  cmd->add_flag("--strict", f.strict, "a change of library, version, environment or parameters makes a cell not comparable");
  cmd->add_flag("--confirm", f.confirm,
                "rerun only the cells flagged regressed or improved, interleaved, and keep the verdicts the rerun flags again");
  cmd->add_option("--confirm-out", f.confirm_out,
                  "the results folder the confirming rerun writes (default RESULTS-confirm; must not hold results)");
  cmd->add_option("--confirm-matrix", f.confirm_matrix,
                  "matrix file whose allocators and programs the rerun's cells must match (the rerun runs what the "
                  "baseline names, never what the results folder does; docs/gate.md)");
  cmd->add_flag("--allow-mismatch", f.allow_mismatch, "judge even when the machine differs (verdicts say so)");
  cmd->add_flag("--bisect", f.bisect,
                "exit codes for `git bisect run`: 0 pass, 1 regressed or missing, 125 cannot judge this commit (not "
                "comparable, or RESULTS has no finished cell); bad usage stays 2 (docs/history.md, Bisecting)");
  cmd->add_option("--history", f.history_db,
                  "after judging, add RESULTS to this history file under --commit (docs/history.md)");
  add_history_label_flags(cmd, f.history_labels);
}

// --history's flags, checked before judging so a typo costs no run; an existing history file is
// opened (and migrated) now, so one that is not a history is refused before any verdict.
void check_history_flags(const GateFlags& f) {
  const bool labelled = !f.history_labels.commit.empty() || !f.history_labels.time.empty() || !f.history_labels.testbed.empty() ||
                        f.history_labels.branch != history::RunLabels{}.branch;
  if (f.history_db.empty()) {
    if (labelled) throw matrix::ConfigError("--commit, --branch, --time, --testbed: need --history DB");
    return;
  }
  if (f.history_labels.commit.empty()) throw matrix::ConfigError("--history: needs --commit SHA");
  if (std::string problem = history::commit_problem(f.history_labels.commit, "--commit"); !problem.empty())
    throw matrix::ConfigError(problem);
  if (!f.history_labels.time.empty()) (void)history::normalise_time(f.history_labels.time, "--time");
  std::error_code ec;
  if (fs::exists(f.history_db, ec)) history::HistoryDb opened(f.history_db, history::HistoryDb::Mode::write);
}

// The flags once checked, in the order the checks complain.
struct GateRun {
  std::vector<std::string> metrics;
  gate::RuleSettings rule;
  std::string out;  // the folder a confirming rerun writes
  std::optional<matrix::MatrixFile> confirm_matrix;
};

GateRun check_gate_flags(const GateFlags& f, const std::string& default_metric) {
  if (f.format != "table" && f.format != "markdown" && f.format != "json" && f.format != "bmf")
    throw matrix::ConfigError("--format: '" + f.format + "' (choose from table, markdown, json, bmf)");
  GateRun run;
  run.metrics = parse_gate_metrics(f.metrics_raw, {default_metric});
  if (!f.confirm_out.empty() && !f.confirm) throw matrix::ConfigError("--confirm-out: needs --confirm");
  if (!f.confirm_matrix.empty() && !f.confirm) throw matrix::ConfigError("--confirm-matrix: needs --confirm");
  run.rule.tolerance = parse_tolerance(f.tolerance);
  run.rule.strict = f.strict;
  run.rule.allow_mismatch = f.allow_mismatch;
  check_results_folder(f.results);
  check_history_flags(f);
  run.out = f.confirm_out.empty() ? default_confirm_dir(f.results) : f.confirm_out;
  if (f.confirm) {
    check_confirm_out(run.out, f.results);
    if (!f.confirm_matrix.empty()) run.confirm_matrix = matrix::load_matrix_file(f.confirm_matrix, false, "--confirm-matrix");
  }
  return run;
}

// The fewest commits a stable segment needs before creep is judged against it: the change-point
// method's own minimum segment, so a series that history changes could not yet split is not judged.
const std::size_t kCreepMinCommits = history::ChangePointOptions{}.min_segment;

// One gated series' last stable segment in the history, read before the run is added; none while it
// holds fewer than kCreepMinCommits commits.
std::optional<gate::StableSegment> stable_segment(const history::HistoryDb& db, const history::RunInfo& run,
                                                  const history::CellInfo& cell, const std::string& phase,
                                                  const std::string& metric) {
  std::vector<history::SeriesPoint> points = db.series(cell.cell_id, phase, metric, run.branch, run.testbed);
  // A rerun of the gated commit already in the history must not be part of what it is judged against.
  std::erase_if(points, [&](const history::SeriesPoint& p) { return p.commit == run.commit; });
  const std::size_t start = points.empty() ? 0 : history::last_stable_segment(points);
  // A segment of one or two commits has only its runs' own repetitions, not the spread from one
  // commit's run to the next, in its band: against it a run's ordinary machine-to-machine move reads
  // as creep, which a --confirm rerun on the same machine repeats (docs/gate.md "Creep against the history").
  if (points.size() - start < kCreepMinCommits) return std::nullopt;
  gate::StableSegment segment{gate::cell_name(cell.allocator, cell.workload, cell.threads) + " " + phase, metric,
                              points[start].commit, {}};
  for (std::size_t i = start; i < points.size(); ++i)
    segment.values.insert(segment.values.end(), points[i].values.begin(), points[i].values.end());
  return segment;
}

// The segments creep is judged against (docs/gate.md "Creep"): none before the history exists.
std::vector<gate::StableSegment> creep_segments(const GateFlags& f, const GateRun& run) {
  std::error_code ec;
  if (f.history_db.empty() || !fs::exists(f.history_db, ec)) return {};
  const history::FolderRun folder = history::read_folder_run(f.results, f.history_labels);
  const history::HistoryDb db(f.history_db, history::HistoryDb::Mode::read);
  std::vector<gate::StableSegment> segments;
  std::size_t short_series = 0;
  for (const auto& cell : folder.cells) {
    std::set<std::string> phases;
    for (const auto& v : cell.values)
      if (f.phase.empty() || v.phase == f.phase) phases.insert(v.phase);
    for (const auto& phase : phases)
      for (const auto& metric : run.metrics) {
        if (auto segment = stable_segment(db, folder.run, cell.cell, phase, metric)) segments.push_back(std::move(*segment));
        else ++short_series;
      }
  }
  if (short_series > 0)
    std::cerr << fmt::format("allocmark gate: creep not judged for {} series: the history holds fewer than {} commits of "
                             "them since their last change (docs/gate.md \"Creep against the history\")\n",
                             short_series, kCreepMinCommits);
  return segments;
}

gate::RunSummary read_gate_baseline(const std::string& path) {
  gate::RunSummary base = gate::read_baseline(path);
  // Read the same as ever; said so that whoever owns the file knows its next rewrite changes the keys.
  if (base.baseline_format < gate::kBaselineVersion)
    std::cerr << fmt::format("allocmark gate: note: {} is a baseline of format {} (values under the metrics' old "
                             "names), read as before; `allocmark baseline` now writes format {}\n",
                             results::terminal_line(path), base.baseline_format, gate::kBaselineVersion);
  return base;
}

// The rerun's verdicts (none when the plan is empty), judged as the first reading was (against the
// baseline, then for creep against the same segments), or nothing when it was interrupted.
std::optional<gate::GateResult> rerun_flagged(const gate::ConfirmationPlan& confirmation, std::size_t flagged, const GateFlags& f,
                                              const GateRun& run, const gate::RunSummary& base,
                                              const std::vector<gate::StableSegment>& segments) {
  if (confirmation.plan.cells.empty()) return gate::GateResult{};
  std::cerr << fmt::format("allocmark gate: {} verdicts flagged; confirming with a rerun of their cells ({} runs, "
                           "interleaved, as the baseline names them) into {}\n",
                           flagged, confirmation.plan.cells.size(), run.out);
  runner::SessionOptions rerun_options;
  rerun_options.out_dir = run.out;
  rerun_options.command = command_line();
  rerun_options.mode = "gate --confirm";
  rerun_options.worker = worker_path();
  const runner::MatrixRunReport report = runner::RunSession(confirmation.plan, std::move(rerun_options)).run().report;
  if (report.interrupted) {
    std::cerr << "allocmark gate: interrupted during the confirming rerun; no verdict\n";
    return std::nullopt;
  }
  const gate::RunSummary again = gate::summarize_run(run.out);
  gate::GateResult judged = gate::judge(base, again, run.metrics, f.phase, run.rule);
  gate::judge_creep(judged, again, segments, run.rule);
  return judged;
}

// Keeps the flagged verdicts (creep's among them) a rerun flags again; false when the rerun was interrupted.
bool confirm_flagged(gate::GateResult& result, const GateFlags& f, const GateRun& run, const gate::RunSummary& base,
                     const gate::RunSummary& now, const std::vector<gate::StableSegment>& segments) {
  std::vector<gate::Verdict> flagged;
  for (const auto& v : result.verdicts)
    if (gate::needs_confirmation(v)) flagged.push_back(v);
  if (flagged.empty()) return true;
  const matrix::MatrixFile variants = load_variants();
  gate::ConfirmationPlan confirmation =
      gate::plan_confirmation(flagged, {base, f.baseline, now, f.results, variants, run.confirm_matrix});
  for (const auto& note : confirmation.notes) std::cerr << "allocmark gate: note: " << note << "\n";
  for (const auto& [cell, why] : confirmation.not_rerun)
    std::cerr << "allocmark gate: not rerunning " << results::terminal_line(cell) << ": " << results::terminal_line(why) << "\n";
  const std::optional<gate::GateResult> rerun = rerun_flagged(confirmation, flagged.size(), f, run, base, segments);
  if (!rerun) return false;
  result = gate::confirm(result, *rerun, confirmation.not_rerun);
  result.summary += confirmation.plan.cells.empty()
                        ? fmt::format(" with {} flagged verdicts not rerun", flagged.size())
                        : fmt::format(" after a confirming rerun of {} flagged verdicts ({})", flagged.size(), run.out);
  return true;
}

// git bisect run skips a commit that exits 125: what RESULTS cannot tell about this commit.
constexpr int kExitCannotJudge = 125;

// Under --bisect, why RESULTS cannot judge its commit (no folder, no finished cell), "" when it can.
std::string unjudgeable_results(const std::string& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return dir + ": no such results folder";
  try {
    (void)results::Model::load({dir});
  } catch (const results::ResultsError& e) {
    return e.what();
  }
  return "";
}

int run_gate(const GateFlags& f, const std::string& default_metric) {
  if (f.bisect)
    if (std::string why = unjudgeable_results(f.results); !why.empty()) {
      std::cerr << "allocmark gate: cannot judge this commit (exit 125 for git bisect): " << results::terminal_line(why) << "\n";
      return kExitCannotJudge;
    }
  const GateRun run = check_gate_flags(f, default_metric);
  gate::RunSummary base = read_gate_baseline(f.baseline);
  gate::RunSummary now = gate::summarize_run(f.results);
  gate::GateResult result = gate::judge(base, now, run.metrics, f.phase, run.rule);
  gate::require_judgement(result, base, f.baseline, run.metrics, f.phase);
  // Creep is judged on the first reading, so that --confirm reruns its cells as it does the baseline's flags.
  const std::vector<gate::StableSegment> segments = creep_segments(f, run);
  gate::judge_creep(result, now, segments, run.rule);
  if (f.confirm && !confirm_flagged(result, f, run, base, now, segments)) return static_cast<int>(kExitInterrupted);
  if (f.format == "bmf") {
    // Bencher judges the figures itself; the gate's verdict line goes to stderr and its exit code stands.
    const results::Model model = results::Model::load({f.results});
    std::cout << history::bmf_text(history::bmf_of_cells(history::model_cells(model).cells, run.metrics, f.phase));
    std::cerr << "allocmark " << result.summary << "\n";
  } else {
    std::cout << gate::render_gate(result, f.format);
  }
  if (!f.history_db.empty()) {
    std::cout.flush();
    add_to_history(f.history_db, f.results, f.history_labels, "allocmark gate");
  }
  if (f.bisect && result.exit_code == 2) {
    std::cerr << "allocmark gate: not comparable: cannot judge this commit (exit 125 for git bisect)\n";
    return kExitCannotJudge;
  }
  return result.exit_code;
}

}  // namespace

std::vector<std::string> parse_gate_metrics(const std::vector<std::string>& raw, const std::vector<std::string>& fallback) {
  if (raw.empty()) return fallback;
  std::vector<std::string> metrics;
  for (const auto& name : split_commas(raw, "--metric")) {
    std::vector<std::string> notes;
    try {
      results::parse_metric_name(name, "--metric", results::gated_metrics(), notes);
      metrics.push_back(gate::find_gate_metric(name)->name);
    } catch (const results::ResultsError& e) {
      throw matrix::ConfigError(e.what());
    }
    for (const auto& note : notes) std::cerr << "allocmark: note: " << note << "\n";
  }
  return metrics;
}

Subcommand add_gate_command(CLI::App& app) {
  auto f = std::make_shared<GateFlags>();
  auto* cmd = app.add_subcommand("gate", "judge a results folder against a baseline and print the verdicts (--format): exit 0 "
                                         "pass, 1 regressed or missing, 2 not comparable");
  add_gate_inputs(cmd, *f);
  const std::string default_metric(results::metric_row(results::Metric::peak_rss_bytes).name);
  add_gate_options(cmd, *f, default_metric);
  return {cmd, [f, default_metric] { return run_gate(*f, default_metric); }};
}

}  // namespace allocmark::cli
